package main

import (
	"context"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/shutdown"
)

// nodeShutdown wires graceful node shutdown (shutdownGracePeriod). A nil
// *nodeShutdown is the feature turned off: never shutting down, run
// returns at once.
type nodeShutdown struct {
	a   *agent
	m   *shutdown.Manager
	pm  atomic.Pointer[pods.Manager] // set once the pod workers run
	rec record.EventRecorder         // set by run before the manager runs
}

// newShutdown makes the shutdown manager; nil when shutdownGracePeriod is 0
// and shutdownGracePeriodByPodPriority empty.
func (a *agent) newShutdown() (*nodeShutdown, error) {
	s := &nodeShutdown{a: a}
	m, err := shutdown.New(shutdown.Options{
		GracePeriod:         a.cfg.ShutdownGracePeriod.Duration,
		CriticalGracePeriod: a.cfg.ShutdownGracePeriodCriticalPods.Duration,
		ByPodPriority:       shutdownBands(a.cfg.ShutdownGracePeriodByPodPriority),
		Connect:             shutdown.SystemBus,
		Pods:                s,
		SyncNodeStatus:      func(ctx context.Context) error { return a.ns.SyncOnce(ctx) },
		Event:               s.event,
		Clock:               a.clock,
		Logger:              a.base.With("component", "shutdown", "node", a.nodeName),
	})
	if m == nil || err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// shutdownBands are shutdownGracePeriodByPodPriority's bands.
func shutdownBands(c []config.ShutdownGracePeriodByPodPriority) []shutdown.Band {
	out := make([]shutdown.Band, 0, len(c))
	for _, b := range c {
		out = append(out, shutdown.Band{Priority: b.Priority, Grace: time.Duration(b.ShutdownGracePeriodSeconds) * time.Second})
	}
	return out
}

// ShuttingDown is the manager's verdict (nil when the feature is off).
func (s *nodeShutdown) ShuttingDown() error {
	if s == nil {
		return nil
	}
	return s.m.ShuttingDown()
}

// usePods hands the running pod workers to the shutdown manager.
func (s *nodeShutdown) usePods(pm *pods.Manager) {
	if s != nil {
		s.pm.Store(pm)
	}
}

// run watches for the node's shutdown until ctx is done, with events on
// the Node as kubelet records them.
func (s *nodeShutdown) run(ctx context.Context) {
	if s == nil {
		return
	}
	if s.a.client != nil {
		bc := record.NewBroadcaster()
		bc.StartRecordingToSink(s.a.events.Events())
		defer bc.Shutdown()
		s.rec = bc.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: kubetypes.EventComponent, Host: s.a.nodeName})
	}
	s.m.Run(ctx)
}

func (s *nodeShutdown) event(typ, reason, msg string) {
	if s.rec != nil {
		// kubelet's node reference: its UID is the node's name.
		s.rec.Event(&v1.ObjectReference{Kind: "Node", Name: s.a.nodeName, UID: types.UID(s.a.nodeName)}, typ, reason, msg)
	}
}

func (s *nodeShutdown) ActivePods() []*v1.Pod {
	if pm := s.pm.Load(); pm != nil {
		return pm.ActivePods()
	}
	return nil
}

func (s *nodeShutdown) StopPods(ctx context.Context, uids []types.UID, maxGrace time.Duration) error {
	if pm := s.pm.Load(); pm != nil {
		return pm.StopPods(ctx, uids, maxGrace, pods.StopForNodeShutdown)
	}
	return nil
}

var _ shutdown.Pods = (*nodeShutdown)(nil)
