package objcache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
)

func TestSecretsWatched(t *testing.T) {
	ctx := context.Background()
	other := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}}
	client := fake.NewClientset(other)
	var lists, watches atomic.Int32
	var selectors sync.Map
	client.PrependReactor("list", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		selectors.Store(a.(k8stesting.ListAction).GetListRestrictions().Fields.String(), true)
		return false, nil, nil
	})
	client.PrependWatchReactor("secrets", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches.Add(1)
		return false, nil, nil
	})
	c := NewSecrets(client.CoreV1().Secrets, testlog.New(t))
	var mu sync.Mutex
	var changes [][]types.UID
	c.OnChange(func(uids []types.UID, ns, name string) {
		if ns != "ns" || name != "s" {
			t.Errorf("change of %s/%s", ns, name)
		}
		mu.Lock()
		changes = append(changes, uids)
		mu.Unlock()
	})
	nChanges := func() int { mu.Lock(); defer mu.Unlock(); return len(changes) }

	// Missing: kubelet's NotFound ("secret "s" not found"); other objects
	// the fake returns despite the field selector are ignored.
	_, err := c.Get(ctx, "pod-a", "ns", "s")
	if !apierrors.IsNotFound(err) || err.Error() != `secret "s" not found` {
		t.Fatalf("Get = %v, want NotFound", err)
	}
	if _, ok := selectors.Load("metadata.name=s"); !ok {
		t.Error("the list did not select the object by name")
	}
	backofftest.WaitFor(t, func() bool { return watches.Load() == 1 }, "the watch")
	// Created: the users hear of it and Get answers from memory.
	if _, err := client.CoreV1().Secrets("ns").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	backofftest.WaitFor(t, func() bool { return nChanges() == 1 }, "the change")
	if _, err := c.Get(ctx, "pod-b", "ns", "s"); err != nil {
		t.Fatal(err)
	}
	s, err := c.Get(ctx, "pod-a", "ns", "s")
	if err != nil || string(s.Data["k"]) != "v" {
		t.Fatalf("Get = %v, %v", s, err)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("%d lists for three Gets, want 1", n)
	}
	// Updated: both pods hear of it.
	s = s.DeepCopy()
	s.Data["k"] = []byte("v2")
	if _, err := client.CoreV1().Secrets("ns").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	backofftest.WaitFor(t, func() bool { return nChanges() == 2 }, "the update")
	mu.Lock()
	if len(changes[1]) != 2 {
		t.Errorf("update told %v, want both pods", changes[1])
	}
	mu.Unlock()
	got, _ := c.Get(ctx, "pod-a", "ns", "s")
	if string(got.Data["k"]) != "v2" {
		t.Errorf("after the update: %q", got.Data["k"])
	}
	// Deleted: NotFound again.
	if err := client.CoreV1().Secrets("ns").Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	backofftest.WaitFor(t, func() bool { return nChanges() == 3 }, "the deletion")
	if _, err := c.Get(ctx, "pod-a", "ns", "s"); !apierrors.IsNotFound(err) {
		t.Errorf("Get after delete = %v", err)
	}
	// The watch stops with its last user.
	c.Release("pod-a")
	if c.Watched() != 1 {
		t.Errorf("%d watched after one of two users left, want 1", c.Watched())
	}
	c.Release("pod-b")
	if c.Watched() != 0 {
		t.Errorf("%d watched after both users left, want 0", c.Watched())
	}
}

func TestGetForbidden(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "c", nil)
	})
	c := NewConfigMaps(client.CoreV1().ConfigMaps, testlog.New(t))
	start := time.Now()
	_, err := c.Get(context.Background(), "pod", "ns", "c")
	if !apierrors.IsForbidden(err) {
		t.Errorf("Get = %v, want the list's Forbidden", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Get took %v to report the failed list, want at once", d)
	}
	c.Release("pod")
}

func TestImmutableStopsWatching(t *testing.T) {
	imm := true
	client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Immutable: &imm, Data: map[string]string{"k": "v"}})
	var watches atomic.Int32
	client.PrependWatchReactor("configmaps", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches.Add(1)
		return false, nil, nil
	})
	c := NewConfigMaps(client.CoreV1().ConfigMaps, testlog.New(t))
	cm, err := c.Get(context.Background(), "pod", "ns", "c")
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("Get = %v, %v", cm, err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := watches.Load(); n != 0 {
		t.Errorf("%d watches of an immutable ConfigMap, want 0", n)
	}
	if _, err := c.Get(context.Background(), "pod", "ns", "c"); err != nil {
		t.Fatal(err)
	}
	c.Release("pod") // closes the stopped watch's channel once only
}
