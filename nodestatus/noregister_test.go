package nodestatus

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
)

// kubelet's registerNode false: the agent creates no Node and waits,
// retrying with registration's back-off, until one exists; it then takes
// that Node as it is (no labels, taints or annotation of its own) and
// reports its status on it. A Node deleted later is not created again.
func TestNoRegisterWaitsForTheNode(t *testing.T) {
	e := newTestEnv(t, func(o *Options) {
		o.NoRegister = true
		// No runtime probes: ExpectDelays needs the retry loop to be
		// the clock's only waiter.
		o.RuntimeVersion, o.ListImages, o.RuntimeHealthy, o.PLEGHealthy = nil, nil, nil, nil
	})
	done := make(chan error, 1)
	go func() { _, err := e.m.Register(context.Background()); done <- err }()
	ms := time.Millisecond
	backofftest.ExpectDelays(t, e.clock, func() int { return e.count("get", "") }, 100*ms, 200*ms, 400*ms)
	if n := e.count("create", ""); n != 0 {
		t.Fatalf("%d node creates with registerNode false", n)
	}
	// An administrator creates the Node.
	admin := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{"admin": "made"}}}
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), admin, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	backofftest.WaitWaiting(t, e.clock)
	e.clock.Step(800 * ms)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Register did not return once the Node existed")
	}
	n := e.node()
	if len(n.Labels) != 1 || n.Labels["admin"] != "made" || len(n.Spec.Taints) != 0 || n.Spec.ProviderID != "" || n.Annotations[ControllerManagedAttachAnnotation] != "" {
		t.Errorf("registerNode false changed the Node's labels, taints, providerID or annotations: %+v %+v", n.ObjectMeta, n.Spec)
	}
	e.sync()
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("status not reported on the existing Node: Ready %+v", c)
	}

	if err := e.client.CoreV1().Nodes().Delete(context.Background(), testNode, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.m.SetFrequencies(0, time.Second)
	e.clock.Step(10 * time.Second)
	if err := e.m.SyncOnce(context.Background()); err == nil {
		t.Error("a status sync without the Node succeeded")
	}
	if n := e.count("create", ""); n != 1 { // the administrator's
		t.Errorf("%d node creates, want the administrator's alone", n)
	}
}
