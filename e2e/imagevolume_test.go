package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/imagegc"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/runtime"
)

// Image volumes (featureGates: {ImageVolume: true}): an image made with
// testimage holding one known file is mounted read-only into a container,
// whole and through a subPath; the container reads the file and cannot
// write; image garbage collection (the agent's collector over the same
// containerd namespace) keeps the image while the pod mounts it, though
// no container runs it, and removes an unused image beside it; a volume
// whose image is absent with pullPolicy Never leaves its container
// waiting with ErrImageNeverPull; deleting the pod unmounts the volume
// and removes its snapshot. Wall time 9.5 s at load 8.
func TestImageVolume(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "featureGates:\n  ImageVolume: true\n")
	ctx := context.Background()
	const dataRef, unusedRef = "docker.io/nodeagent/imgvol-data:test", "docker.io/nodeagent/imgvol-unused:test"
	for _, s := range []testimage.Spec{
		{Ref: dataRef, Files: []testimage.File{testimage.Dir("data", 0o755), testimage.Reg("data/hello.txt", 0o644, []byte("hello from an image volume\n"))}},
		{Ref: unusedRef, Files: []testimage.File{testimage.Reg("unused.txt", 0o644, []byte("nobody mounts me\n"))}},
	} {
		ar, err := s.Archive()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.ImportImage(ctx, bytes.NewReader(ar)); err != nil {
			t.Fatal(err)
		}
	}
	name := a.node + "-imgvol"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    image: {reference: %s, pullPolicy: IfNotPresent}
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "cat /vol/data/hello.txt /sub/hello.txt; if touch /vol/w 2>/dev/null; then echo WRITABLE; else echo read-only; fi; sleep 3600"]
    volumeMounts:
    - {name: data, mountPath: /vol}
    - {name: data, mountPath: /sub, subPath: data}
`, dataRef, testimage.Ref)), "apply", "-f", "-")
	pod, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) == 0 || pod.Spec.Volumes[0].Image == nil {
		t.Fatalf("the API server dropped volumes[].image: start the cluster with --feature-gates=ImageVolume=true (internal/testing/localcluster does)")
	}
	pod = a.waitPod(ctx, name, 60*time.Second, "running", running)
	want := "hello from an image volume\nhello from an image volume\nread-only\n"
	var logs string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		logs, _ = kubectlOut(t, a.env, "logs", name)
		return logs == want, nil
	})
	if err != nil {
		t.Fatalf("container output %q, want %q", logs, want)
	}

	// In use for image GC while mounted: the unused image goes, the
	// volume's stays.
	vols, err := rt.ListImageVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vols) != 1 || vols[0].PodUID != string(pod.UID) {
		t.Fatalf("image volume snapshots %+v, want one of pod %s", vols, pod.UID)
	}
	data, err := rt.GetImage(ctx, dataRef)
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Now())
	gc := imagegc.New(imagegc.Options{Runtime: rt, Clock: clk, Logger: testlog.New(t),
		Policy: imagegc.Policy{HighThresholdPercent: 100, LowThresholdPercent: 80}})
	if _, err := gc.DeleteUnusedImages(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	if _, err := gc.DeleteUnusedImages(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.GetImage(ctx, unusedRef); err == nil {
		t.Errorf("the unused image %s survived image GC: the check below proves nothing", unusedRef)
	}
	if img, err := rt.GetImage(ctx, dataRef); err != nil || img.ID != data.ID {
		t.Errorf("image GC removed the image a running pod mounts: %v", err)
	}

	// An absent image with pullPolicy Never: its container waits.
	never := a.node + "-imgvol-never"
	kubectl(t, a.env, podYAML(never, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: data
    image: {reference: docker.io/nodeagent/absent:test, pullPolicy: Never}
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
    volumeMounts: [{name: data, mountPath: /vol}]
`, testimage.Ref)), "apply", "-f", "-")
	a.waitPod(ctx, never, 30*time.Second, "ErrImageNeverPull", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "ErrImageNeverPull" && strings.Contains(w.Message, "docker.io/nodeagent/absent:test") {
				return true
			}
		}
		return false
	})

	// Deleting the pod unmounts the volume and removes its snapshot.
	zero := int64(0)
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(a.rootDir(), "pods", string(pod.UID))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := os.Stat(dir)
		vols, lerr := rt.ListImageVolumes(ctx)
		return os.IsNotExist(err) && lerr == nil && !hasPodVolume(vols, string(pod.UID)), nil
	})
	if err != nil {
		vols, _ := rt.ListImageVolumes(ctx)
		t.Fatalf("after deletion: pod directory or image volume snapshot left (snapshots %+v)", vols)
	}
}

func hasPodVolume(vols []runtime.ImageVolume, uid string) bool {
	for _, v := range vols {
		if v.PodUID == uid {
			return true
		}
	}
	return false
}
