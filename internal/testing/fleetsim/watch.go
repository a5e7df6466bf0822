package fleetsim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Transition is a simulated node the control plane stopped seeing as
// healthy: its Ready condition left True, or the node lifecycle
// controller's unreachable or not-ready taint appeared, after the node had
// been Ready. Every simulated node is healthy, so each is a false alarm.
type Transition struct {
	At     time.Time
	Node   string
	Reason string
}

// NodeWatcher watches the Nodes whose names start with a prefix and records
// their Transitions.
type NodeWatcher struct {
	prefix string
	now    func() time.Time

	mu          sync.Mutex
	ok          map[string]bool // last seen healthy
	transitions []Transition
}

// WatchNodes starts a NodeWatcher with the admin client. Its cache keeps
// only what it needs of each Node (name, Ready, taints), not the images.
func WatchNodes(ctx context.Context, admin kubernetes.Interface, prefix string) (*NodeWatcher, error) {
	w := &NodeWatcher{prefix: prefix, now: time.Now, ok: map[string]bool{}}
	f := informers.NewSharedInformerFactory(admin, 0)
	inf := f.Core().V1().Nodes().Informer()
	if err := inf.SetTransform(slimNode); err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj) },
		UpdateFunc: func(_, obj any) { w.observe(obj) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("node watch: %w", ctx.Err())
	}
	return w, nil
}

// slimNode drops everything but the name, the Ready condition and the taints.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion}}
	out.Spec.Taints = n.Spec.Taints
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return out, nil
}

// Health says whether n looks healthy to the control plane, and why not.
func Health(n *corev1.Node) (ok bool, reason string) {
	ready := corev1.ConditionUnknown
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status
			if c.Status != corev1.ConditionTrue {
				reason = fmt.Sprintf("Ready=%s (%s)", c.Status, c.Reason)
			}
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady {
			reason = strings.TrimSpace(reason + " taint " + t.Key + ":" + string(t.Effect))
		}
	}
	return ready == corev1.ConditionTrue && reason == "", reason
}

func (w *NodeWatcher) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || !strings.HasPrefix(n.Name, w.prefix) {
		return
	}
	healthy, reason := Health(n)
	w.mu.Lock()
	defer w.mu.Unlock()
	was, seen := w.ok[n.Name]
	w.ok[n.Name] = healthy
	if seen && was && !healthy {
		w.transitions = append(w.transitions, Transition{At: w.now(), Node: n.Name, Reason: reason})
	}
}

// Transitions returns the transitions seen so far.
func (w *NodeWatcher) Transitions() []Transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Transition(nil), w.transitions...)
}

// Healthy returns how many of the watched nodes look healthy now, of how many seen.
func (w *NodeWatcher) Healthy() (healthy, seen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ok := range w.ok {
		if ok {
			healthy++
		}
	}
	return healthy, len(w.ok)
}
