package nodestatus

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Until the CSINode is initialized the Node is registered not Ready, with
// kubelet's message; once it is, Ready is True.
func TestReadyWaitsForCSINode(t *testing.T) {
	var done atomic.Bool
	e := newTestEnv(t, func(o *Options) {
		o.CSINodeReady = func() error {
			if !done.Load() {
				return errors.New("CSINode is not yet initialized")
			}
			return nil
		}
	})
	if _, err := e.m.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := condition(e.node(), v1.NodeReady)
	if c.Status != v1.ConditionFalse || c.Reason != "KubeletNotReady" || c.Message != "CSINode is not yet initialized" {
		t.Fatalf("Ready before the CSINode's initialization: %+v", c)
	}
	done.Store(true)
	e.clock.Step(time.Second)
	e.sync()
	if c := condition(e.node(), v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Fatalf("Ready after the CSINode's initialization: %+v", c)
	}
}
