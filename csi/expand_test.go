package csi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// resized is the resizer's part of an expansion of claim to size: the PV
// grown, the claim's status waiting for the node (NodeResizePending,
// FileSystemResizePending), as external-resizer leaves them.
func resized(t *testing.T, c *fake.Clientset, size string) {
	t.Helper()
	ctx := context.Background()
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, "pv-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}
	if _, err := c.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc, err := c.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
	pvc.Status.Conditions = []v1.PersistentVolumeClaimCondition{
		{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue},
		{Type: "Other", Status: v1.ConditionTrue},
	}
	if _, err := c.CoreV1().PersistentVolumeClaims("ns").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func sizedClaim() (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	return pvc, pv
}

// Online expansion of a mounted volume, as kubelet's NodeExpander: at the
// pod's next sync after the resizer's part, the claim is marked
// NodeResizeInProgress, the driver's NodeExpandVolume gets the new size
// for the publish target, then the claim has the new capacity, no
// storage entry in allocatedResourceStatuses and no resize condition
// (others kept). The volume stays mounted.
func TestExpandMountedVolume(t *testing.T) {
	ctx := context.Background()
	pvc, pv := sizedClaim()
	rig := newRealRig(t, pvc, pv, csiDriverObj(false))
	m := rig.start(t)
	rec := record.NewFakeRecorder(10)
	m.Recorder = rec
	pod := claimPod("uid-a", "claim", false)
	if _, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	// Nothing to grow: no status write.
	if _, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	for _, a := range rig.client.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("the claim was written without a resize: %v", a)
		}
	}
	resized(t, rig.client, "2Gi")
	rig.client.ClearActions()
	if p, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil || p != rig.target("uid-a") {
		t.Fatalf("SetUp: %q %v", p, err)
	}
	var patches []string
	for _, a := range rig.client.Actions() {
		if pa, ok := a.(interface{ GetPatch() []byte }); ok && a.GetVerb() == "patch" {
			if a.GetSubresource() != "status" {
				t.Errorf("patch of %q, want the status", a.GetSubresource())
			}
			patches = append(patches, string(pa.GetPatch()))
		}
	}
	if len(patches) != 2 || !strings.Contains(patches[0], `"NodeResizeInProgress"`) || !strings.Contains(patches[1], `"capacity":{"storage":"2Gi"}`) {
		t.Errorf("patches %q: want NodeResizeInProgress, then the new capacity", patches)
	}
	got, err := rig.client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Capacity[v1.ResourceStorage]; c.Cmp(resource.MustParse("2Gi")) != 0 || len(got.Status.AllocatedResourceStatuses) != 0 ||
		len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Other" {
		t.Errorf("claim status %+v", got.Status)
	}
	if mounts(t, rig.target("uid-a")) != 1 {
		t.Error("the volume is not mounted once after the expansion")
	}
	// kubelet's Event, on the pod and on the claim.
	for range 2 {
		select {
		case e := <-rec.Events:
			if e != `Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume "pv-1" node-a` {
				t.Errorf("event %q", e)
			}
		default:
			t.Error("missing FileSystemResizeSuccessful event")
		}
	}
	// Done: the next sync writes nothing.
	rig.client.ClearActions()
	if _, err := m.SetUp(ctx, pod, rig.podDir("uid-a"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	for _, a := range rig.client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("the claim was written again: %v", a)
		}
	}
	if err := m.TearDown(ctx, rig.podDir("uid-a")); err != nil {
		t.Fatal(err)
	}
}

// A volume expanded while no pod had it is grown when it is mounted
// (kubelet's MountVolume); an InvalidArgument from the driver is final:
// the claim is NodeResizeInfeasible with a NodeResizeError condition and
// the mount fails with kubelet's operation name. Not the node's turn
// (the resizer has not finished): no call.
func TestExpandOnMountAndInfeasible(t *testing.T) {
	ctx := context.Background()
	pvc, pv := sizedClaim()
	rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
	rig.f.caps = append(rig.f.caps, csipb.NodeServiceCapability_RPC_EXPAND_VOLUME)
	resized(t, rig.client, "2Gi")
	rig.f.expandErr = status.Error(codes.InvalidArgument, "cannot grow")
	pod := claimPod("uid-1", "claim", false)
	_, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
	if err == nil || !strings.Contains(err.Error(), `MountVolume.NodeExpandVolume failed for volume "pv-1"`) {
		t.Fatalf("SetUp: %v, want the expansion's failure", err)
	}
	if len(rig.f.expand) != 1 || rig.f.expand[0].CapacityRange.GetRequiredBytes() != 2<<30 || rig.f.expand[0].VolumeId != "vol-1" ||
		!strings.HasSuffix(rig.f.expand[0].VolumePath, "/volumes/kubernetes.io~csi/pv-1/mount") || !strings.HasSuffix(rig.f.expand[0].StagingTargetPath, "/globalmount") {
		t.Errorf("NodeExpandVolume %+v", rig.f.expand)
	}
	got, err := rig.client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cond *v1.PersistentVolumeClaimCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == v1.PersistentVolumeClaimNodeResizeError {
			cond = &got.Status.Conditions[i]
		}
	}
	if got.Status.AllocatedResourceStatuses[v1.ResourceStorage] != v1.PersistentVolumeClaimNodeResizeInfeasible || cond == nil ||
		!strings.Contains(cond.Message, "failed to expand pvc with rpc error") || len(got.Status.Conditions) != 3 {
		t.Errorf("claim status %+v", got.Status)
	}

	// Infeasible: not retried until the resizer moves the claim on.
	rig.f.expandErr = nil
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if len(rig.f.expand) != 1 {
		t.Errorf("%d NodeExpandVolume calls for an infeasible expansion", len(rig.f.expand))
	}
}

// A CSI call's gRPC error carries "rpc error:" once, as in kubelet's
// messages; before, the agent's prefix doubled it.
func TestRPCErrorPrefixOnce(t *testing.T) {
	st := status.Error(codes.Internal, "disk full")
	if got := fmt.Errorf("MountVolume.MountDevice failed for volume %q : %w", "pv-1", rpcError(st)).Error(); got != `MountVolume.MountDevice failed for volume "pv-1" : rpc error: code = Internal desc = disk full` {
		t.Errorf("status error: %q", got)
	}
	if got := rpcError(errors.New("boom")).Error(); got != "rpc error: boom" {
		t.Errorf("plain error: %q", got)
	}
}
