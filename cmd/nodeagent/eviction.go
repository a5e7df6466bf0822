package main

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodeagent/nodeagent/cm"
	"github.com/nodeagent/nodeagent/eviction"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods"
	"github.com/nodeagent/nodeagent/runtime"
)

// protectFromOOMKiller sets the agent's own oom_score_adj (oomScoreAdj,
// kubelet's -999 by default): the kernel's OOM killer takes pods first.
func (a *agent) protectFromOOMKiller() {
	defer func() {
		if msg, floor := oomFloorWarning(runtime.OOMScoreAdjFloor()); msg != "" {
			a.log.Warn(msg, "floor", floor)
		}
	}()
	v := int(a.cfg.OOMScoreAdj)
	if err := cm.SetOOMScoreAdj("/proc/self/oom_score_adj", v); err != nil {
		a.log.Warn("cannot set the agent's oom_score_adj; the OOM killer may choose it before pods", "oomScoreAdj", v, "err", err)
		return
	}
	a.log.Info("set the agent's oom_score_adj", "oomScoreAdj", v)
}

// guaranteedOOMScoreAdj is kubelet's score for Guaranteed and critical
// pods' containers, the lowest it gives.
const guaranteedOOMScoreAdj = -997

// oomFloorWarning says, once at start, that containers cannot get kubelet's
// scores (the agent lacks CAP_SYS_RESOURCE, so runc cannot set a score below
// the agent's own, and scores are raised to that floor): "" when they can.
func oomFloorWarning(floor int) (string, int) {
	if floor <= guaranteedOOMScoreAdj {
		return "", floor
	}
	return "the agent has no CAP_SYS_RESOURCE: containers' oom_score_adj is raised to the agent's own where kubelet's is lower (Guaranteed and critical pods' -997, low Burstable scores); grant CAP_SYS_RESOURCE to get kubelet's scores", floor
}

// admitUnderPressure is the eviction admit handler: no new pods (or, under
// memory pressure alone, no new BestEffort pods) while the node reports a
// pressure condition.
func (a *agent) admitUnderPressure(pod *v1.Pod) (bool, string, string) {
	return eviction.Admit(pod, a.ns.Pressure())
}

// runEviction runs node-pressure eviction over the pods of pm until ctx is
// done; without hard or soft thresholds only the local storage limits
// (kubelet's localStorageCapacityIsolation, always on) are enforced.
func (a *agent) runEviction(ctx context.Context, rt *runtime.Runtime, pm *pods.Manager) {
	log := a.base.With("component", "eviction", "node", a.nodeName)
	if len(a.cfg.EvictionHard) == 0 && len(a.cfg.EvictionSoft) == 0 {
		log.Info("no eviction thresholds (evictionHard: {}, no evictionSoft): only local storage limits are enforced")
	}
	local := eviction.Stats{
		RootDir:          a.cfg.RootDir,
		PodLogsDir:       a.cfg.PodLogsDir,
		Containers:       rt.ListContainers,
		WritableLayer:    rt.WritableLayerUsage,
		DedicatedImageFS: eviction.DedicatedImageFS(ctx, rt.ImageFSRoot, a.cfg.RootDir),
	}
	o := eviction.Options{
		Observe:    a.ns.Signals,
		Updated:    a.ns.SignalsUpdated(),
		ActivePods: pm.ActivePods,
		Usage: eviction.Stats{
			RootDir:    a.cfg.RootDir,
			PodLogsDir: a.cfg.PodLogsDir,
			Containers: rt.ListContainers,
		}.Usage,
		Reclaim: []func(context.Context) error{func(ctx context.Context) error {
			n, err := pm.RemoveDeadContainers(ctx)
			log.Info("removed dead containers of terminated pods", "containers", n)
			return err
		}, func(ctx context.Context) error {
			c := a.imageGC.Load()
			if c == nil {
				return errors.New("image garbage collector not running")
			}
			freed, err := c.DeleteUnusedImages(ctx)
			log.Info("removed unused images", "freedBytes", freed)
			return err
		}},
		Evict: func(ctx context.Context, pod *v1.Pod, grace time.Duration, msg string) error {
			return pm.Evict(ctx, pod.UID, grace, eviction.Reason, msg)
		},
		LocalUsage: local.LocalUsage,
		EvictLocalStorage: func(ctx context.Context, pod *v1.Pod, grace time.Duration, msg string) error {
			return pm.EvictWithoutCondition(ctx, pod.UID, grace, eviction.Reason, msg)
		},
		SoftGracePeriods:         a.cfg.SoftGracePeriods(),
		MaxPodGracePeriodSeconds: int64(a.cfg.EvictionMaxPodGracePeriod),
		Node:                     &v1.ObjectReference{Kind: "Node", Name: a.nodeName, UID: types.UID(a.nodeName)},
		Clock:                    a.clock,
		Logger:                   log,
	}
	if a.client != nil {
		bc := record.NewBroadcaster()
		bc.StartRecordingToSink(a.events.Events())
		defer bc.Shutdown()
		o.Recorder = bc.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: kubetypes.EventComponent, Host: a.nodeName})
	}
	m, err := eviction.New(o)
	if err != nil {
		log.Error("cannot start node-pressure eviction", "err", err)
		return
	}
	m.Run(ctx)
}

// setMaxOpenFiles sets the agent's open files limit, soft and hard, to
// maxOpenFiles (kubelet's rlimit.SetNumFiles); 0 keeps the inherited one.
// As in kubelet, a failure is logged and the start goes on.
func (a *agent) setMaxOpenFiles() {
	if err := cm.SetMaxOpenFiles(a.cfg.MaxOpenFiles); err != nil {
		a.log.Error("Failed to set rlimit on max file handles", "maxOpenFiles", a.cfg.MaxOpenFiles, "err", err)
	}
}
