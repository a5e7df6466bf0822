package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/csi"
	"github.com/nodeagent/nodeagent/internal/kubeclient"
	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/nodestatus"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// csiNode is the CSI node side: the plugin registration watcher and the
// mounter of persistentVolumeClaim and csi volumes. nil without an API
// client (a standalone agent runs static pods without them).
type csiNode struct {
	registry *csi.Registry
	mounter  *csi.Mounter
	// info writes the node's CSINode (and the Node's CSI parts).
	info *csi.NodeInfo
	// initErr is why the CSINode is not initialized yet (nil once it
	// is): a cause of Ready False, as kubelet's SetKubeletError.
	initErr atomic.Pointer[error]
	// tokens is the service account token cache of the mounter
	// (CSIDriver tokenRequests) and of the pods' projected volumes: one,
	// as kubelet's token manager.
	tokens *volume.Tokens
}

// newCSINode wires package csi to the agent's client: kubelet's
// <rootDir>/plugins_registry, the node's CSINode and Node, and the
// objects a pod's volumes name.
func (a *agent) newCSINode(c, events *kubeclient.Clientset) *csiNode {
	if c == nil {
		return nil
	}
	info := &csi.NodeInfo{NodeName: a.nodeName, Nodes: c.Nodes(), CSINodes: c.CSINodes()}
	reg := csi.NewRegistry(a.cfg.RootDir+"/plugins_registry", info, a.clock, a.base.With("component", "csi", "node", a.nodeName))
	tokens := volume.NewTokens(func(ns string) volume.ServiceAccountClient { return c.ServiceAccounts(ns) }, a.clock,
		a.base.With("component", "tokens", "node", a.nodeName))
	m := &csi.Mounter{
		RootDir: a.cfg.RootDir, NodeName: a.nodeName, Drivers: reg, Clock: a.clock,
		API: csi.API{
			PVCs: func(ns string) csi.Getter[*v1.PersistentVolumeClaim] { return c.PersistentVolumeClaims(ns) },
			PVs:  c.PersistentVolumes(), CSIDrivers: c.CSIDrivers(), VolumeAttachments: c.VolumeAttachments(),
			Secrets:   func(ns string) csi.Getter[*v1.Secret] { return c.Secrets(ns) },
			PVCStatus: func(ns string) csi.PVCPatcher { return c.PersistentVolumeClaims(ns) },
		},
		Log:      a.base.With("component", "csi", "node", a.nodeName),
		Recorder: csiRecorder(events, a.nodeName),
		Tokens:   tokens,
		// kubelet's CSIVolumeHealth gate (a restart field, as every gate).
		VolumeHealth: a.cfg.FeatureEnabled(config.FeatureCSIVolumeHealth),
		// kubelet's volumeStatsAggPeriod (negative: no volume stats).
		StatsPeriod: a.cfg.VolumeStatsAggPeriod.Duration,
	}
	// kubelet's kubelet_volume_stats_* on /metrics.
	a.reg.MustRegister(csi.VolumeStatsCollector{M: m})
	n := &csiNode{registry: reg, mounter: m, tokens: tokens, info: info}
	n.setInitErr(errors.New("CSINode is not yet initialized"))
	return n
}

// csiNodeInitBackoff is kubelet's initializeCSINode's: 6 tries from 30 ms,
// ×8 (about 140 s).
var csiNodeInitBackoff = wait.Backoff{Steps: 6, Duration: 30 * time.Millisecond, Factor: 8.0, Jitter: 0.1}

// initCSINode initializes the CSINode (bounded by ctx), then has the
// node status written at once: Ready waited for it.
func (a *agent) initCSINode(ctx context.Context) {
	for {
		err := wait.ExponentialBackoffWithContext(ctx, csiNodeInitBackoff, func(ctx context.Context) (bool, error) {
			err := a.csi.info.Initialize(ctx)
			if err != nil {
				a.csi.setInitErr(fmt.Errorf("failed to initialize CSINode: %v", err))
				a.log.Error("Failed to initialize CSINode", "err", err)
			}
			return err == nil, nil
		})
		if err == nil {
			a.csi.setInitErr(nil)
			a.ns.SyncSoon()
			return
		}
		if ctx.Err() != nil {
			return
		}
		a.log.Error("Failed to initialize CSINode after retrying; trying again", "err", err)
	}
}

