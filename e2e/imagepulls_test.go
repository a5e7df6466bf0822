package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// kubelet's registryPullQPS through the agent as pods pull: with one pull
// a second and a bucket of one, three pods created together pull one
// after the other (serializeImagePulls, the default); a pull that finds
// the bucket empty fails at once with kubelet's "pull QPS exceeded", its
// pod waits with ErrImagePull then ImagePullBackOff, and runs once its
// back-off is over. Every successful pull's event is kubelet's Pulled
// message with the time including the wait.
func TestImagePullQPS(t *testing.T) {
	t.Parallel()
	reg, err := testimage.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	a, _ := readyPodAgent(t, "registryPullQPS: 1\nregistryBurst: 1\n")
	ctx := context.Background()

	// A round creates three pods at once. Whether two of their pulls
	// come within a second of each other (the bucket's refill) depends on
	// how far apart the pods' sandboxes are ready, which a loaded machine
	// can spread; a round where no pull was refused is tried again, with
	// new pods, up to three times. Without the limit no round has one.
	exceededIn := func(names []string) int {
		n := 0
		for _, name := range names {
			evs, err := a.env.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs.Items {
				if e.Reason == "Failed" && strings.HasSuffix(e.Message, ": pull QPS exceeded") {
					n++
				}
			}
		}
		return n
	}
	var names []string
	for round := range 3 {
		var docs []string
		names = nil
		for i := range 3 {
			name := fmt.Sprintf("%s-qps-%d-%d", a.node, round, i)
			names = append(names, name)
			docs = append(docs, podYAML(name, a.node, fmt.Sprintf(`  containers:
  - name: app
    image: %s/qps%d-%d/busybox:v1
    imagePullPolicy: Always
    command: ["sleep", "3600"]
`, reg.Host, round, i)))
		}
		created := time.Now()
		kubectl(t, a.env, strings.Join(docs, "---\n"), "apply", "-f", "-")
		// Every pod either runs or has had a pull refused.
		for _, name := range names {
			a.waitPod(ctx, name, 60*time.Second, "running or refused a pull", func(p *corev1.Pod) bool {
				return running(p) || exceededIn([]string{name}) > 0
			})
		}
		if n := exceededIn(names); n > 0 {
			t.Logf("round %d: %d pulls refused of three pods created together", round, n)
			for _, name := range names {
				a.waitPod(ctx, name, 180*time.Second, "running after its back-off", running)
			}
			t.Logf("all three running %v after their creation", time.Since(created).Round(time.Millisecond))
			break
		}
		t.Logf("round %d: the three pulls came more than a second apart (no refusal); another round", round)
		kubectl(t, a.env, "", append([]string{"delete", "pod", "--wait=false"}, names...)...)
	}

	pulled := regexp.MustCompile(`^Successfully pulled image "[^"]+" in \S+ \(\S+ including waiting\)\. Image size: [1-9][0-9]* bytes\.$`)
	exceeded := 0
	for _, name := range names {
		evs, err := a.env.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs.Items {
			got = append(got, fmt.Sprintf("%s: %s (x%d)", e.Reason, e.Message, e.Count))
			if e.Reason == "Failed" && strings.HasSuffix(e.Message, ": pull QPS exceeded") {
				exceeded++
			}
		}
		t.Logf("%s:\n  %s", name, strings.Join(got, "\n  "))
	}
	if exceeded == 0 {
		t.Fatal("no pull failed with pull QPS exceeded in three rounds of three pulls requested together, against a bucket of one refilled once a second")
	}
	for _, name := range names {
		a.waitEvent(ctx, "default", "involvedObject.name="+name, "kubelet's Pulled message", func(e corev1.Event) bool {
			return e.Reason == "Pulled" && pulled.MatchString(e.Message)
		})
	}
	// The back-off's state: a pod whose pull was refused shows it in its
	// events as kubelet does.
	found := false
	for _, name := range names {
		evs, _ := a.env.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		for _, e := range evs.Items {
			found = found || (e.Reason == "Failed" && e.Message == "Error: ErrImagePull")
		}
	}
	if !found {
		t.Error("no Error: ErrImagePull event with the QPS failure")
	}
}
