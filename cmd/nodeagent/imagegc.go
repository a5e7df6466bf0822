package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodeagent/nodeagent/imagegc"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/runtime"
)

// runImageGC runs image garbage collection over rt (the agent's containerd
// namespace) until ctx is done, with events on the Node as kubelet sends
// them (FreeDiskSpaceFailed, ImageGCFailed).
func (a *agent) runImageGC(ctx context.Context, rt *runtime.Runtime) {
	log := a.base.With("component", "imagegc")
	policy := imagegc.Policy{
		HighThresholdPercent: int(a.cfg.ImageGCHighThresholdPercent),
		LowThresholdPercent:  int(a.cfg.ImageGCLowThresholdPercent),
		MinAge:               a.cfg.ImageMinimumGCAge.Duration,
		MaxAge:               a.cfg.ImageMaximumGCAge.Duration,
	}
	o := imagegc.Options{
		Policy:  policy,
		Runtime: rt,
		Usage: func(ctx context.Context) (imagegc.Usage, error) {
			root, err := rt.ImageFSRoot(ctx)
			if err != nil {
				return imagegc.Usage{}, fmt.Errorf("image filesystem: %w", err)
			}
			u, err := runtime.StatFS(root)
			return imagegc.Usage{Capacity: u.Capacity, Available: u.Available}, err
		},
		// kubelet's node reference: its UID is the node's name.
		Node:   &v1.ObjectReference{Kind: "Node", Name: a.nodeName, UID: types.UID(a.nodeName)},
		Clock:  a.clock,
		Logger: log,
	}
	if a.client != nil && !policy.Disabled() {
		bc := record.NewBroadcaster()
		bc.StartRecordingToSink(a.events.Events())
		defer bc.Shutdown()
		o.Recorder = bc.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: kubetypes.EventComponent, Host: a.nodeName})
	}
	c := imagegc.New(o)
	a.imageGC.Store(c) // the eviction manager frees images under disk pressure
	c.Run(ctx)
}
