package fault

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// startPods creates n pods (one long-running container each) on the
// agent's node and waits until they all run. It returns their names.
func (a *agent) startPods(n int) []string {
	a.t.Helper()
	ctx := context.Background()
	// A fresh cluster's controller manager creates the default service
	// account a few seconds after start; the API server admits no pod in
	// the namespace before it exists.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := a.env.Admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		a.t.Fatal("no default service account within 60s")
	}
	var names []string
	for range n {
		a.pods++
		name := fmt.Sprintf("%s-%d", a.node, a.pods)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{
				NodeName:                      a.node,
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{
					Name: "sleep", Image: testimage.Ref, Command: []string{"sleep", stableSleep},
				}},
			},
		}
		if _, err := a.env.Admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			a.t.Fatal(err)
		}
		names = append(names, name)
	}
	start := time.Now()
	a.waitPods(names, 90*time.Second)
	a.t.Logf("%d pods running %s after creation", n, time.Since(start).Round(time.Millisecond))
	return names
}

// stableSleep is how long the stable pods' containers sleep: longer than
// any run. (The first 2-hour soak had them sleep 3600, and all six exited
// together an hour in, as sleep does; the soak counted six restarts
// without cause.)
const stableSleep = "1000000000"

// waitPods waits until every named pod is Running with its container
// running and ready.
func (a *agent) waitPods(names []string, timeout time.Duration) {
	a.t.Helper()
	var notYet string
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			p, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				notYet = n + ": " + err.Error()
				return false, nil
			}
			cs := p.Status.ContainerStatuses
			if p.Status.Phase != corev1.PodRunning || len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready {
				notYet = fmt.Sprintf("%s: phase %s containers %+v", n, p.Status.Phase, cs)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		a.t.Fatalf("pods not all running within %s: %s", timeout, notYet)
	}
}

// containerState is what must not change across a fault.
type containerState struct {
	id       string
	restarts int32
	started  time.Time
}

// podContainers snapshots each pod's container ID, restart count and start
// time, as the API server has them.
func (a *agent) podContainers(names []string) map[string]containerState {
	a.t.Helper()
	out := map[string]containerState{}
	for _, n := range names {
		p, err := a.env.Admin.CoreV1().Pods("default").Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			a.t.Fatal(err)
		}
		for _, c := range p.Status.ContainerStatuses {
			var started time.Time
			if c.State.Running != nil {
				started = c.State.Running.StartedAt.Time
			}
			out[n+"/"+c.Name] = containerState{id: c.ContainerID, restarts: c.RestartCount, started: started}
		}
	}
	return out
}

// checkNoRestart compares two snapshots of podContainers.
func (a *agent) checkNoRestart(before, after map[string]containerState) {
	a.t.Helper()
	for k, b := range before {
		if got := after[k]; got != b {
			a.t.Errorf("container %s changed across the fault: before %+v, after %+v", k, b, got)
		}
	}
	if len(after) != len(before) {
		a.t.Errorf("%d containers before the fault, %d after", len(before), len(after))
	}
	a.t.Logf("%d containers: same IDs, start times and restart counts (0) after the fault", len(before))
}
