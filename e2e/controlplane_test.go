package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/testenv"
)

// TestControlPlaneRunsASupportedEtcd: the local control plane's etcd is
// one Kubernetes 1.34 supports (hack/build-etcd.sh), not Debian's 3.4. The
// symptom of 3.4 is checked too: a watch that starts from "now" (no resource
// version) with its initial events needs etcd's progress notifications to
// learn that the watch cache is current; on etcd 3.4 it fails with "Too
// large resource version" instead of ending its initial events.
func TestControlPlaneRunsASupportedEtcd(t *testing.T) {
	t.Parallel()
	env := testenv.Cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.EtcdURL+"/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Server string `json:"etcdserver"`
	}
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var major, minor, patch int
	if _, err := fmt.Sscanf(v.Server, "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("etcd version %q: %v", v.Server, err)
	}
	t.Logf("etcd %s", v.Server)
	// Kubernetes 1.34 needs 3.5.13+ or 3.6 for watch progress requests
	// (KEP-2340); kubeadm v1.34 deploys 3.6.4.
	if major != 3 || minor < 5 || (minor == 5 && patch < 13) {
		t.Errorf("etcd %s, want 3.5.13 or later 3.x", v.Server)
	}

	// A namespace of its own with one ConfigMap (the root CA's, which the
	// controller manager adds, is not selected): after it nothing changes
	// under the watch, so only a progress notification can tell the watch
	// cache that it has caught up with the current revision.
	ns := testenv.NodeName(t)
	if _, err := env.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := env.Admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one", Labels: map[string]string{"etcd-test": "one"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	w, err := env.Admin.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		LabelSelector:        "etcd-test=one",
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       ptr.To[int64](30),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	added := 0
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			added++
		case watch.Bookmark:
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("bookmark of %T", ev.Object)
			}
			if cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				continue
			}
			t.Logf("initial events (%d) ended after %v", added, time.Since(start).Round(time.Millisecond))
			if added != 1 {
				t.Errorf("%d initial ADDED events, want 1", added)
			}
			return
		case watch.Error:
			t.Fatalf("watch error after %v: %v", time.Since(start).Round(time.Millisecond), ev.Object)
		}
	}
	t.Fatalf("the watch ended after %v without the end of its initial events", time.Since(start).Round(time.Millisecond))
}
