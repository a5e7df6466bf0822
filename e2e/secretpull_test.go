package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// KubeletEnsureSecretPulledImages (featureGates, default policy
// NeverVerifyPreloadedImages): an image the agent pulled from a loopback
// registry with basic auth, with a pod's pull secret, is served from the
// node to another pod with that secret (even with pullPolicy Never),
// while a pod without it must pull and gets the registry's 401, and under
// Never kubelet's ErrImageNeverPull as if the image were absent. About
// 25 s.
func TestSecretPulledImages(t *testing.T) {
	t.Parallel()
	reg, err := testimage.NewRegistry(map[string]string{"e2e": "pod-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	a, _ := readyPodAgent(t, "featureGates:\n  KubeletEnsureSecretPulledImages: true\n")
	ctx := context.Background()
	secrets := a.env.Admin.CoreV1().Secrets("default")
	cred := a.node + "-ensure"
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cred}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfigJSON(reg.Host, "e2e", "pod-secret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = secrets.Delete(context.Background(), cred, metav1.DeleteOptions{}) })

	image := reg.Host + "/private/busybox:v1"
	pod := func(name, policy, secret string) string {
		name = a.node + "-" + name
		body := fmt.Sprintf("  containers:\n  - name: app\n    image: %s\n    imagePullPolicy: %s\n    command: [\"sleep\", \"3600\"]\n", image, policy)
		if secret != "" {
			body += "  imagePullSecrets:\n  - name: " + secret + "\n"
		}
		kubectl(t, a.env, podYAML(name, a.node, body), "apply", "-f", "-")
		return name
	}
	first := pod("first", "IfNotPresent", cred)
	a.waitPod(ctx, first, 60*time.Second, "running with its pull secret", running)
	pulled, _ := filepath.Glob(filepath.Join(a.rootDir(), "image_manager", "pulled", "sha256-*"))
	if len(pulled) != 1 {
		t.Errorf("image pulled records %v, want one", pulled)
	} else if b, _ := os.ReadFile(pulled[0]); !containsAll(string(b), `"kind":"ImagePulledRecord"`, `"name":"`+cred+`"`) {
		t.Errorf("record %s", b)
	}
	manifests := reg.Manifests()

	// The same secret: served from the node, also under Never.
	same := pod("same", "Never", cred)
	a.waitPod(ctx, same, 30*time.Second, "running from the node's image with the same secret", running)
	a.waitEvent(ctx, "default", "involvedObject.name="+same, "kubelet's accessible-image event", func(e corev1.Event) bool {
		return e.Reason == "Pulled" && e.Message == fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", image)
	})
	if reg.Manifests() != manifests {
		t.Errorf("the pod with the same secret pulled again (%d manifests, before %d)", reg.Manifests(), manifests)
	}

	// No secret: the image on the node is not theirs.
	thief := pod("thief", "IfNotPresent", "")
	a.waitPod(ctx, thief, 30*time.Second, "ErrImagePull or ImagePullBackOff with the 401", func(p *corev1.Pod) bool {
		return waitingIs("ErrImagePull", "401 Unauthorized")(p) || waitingIs("ImagePullBackOff", "401 Unauthorized")(p)
	})
	never := pod("never", "Never", "")
	a.waitPod(ctx, never, 30*time.Second, "ErrImageNeverPull", waitingIs("ErrImageNeverPull",
		fmt.Sprintf("Container image %q is not present with pull policy of Never", image)))
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
