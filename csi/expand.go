package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// PVCPatcher patches a claim (client-go's typed PVC client satisfies it):
// the node's part of volume expansion is written to the claim's status.
type PVCPatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.PersistentVolumeClaim, error)
}

// resizeConditions are kubelet's knownResizeConditions: the claim
// conditions of the resize flow.
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimResizing:                true,
	v1.PersistentVolumeClaimControllerResizeError:   true,
	v1.PersistentVolumeClaimNodeResizeError:         true,
}

// expandIfNeeded is kubelet's node expansion of a mounted volume
// (operationexecutor NodeExpander, with RecoverVolumeExpansionFailure as
// in 1.34): when the PV is larger than the claim's status.capacity (the
// resizer expanded the volume in the controller) and the claim's
// status.allocatedResourceStatuses[storage] is NodeResizePending or
// NodeResizeInProgress, the claim is marked NodeResizeInProgress, the
// driver's NodeExpandVolume grows the filesystem at the publish target
// (a raw block volume: the device, with a block capability),
// and the claim gets status.capacity the new size, its storage entry in
// allocatedResourceStatuses removed and its resize conditions dropped.
// A driver's InvalidArgument or OutOfRange marks the claim
// NodeResizeInfeasible with a NodeResizeError condition; another error
// that is final adds the NodeResizeError condition; either way the
// expansion is tried again at the pod's next sync.
//
// Success is the FileSystemResizeSuccessful Event on the pod and the
// claim, as kubelet sends it.
func (m *Mounter) expandIfNeeded(ctx context.Context, pod *v1.Pod, d *Driver, cv *csiVolume, caps map[csipb.NodeServiceCapability_RPC_Type]bool, target, staging string) error {
	pvc := cv.pvc
	if pvc == nil || m.API.PVCStatus == nil {
		return nil
	}
	oldSize := pvc.Status.Capacity[v1.ResourceStorage]
	if oldSize.Cmp(cv.pvSize) >= 0 {
		return nil // nothing to grow
	}
	switch pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] {
	case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress:
	default:
		return nil // not the node's turn (the resizer's, or infeasible)
	}
	if !caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		return fmt.Errorf("MountVolume.NodeExpandVolume failed for volume %q : Expander.NodeExpand found CSI plugin %s/%s to not support node expansion", cv.specName, pluginName, cv.driver)
	}
	patcher := m.API.PVCStatus(pvc.Namespace)
	if pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInProgress {
		if err := patchClaimStatus(ctx, patcher, pvc.Name, map[string]any{
			"allocatedResourceStatuses": map[string]any{string(v1.ResourceStorage): v1.PersistentVolumeClaimNodeResizeInProgress},
		}); err != nil {
			return fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion in progress: %w", err)
		}
	}
	secrets, err := m.secrets(ctx, cv.expandSecret)
	if err != nil {
		return err
	}
	mode := csipb.VolumeCapability_AccessMode_UNKNOWN
	if c, err := volumeCapability(cv, caps, &v1.Pod{}); err == nil {
		mode = c.GetAccessMode().GetMode()
	}
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: cv.fsType, MountFlags: cv.mountOptions}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
	if cv.block {
		// kubelet's fsType "block": a block access type, no mount flags.
		capability.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	}
	ectx, cancel := context.WithTimeout(ctx, csiTimeout)
	defer cancel()
	_, rerr := d.Node.NodeExpandVolume(ectx, &csipb.NodeExpandVolumeRequest{
		VolumeId: cv.handle, VolumePath: target, StagingTargetPath: staging,
		CapacityRange:    &csipb.CapacityRange{RequiredBytes: cv.pvSize.Value()},
		VolumeCapability: capability,
		Secrets:          secrets,
	})
	if rerr != nil {
		msg := fmt.Sprintf("failed to expand pvc with %v", rpcError(rerr))
		cond := map[string]any{"type": v1.PersistentVolumeClaimNodeResizeError, "status": v1.ConditionTrue,
			"lastTransitionTime": metav1.NewTime(m.clock().Now()), "message": msg}
		change := map[string]any{"conditions": mergeResizeCondition(pvc.Status.Conditions, cond)}
		switch status.Code(rerr) {
		case codes.InvalidArgument, codes.OutOfRange:
			change["allocatedResourceStatuses"] = map[string]any{string(v1.ResourceStorage): v1.PersistentVolumeClaimNodeResizeInfeasible}
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Aborted, codes.ResourceExhausted, codes.FailedPrecondition:
			change = nil // not final: kubelet leaves the claim as it is
		}
		if change != nil {
			if err := patchClaimStatus(ctx, patcher, pvc.Name, change); err != nil {
				return errors.Join(fmt.Errorf("MountVolume.NodeExpandVolume failed for volume %q : %w", cv.specName, rpcError(rerr)), err)
			}
		}
		return fmt.Errorf("MountVolume.NodeExpandVolume failed for volume %q : %w", cv.specName, rpcError(rerr))
	}
	msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", cv.specName, m.NodeName)
	m.event(pod, v1.EventTypeNormal, "FileSystemResizeSuccessful", msg)
	m.event(pvc, v1.EventTypeNormal, "FileSystemResizeSuccessful", msg)
	var kept []v1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if !resizeConditions[c.Type] {
			kept = append(kept, c)
		}
	}
	if kept == nil {
		kept = []v1.PersistentVolumeClaimCondition{}
	}
	if err := patchClaimStatus(ctx, patcher, pvc.Name, map[string]any{
		"capacity":                  map[string]any{string(v1.ResourceStorage): cv.pvSize.String()},
		"allocatedResourceStatuses": map[string]any{string(v1.ResourceStorage): nil},
		"conditions":                kept,
	}); err != nil {
		return fmt.Errorf("mountVolume.NodeExpandVolume update pvc status failed: %w", err)
	}
	return nil
}

// event records an Event on obj when the Mounter has a recorder.
func (m *Mounter) event(obj runtime.Object, typ, reason, msg string) {
	if m.Recorder != nil {
		m.Recorder.Event(obj, typ, reason, msg)
	}
}

// mergeResizeCondition is kubelet's MergeResizeConditionOnPVC keeping the
// old resize conditions: cond replaces the condition of its type (unless
// its status is the same), the others stay.
func mergeResizeCondition(old []v1.PersistentVolumeClaimCondition, cond map[string]any) []any {
	out := []any{}
	found := false
	for _, c := range old {
		if c.Type == cond["type"] {
			found = true
			if c.Status == cond["status"] {
				out = append(out, c)
				continue
			}
			out = append(out, cond)
			continue
		}
		out = append(out, c)
	}
	if !found {
		out = append(out, cond)
	}
	return out
}

// patchClaimStatus merges status into the claim's status (a JSON merge
// patch of the status subresource: a nil value removes a key; a list is
// replaced whole).
func patchClaimStatus(ctx context.Context, p PVCPatcher, name string, status map[string]any) error {
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = p.Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}, "status")
	return err
}

// rpcError is a failed CSI call's error as kubelet prints it: a gRPC
// status error already reads "rpc error: code = ... desc = ...", and is
// kept as it is; anything else gets the prefix (kubelet's messages always
// carry it once).
func rpcError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	return fmt.Errorf("rpc error: %w", err)
}
