package nodestatus

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// While the node shuts down, Ready is False with kubelet's reason and
// message; after a cancelled shutdown it is True again.
func TestReadyFollowsShutdown(t *testing.T) {
	var shutting atomic.Bool
	e := newTestEnv(t, func(o *Options) {
		o.ShuttingDown = func() error {
			if shutting.Load() {
				return errors.New("node is shutting down")
			}
			return nil
		}
	})
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Fatalf("Ready before the shutdown: %+v", c)
	}
	shutting.Store(true)
	e.clock.Step(10 * time.Second)
	e.sync()
	c := condition(e.node(), v1.NodeReady)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != "node is shutting down" {
		t.Fatalf("Ready while shutting down: %+v", c)
	}
	shutting.Store(false)
	e.clock.Step(10 * time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Fatalf("Ready after the shutdown was cancelled: %+v", c)
	}
}
