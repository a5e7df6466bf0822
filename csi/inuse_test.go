package csi

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/pods/volume"
)

const inUseVol = v1.UniqueVolumeName("kubernetes.io/csi/fake.csi^vol-1")

// inUseHook replaces the rig's node status with one the test drives: each
// change of the volumes in use is sent on the returned channel and nothing
// is reported until the test calls MarkVolumesReportedInUse.
func inUseHook(rig *mounterRig) <-chan []v1.UniqueVolumeName {
	changed := make(chan []v1.UniqueVolumeName, 10)
	rig.m.InUseChanged = func() { changed <- rig.m.VolumesInUse() }
	return changed
}

// As kubelet (reconciler: an attachable volume is mounted only once
// ReportedInUse), the mount of an attachable volume waits until a node
// status write listed it in status.volumesInUse: the set's change asks the
// node status for a write at once, a write without the volume does not
// end the wait, the one with it does, and only then is the driver called.
func TestMountWaitsUntilReportedInUse(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(true), attachedVA())
	changed := inUseHook(rig)
	pod := claimPod("uid-1", "claim", false)
	done := make(chan error, 1)
	go func() {
		_, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
		done <- err
	}()
	select {
	case got := <-changed:
		if !slices.Equal(got, []v1.UniqueVolumeName{inUseVol}) {
			t.Fatalf("the node status was asked to report %v, want %s", got, inUseVol)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node status was not told that the volumes in use changed")
	}
	// A status write that does not list it yet (computed before the
	// change) does not end the wait.
	rig.m.MarkVolumesReportedInUse([]v1.UniqueVolumeName{"kubernetes.io/csi/fake.csi^other"})
	select {
	case err := <-done:
		t.Fatalf("the mount went on before the volume was reported in use: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if c := rig.f.Calls(); len(c) != 0 {
		t.Fatalf("the driver was called before the volume was reported in use: %v", c)
	}
	rig.m.MarkVolumesReportedInUse([]v1.UniqueVolumeName{inUseVol})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the mount did not go on once the volume was reported in use")
	}
	if c := rig.f.Calls(); !slices.Contains(c, "NodeStageVolume") || !slices.Contains(c, "NodePublishVolume") {
		t.Errorf("driver calls %v", c)
	}

	// A second pod's mount of the reported volume does not wait, nor tell
	// the node status (the set did not change).
	pod2 := claimPod("uid-2", "claim", false)
	if _, err := rig.m.SetUp(ctx, pod2, rig.podDir("uid-2"), &pod2.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	// The volume leaves the set only with the last pod's teardown; the
	// node status is told then.
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	if err := rig.m.TearDown(ctx, rig.podDir("uid-2")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-changed:
		if len(got) != 0 {
			t.Errorf("after the last teardown the node status was asked to report %v", got)
		}
	default:
		t.Error("the node status was not told that the volume left the set")
	}
	if len(changed) != 0 {
		t.Errorf("%d more changes of the set", len(changed))
	}
}

// A volume that is never reported fails the mount after inUseWait (on the
// Mounter's clock) with kubelet's message, a FailedMount; the pod's sync
// retries it.
func TestMountInUseWaitTimesOut(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(true), attachedVA())
	inUseHook(rig)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rig.m.Clock = clk
	pod := claimPod("uid-1", "claim", false)
	done := make(chan error, 1)
	go func() {
		_, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0])
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the mount does not wait on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(inUseWait - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("gave up before inUseWait: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	clk.Step(time.Millisecond)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end at inUseWait")
	}
	want := `Volume has not been added to the list of VolumesInUse in the node's volume status for volume "pv-1" : no node status write listed kubernetes.io/csi/fake.csi^vol-1 within 10s`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	if me := volume.MountErrors(err); len(me) != 1 || me[0].EventReason() != "FailedMount" {
		t.Errorf("not a FailedMount: %#v", err)
	}
	if c := rig.f.Calls(); len(c) != 0 {
		t.Errorf("the driver was called: %v", c)
	}
	// Still in use: the next try waits again (and the pod's teardown
	// drops it, below).
	if got := rig.m.VolumesInUse(); !slices.Equal(got, []v1.UniqueVolumeName{inUseVol}) {
		t.Errorf("volumesInUse %v", got)
	}
	// The pod is deleted before its volume was set up: its teardown (no
	// volume directory was made) drops it from the set.
	if err := rig.m.TearDown(ctx, rig.podDir("uid-1")); err != nil {
		t.Fatal(err)
	}
	if got := rig.m.VolumesInUse(); len(got) != 0 {
		t.Errorf("volumesInUse %v after the teardown of a pod whose volume was never set up", got)
	}
}

// A volume whose driver does not attach (attachRequired false) is not in
// use and its mount does not wait for any status write; nor does an
// inline volume.
func TestMountOfNonAttachableVolumeDoesNotWait(t *testing.T) {
	ctx := context.Background()
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(false))
	changed := inUseHook(rig)
	pod := claimPod("uid-1", "claim", false)
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-1"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	if len(changed) != 0 || len(rig.m.VolumesInUse()) != 0 {
		t.Errorf("a volume that is not attached is in use: %v", rig.m.VolumesInUse())
	}
}

// A write that no longer lists a volume (kubelet's MarkVolumesReportedInUse
// replaces the set) makes a new mount of it wait again.
func TestReportedInUseIsReplaced(t *testing.T) {
	pvc, pv := boundClaim("claim", "pv-1", "pvc-uid")
	rig := newMounterRig(t, pvc, pv, csiDriverObj(true), attachedVA())
	rig.m.MarkVolumesReportedInUse([]v1.UniqueVolumeName{inUseVol})
	rig.m.MarkVolumesReportedInUse(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := rig.m.waitReportedInUse(ctx, &csiVolume{driver: "fake.csi", handle: "vol-1"}); err == nil {
		t.Error("a volume the last write did not list counts as reported")
	}
}
