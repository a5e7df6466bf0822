package pods

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/pods/volume"
	"github.com/nodeagent/nodeagent/runtime"
)

type fakeImageVols struct {
	mu        sync.Mutex
	mounted   map[string]string // key → image reference
	unmounted []string
}

// MountImageVolume makes target with the image's one directory, "dir".
func (f *fakeImageVols) MountImageVolume(_ context.Context, ref, key, _, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(target, "dir"), 0o755); err != nil {
		return err
	}
	if f.mounted == nil {
		f.mounted = map[string]string{}
	}
	f.mounted[key] = ref
	return nil
}

func (f *fakeImageVols) UnmountImageVolume(_ context.Context, key, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mounted, key)
	f.unmounted = append(f.unmounted, key)
	return nil
}

// An image volume's image is pulled as a container image is (kubelet's
// reasons and events, its back-off); until it is present only the
// containers that mount it wait, with the pull's reason. Then it is
// mounted once, read-only into the container, and
// unmounted when the pod is removed.
func TestWorkerImageVolume(t *testing.T) {
	e := newWorkerEnv(t)
	rec := &pullRecorder{}
	e.deps.rec = rec
	iv := &fakeImageVols{}
	e.deps.imageVols = iv
	e.rt.images = map[string]bool{"busybox:test": true}
	e.rt.pullFail = unauthorized
	app := ctr("app")
	// (subPath into an image volume is the e2e test's: it bind-mounts.)
	app.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod := testPod("imgvol", v1.RestartPolicyAlways, app, ctr("other"))
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		Image: &v1.ImageVolumeSource{Reference: "registry.example.com/data:v1", PullPolicy: v1.PullIfNotPresent}}}}
	w := e.worker(pod, kubetypes.SourceAPI)
	e.settle(w)

	run := e.rt.running()
	if _, ok := run["other"]; !ok || len(run) != 1 {
		t.Fatalf("running %v, want only other", run)
	}
	var appWaiting *v1.ContainerStateWaiting
	for _, cs := range e.lastStatus(pod.UID).ContainerStatuses {
		if cs.Name == "app" {
			appWaiting = cs.State.Waiting
		}
	}
	if appWaiting == nil || appWaiting.Reason != status.ReasonErrImagePull || !strings.Contains(appWaiting.Message, "401 Unauthorized") {
		t.Fatalf("app waiting %+v, want ErrImagePull with the registry's error", appWaiting)
	}
	evs := strings.Join(rec.take(), "\n")
	for _, want := range []string{
		`Failed: Failed to pull image "registry.example.com/data:v1"`,
		"Failed: Error: ErrImagePull",
		"Failed: Error: failed to resolve reference",
	} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
	if len(iv.mounted) != 0 {
		t.Fatalf("mounted %v before the image was pulled", iv.mounted)
	}

	e.rt.pullFail = nil
	e.clk.Step(11 * time.Second) // past the first 10s back-off
	e.settle(w)
	c, ok := e.rt.running()["app"]
	if !ok {
		t.Fatalf("app not running after the pull: %v", e.lastStatus(pod.UID).ContainerStatuses)
	}
	key := imageVolumeKey(string(pod.UID), "data")
	if iv.mounted[key] != "registry.example.com/data:v1" {
		t.Fatalf("mounted %v, want %s of the image", iv.mounted, key)
	}
	var m *runtime.Mount
	for i, x := range e.rt.specs[c.ID].Mounts {
		if x.ContainerPath == "/data" {
			m = &e.rt.specs[c.ID].Mounts[i]
		}
	}
	podDir := w.podDir()
	if m == nil || !m.ReadOnly || !strings.HasPrefix(m.HostPath, podDir) {
		t.Fatalf("mount of /data %+v, want read-only from the pod's directory", m)
	}
	if want := volume.ImageVolumeDir(podDir, "data"); m.HostPath != want {
		t.Errorf("/data from %s, want the image volume %s", m.HostPath, want)
	}

	w.remove()
	e.settle(w)
	if len(iv.unmounted) == 0 || iv.unmounted[0] != key || len(iv.mounted) != 0 {
		t.Fatalf("after removal: unmounted %v, still mounted %v", iv.unmounted, iv.mounted)
	}
}