func (n *csiNode) setInitErr(err error) {
	if err == nil {
		n.initErr.Store(nil)
		return
	}
	n.initErr.Store(&err)
}

// initialized is nodestatus's CSINodeReady; nil without CSI.
func (n *csiNode) initialized() func() error {
	if n == nil {
		return nil
	}
	return func() error {
		if p := n.initErr.Load(); p != nil {
			return *p
		}
		return nil
	}
}

// registeredPoll is how often the registration watcher's start checks
// whether the Node is registered (short: the Node is not Ready before the
// CSINode initialization that follows).
const registeredPoll = 50 * time.Millisecond

// runCSIRegistration runs the plugin registration watcher once the Node
// is registered (a driver's CSINode entry and labels need the Node; a
// registrar told "not registered" restarts).
func (a *agent) runCSIRegistration(ctx context.Context) {
	if a.csi == nil {
		return
	}
	// Bounded by ctx; the Node is registered in step 4.
	if err := wait.PollUntilContextCancel(ctx, registeredPoll, true, func(context.Context) (bool, error) {
		return a.registered.Load(), nil
	}); err != nil {
		return
	}
	// kubelet's initializeCSINode: the CSINode with the migrated-plugins
	// annotation, retried with its back-off (6 tries from 30 ms, ×8);
	// until it is written the Node is not Ready. Where kubelet exits after
	// the last try (and is restarted), the agent starts the back-off
	// again; the registrations run meanwhile (each writes the annotation
	// too).
	go a.initCSINode(ctx)
	if err := a.csi.registry.Run(ctx); err != nil {
		a.log.Error("CSI plugin registration stopped", "err", err)
	}
}

// volumesInUse is nodestatus's VolumesInUse; nil without CSI.
func (n *csiNode) volumesInUse() func() []v1.UniqueVolumeName {
	if n == nil {
		return nil
	}
	return n.mounter.VolumesInUse
}

// volumesSynced is nodestatus's VolumesInUseSynced; nil without CSI.
func (n *csiNode) volumesSynced() func() bool {
	if n == nil {
		return nil
	}
	return n.mounter.Synced
}

// markReported is nodestatus's VolumesReportedInUse; nil without CSI.
func (n *csiNode) markReported() func([]v1.UniqueVolumeName) {
	if n == nil {
		return nil
	}
	return n.mounter.MarkVolumesReportedInUse
}

// syncStatusOnChange makes a change of the volumes in use computed and
// written by the node status at once (the mount of an attachable volume
// waits for that write).
func (n *csiNode) syncStatusOnChange(ns *nodestatus.Manager) {
	if n == nil {
		return
	}
	n.mounter.InUseChanged = ns.SyncSoon
}

// reconstructVolumes is kubelet's volume reconstruction at start: the CSI
// volumes pods published before the agent's restart, from their
// directories and the mount table (csi.Mounter.Reconstruct).
func (a *agent) reconstructVolumes(ctx context.Context) {
	if a.csi == nil {
		return
	}
	vols := a.csi.mounter.Reconstruct(ctx, a.base.With("component", "csi", "node", a.nodeName))
	a.log.Info("volume reconstruction finished", "volumes", len(vols))
}

// podVolumeStats is the node API's PodVolumeStats; nil without CSI.
func (n *csiNode) podVolumeStats() func(context.Context, string) []statsapi.VolumeStats {
	if n == nil {
		return nil
	}
	return n.mounter.PodVolumeStats
}

// csiRecorder sends the CSI mounter's Events (volume expansion) as
// kubelet's; its broadcaster lives as long as the agent.
func csiRecorder(events *kubeclient.Clientset, nodeName string) record.EventRecorder {
	bc := record.NewBroadcaster()
	bc.StartRecordingToSink(events.Events())
	return bc.NewRecorder(kubeclient.Scheme, v1.EventSource{Component: kubetypes.EventComponent, Host: nodeName})
}
