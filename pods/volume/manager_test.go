package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeExternal sets up persistentVolumeClaim and csi volumes as
// directories, failing the volumes named in fail.
type fakeExternal struct {
	mu   sync.Mutex
	fail map[string]bool
	// barrier: each SetUp waits until this many have begun (0: none).
	barrier  int
	entered  chan struct{}
	setUp    []string
	tornDown []string
	tearErr  error
}

func (f *fakeExternal) SetUp(_ context.Context, _ *v1.Pod, podDir string, v *v1.Volume) (string, error) {
	f.mu.Lock()
	f.setUp = append(f.setUp, v.Name)
	if f.barrier > 0 && f.entered == nil {
		f.entered = make(chan struct{})
	}
	if f.barrier > 0 && len(f.setUp) == f.barrier {
		close(f.entered)
	}
	entered := f.entered
	f.mu.Unlock()
	if entered != nil {
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			return "", &MountError{Volume: v.Name, Err: errors.New("the other volumes were not being set up meanwhile")}
		}
	}
	if f.fail[v.Name] {
		return "", &MountError{Volume: v.Name, Op: "MountVolume.WaitForAttach", Err: errors.New("not attached")}
	}
	p := filepath.Join(podDir, "volumes", "kubernetes.io~csi", v.Name, "mount")
	return p, os.MkdirAll(p, 0o750)
}

func (f *fakeExternal) TearDown(_ context.Context, podDir string) error {
	f.tornDown = append(f.tornDown, podDir)
	return f.tearErr
}

func externalPod() *v1.Pod {
	ro := true
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "a", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "a", ReadOnly: true}}},
			{Name: "b", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d", ReadOnly: &ro}}},
			{Name: "c", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
		}},
	}
}

func TestManagerExternalVolumes(t *testing.T) {
	podDir := t.TempDir()
	pod := externalPod()

	// Every failing volume has its MountError (each its FailedMount), and
	// the others are still tried.
	f := &fakeExternal{fail: map[string]bool{"a": true, "c": true}}
	_, _, err := NewManager(nil, f).Setup(context.Background(), pod, podDir)
	mes := MountErrors(err)
	if len(mes) != 2 || mes[0].Volume != "a" || mes[1].Volume != "c" {
		t.Fatalf("MountErrors %v of %v, want a and c", mes, err)
	}
	if want := `MountVolume.WaitForAttach failed for volume "a" : not attached`; mes[0].Error() != want {
		t.Errorf("message %q, want %q", mes[0].Error(), want)
	}
	if slices.Sort(f.setUp); !slices.Equal(f.setUp, []string{"a", "b", "c"}) {
		t.Errorf("set up %v, want every external volume tried", f.setUp)
	}

	f = &fakeExternal{}
	vols, _, err := NewManager(nil, f).Setup(context.Background(), pod, podDir)
	if err != nil {
		t.Fatal(err)
	}
	if vols["b"] != filepath.Join(podDir, "volumes/kubernetes.io~csi/b/mount") || vols["scratch"] == "" {
		t.Errorf("paths %v", vols)
	}

	// Without an External such volumes fail; the pod waits.
	_, _, err = NewManager(nil, nil).Setup(context.Background(), pod, podDir)
	if mes := MountErrors(err); len(mes) != 3 {
		t.Errorf("without an External: %v", err)
	}

	// Teardown: the External first; when it fails the rest stays (the
	// driver's mounts are never removed behind its back).
	f.tearErr = errors.New("driver not registered")
	if err := NewManager(nil, f).Teardown(pod.UID, podDir); err == nil {
		t.Fatal("teardown succeeded although the External failed")
	}
	if _, err := os.Stat(filepath.Join(podDir, "volumes")); err != nil {
		t.Errorf("volumes removed although the External failed: %v", err)
	}
	f.tearErr = nil
	if err := NewManager(nil, f).Teardown(pod.UID, podDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(podDir, "volumes")); !os.IsNotExist(err) {
		t.Errorf("volumes stay: %v", err)
	}
	if len(f.tornDown) != 2 {
		t.Errorf("External torn down %d times, want 2", len(f.tornDown))
	}
}

func TestMustMountReadOnly(t *testing.T) {
	pod := externalPod()
	for name, want := range map[string]bool{"scratch": false, "a": true, "b": true, "c": false, "missing": false} {
		if got := MustMountReadOnly(pod, name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// The in-tree sources kubelet 1.34 migrates to CSI are the External's
// (package csi translates them); others are not; a read-only one is
// mounted read-only in the containers.
func TestMigratedInTreeIsExternal(t *testing.T) {
	yes := true
	for _, v := range []v1.Volume{
		{Name: "gce", VolumeSource: v1.VolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "d", ReadOnly: true}}},
		{Name: "ebs", VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1", ReadOnly: true}}},
		{Name: "azd", VolumeSource: v1.VolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u", ReadOnly: &yes}}},
		{Name: "azf", VolumeSource: v1.VolumeSource{AzureFile: &v1.AzureFileVolumeSource{SecretName: "s", ShareName: "sh", ReadOnly: true}}},
		{Name: "cinder", VolumeSource: v1.VolumeSource{Cinder: &v1.CinderVolumeSource{VolumeID: "c", ReadOnly: true}}},
		{Name: "pxd", VolumeSource: v1.VolumeSource{PortworxVolume: &v1.PortworxVolumeSource{VolumeID: "p", ReadOnly: true}}},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{v}}}
		if !isExternalVolume(&v) || !MustMountReadOnly(pod, v.Name) {
			t.Errorf("%s: external %v, read-only %v; want both", v.Name, isExternalVolume(&v), MustMountReadOnly(pod, v.Name))
		}
	}
	vs := v1.Volume{Name: "vs", VolumeSource: v1.VolumeSource{VsphereVolume: &v1.VsphereVirtualDiskVolumeSource{VolumePath: "p"}}}
	if !isExternalVolume(&vs) || MustMountReadOnly(&v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{vs}}}, "vs") {
		t.Error("vsphereVolume: want external, not read-only (it has no readOnly)")
	}
	nfs := v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}}
	if isExternalVolume(&nfs) {
		t.Error("nfs is not migrated, yet the External's")
	}
}

// A pod's external volumes are set up side by side, as kubelet's
// operation executor does: one that waits (for its attachment, its
// driver) does not hold back the others.
func TestManagerSetsUpExternalVolumesConcurrently(t *testing.T) {
	podDir := t.TempDir()
	f := &fakeExternal{barrier: 3, fail: map[string]bool{"c": true}}
	vols, _, err := NewManager(nil, f).Setup(context.Background(), externalPod(), podDir)
	if mes := MountErrors(err); len(mes) != 1 || mes[0].Volume != "c" || mes[0].Op != "MountVolume.WaitForAttach" {
		t.Fatalf("errors %v, want only c's WaitForAttach (each SetUp waits until all three began)", err)
	}
	if vols != nil {
		t.Errorf("paths %v with a failed volume", vols)
	}
	f = &fakeExternal{barrier: 3}
	if _, _, err := NewManager(nil, f).Setup(context.Background(), externalPod(), podDir); err != nil {
		t.Fatal(err)
	}
}
