package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/pods/volume"
)

// Mount propagation as a CSI node plugin uses it: the agent's rootDir is
// a shared mount; a privileged pod with a Bidirectional hostPath mount
// under it mounts a tmpfs inside the volume, and the mount shows on the
// host and in a second pod's HostToContainer mount of the same path (not
// in a container of that pod whose mount is None); its unmount
// propagates the same way, and nothing stays mounted. A container that
// is not privileged may not use Bidirectional: the API server refuses
// such a pod and the agent refuses such a static pod with the same
// message, while its other pods keep running.
func TestMountPropagation(t *testing.T) {
	t.Parallel()
	static := t.TempDir()
	a, _ := readyPodAgent(t, "staticPodPath: "+static+"\n")
	ctx := context.Background()

	// As kubelet's root directory: on a shared mount.
	root, err := filepath.EvalSymlinks(a.rootDir())
	if err != nil {
		t.Fatal(err)
	}
	if on := mountOf(t, root); !on.Shared() {
		t.Fatalf("rootDir %s is on %s, which is not shared (optional fields %q)", root, on.MountPoint, on.Optional)
	}
	// Where a CSI plugin keeps its mounts: <rootDir>/plugins/<driver>.
	plugin := filepath.Join(root, "plugins", "e2e.mountprop")
	t.Cleanup(func() {
		// A failed test may leave the plugin's tmpfs on the host.
		if _, err := testenv.RemoveHostLeftovers(plugin); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	// The viewer starts first: what it sees later came by propagation,
	// not with its own bind mount.
	viewer := a.node + "-viewer"
	watch := `while true; do if [ -f /v/mnt/file ]; then echo "seen=$(cat /v/mnt/file)"; else echo absent; fi; sleep 0.2; done`
	kubectl(t, a.env, podYAML(viewer, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: plugin
    hostPath: {path: %[2]s, type: DirectoryOrCreate}
  containers:
  - name: h2c
    image: %[1]s
    command: ["sh", "-c", %[3]q]
    volumeMounts: [{name: plugin, mountPath: /v, readOnly: true, mountPropagation: HostToContainer}]
  - name: none
    image: %[1]s
    command: ["sh", "-c", %[3]q]
    volumeMounts: [{name: plugin, mountPath: /v, mountPropagation: None}]
`, testimage.Ref, plugin, watch)), "apply", "-f", "-")
	vp := a.waitPod(ctx, viewer, 60*time.Second, "Running", running)
	a.waitLog(vp, "h2c", 0, "absent")
	a.waitLog(vp, "none", 0, "absent")

	// The plugin: privileged, Bidirectional; it unmounts on SIGTERM, as a
	// CSI plugin unpublishes.
	bidi := a.node + "-bidi"
	script := `mkdir -p /p/mnt && mount -t tmpfs -o size=1m e2e-mountprop /p/mnt && echo hello > /p/mnt/file && echo mounted=1; ` +
		`trap 'umount /p/mnt && echo unmounted=1; exit 0' TERM; while true; do sleep 0.2; done`
	kubectl(t, a.env, podYAML(bidi, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 10
  volumes:
  - name: plugin
    hostPath: {path: %[2]s, type: Directory}
  containers:
  - name: plugin
    image: %[1]s
    command: ["sh", "-c", %[3]q]
    securityContext: {privileged: true}
    volumeMounts: [{name: plugin, mountPath: /p, mountPropagation: Bidirectional}]
`, testimage.Ref, plugin, script)), "apply", "-f", "-")
	bp := a.waitPod(ctx, bidi, 60*time.Second, "Running", running)
	a.waitLog(bp, "plugin", 0, "mounted=1")

	// On the host.
	mnt := filepath.Join(plugin, "mnt")
	if m := waitMount(t, mnt, true); m.FSType != "tmpfs" || m.Source != "e2e-mountprop" {
		t.Errorf("host mount at %s: %+v, want the plugin's tmpfs", mnt, m)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "file")); err != nil || string(b) != "hello\n" {
		t.Errorf("the host reads %q, %v from the plugin's tmpfs", b, err)
	}
	// In the HostToContainer container, not in the None one.
	a.waitLog(vp, "h2c", 0, "seen=hello")
	time.Sleep(time.Second) // a few more rounds of the None container
	if log := a.logOf(vp, "none", 0); strings.Contains(log, "seen=") {
		t.Errorf("a container whose mount has propagation None saw the plugin's mount:\n%s", tail(log, 500))
	}

	// Refusals. The API server's message is the agent's.
	denied := a.node + "-denied"
	deniedPod := fmt.Sprintf(`  volumes:
  - name: plugin
    hostPath: {path: %[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts: [{name: plugin, mountPath: /p, mountPropagation: Bidirectional}]
`, testimage.Ref, plugin)
	bidiMode := corev1.MountPropagationBidirectional
	_, err = a.env.Admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: denied, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: a.node,
			Volumes:  []corev1.Volume{{Name: "plugin", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: plugin}}}},
			Containers: []corev1.Container{{Name: "c", Image: testimage.Ref, Command: []string{"sleep", "3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "plugin", MountPath: "/p", MountPropagation: &bidiMode}}}},
		},
	}, metav1.CreateOptions{})
	// (The API server's field path has no index here:
	// "spec.containers[0].volumeMounts.mountPropagation".)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "mountPropagation: Forbidden: "+volume.BidirectionalNotPrivileged) {
		t.Errorf("the API server accepted a non-privileged Bidirectional pod or refused it with another message: %v", err)
	}
	// As a static pod: skipped with the message in an Event on the Node;
	// no mirror pod.
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: denied, namespace: default}\nspec:\n%s", deniedPod)
	if err := os.WriteFile(filepath.Join(static, "denied.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	a.waitEvent(ctx, "", "involvedObject.kind=Node,involvedObject.name="+a.node, "FailedStaticPodManifest for denied.yaml", func(e corev1.Event) bool {
		return e.Reason == "FailedStaticPodManifest" && strings.Contains(e.Message, "denied.yaml") &&
			strings.Contains(e.Message, "spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: "+volume.BidirectionalNotPrivileged)
	})
	if _, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, "denied-"+a.node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a mirror pod exists for the refused static pod (err %v)", err)
	}
	// The other pods kept running, unrestarted.
	for _, name := range []string{viewer, bidi} {
		p := a.waitPod(ctx, name, 5*time.Second, "still Running", running)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("pod %s container %s restarted %d times", name, cs.Name, cs.RestartCount)
			}
		}
	}

	// The plugin goes: its unmount reaches the host and the viewer.
	pluginLog := a.holdLog(bp, "plugin", 0)
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, bidi, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMount(t, mnt, false)
	pluginLog("unmounted=1")
	// "absent" again after the last "seen=hello".
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		hl := a.logOf(vp, "h2c", 0)
		i := strings.LastIndex(hl, "seen=hello")
		return i >= 0 && strings.Contains(hl[i:], "absent"), nil
	})
	if err != nil {
		t.Errorf("the HostToContainer container still sees the plugin's mount after its unmount:\n%s", tail(a.logOf(vp, "h2c", 0), 500))
	}
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, viewer, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsGone(t, a, viewer, bidi)
	if left, err := testenv.MountsUnder(plugin); err != nil || len(left) > 0 {
		t.Errorf("mounts left under %s: %v (%v)", plugin, left, err)
	}
}

// mountOf returns the host mount that path (resolved) is on.
func mountOf(t *testing.T, path string) mountinfo.Mount {
	t.Helper()
	ms, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := mountinfo.Containing(ms, path)
	if !ok {
		t.Fatalf("no mount contains %s", path)
	}
	return m
}

// waitMount waits (20s at most) until path is (want) or is not (!want) a
// mount point on the host, and returns the top mount there.
func waitMount(t *testing.T, path string, want bool) mountinfo.Mount {
	t.Helper()
	var top mountinfo.Mount
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		ms, err := mountinfo.Read()
		if err != nil {
			return false, err
		}
		found := false
		for _, m := range ms {
			if m.MountPoint == path {
				top, found = m, true
			}
		}
		return found == want, nil
	})
	if err != nil {
		t.Fatalf("%s: mounted=%v not seen on the host within 20s: %v", path, want, err)
	}
	return top
}

// podsGone waits until the pods are deleted (the agent finished them).
func podsGone(t *testing.T, a *agent, names ...string) {
	t.Helper()
	for _, name := range names {
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := a.env.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("pod %s not gone within 60s: %v", name, err)
		}
	}
}

// emptyDir with fsGroup, as kubelet lays it out, seen from inside the
// container: the fsGroup as group and the setgid bit — drwxrwsrwx on
// disk, drwxrwsrwt on tmpfs (whose root is 1777) — and a file the
// container makes there belongs to the group.
func TestEmptyDirFSGroup(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-fsgroup"
	script := `for d in /disk /mem; do touch $d/f; echo "$d dir=$(stat -c '%A %g' $d) file=$(stat -c '%g' $d/f)"; done; echo end=1; exec sleep 3600`
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  securityContext: {fsGroup: 2345}
  volumes:
  - {name: disk, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
  containers:
  - name: c
    image: %[1]s
    command: ["sh", "-c", %[2]q]
    securityContext: {runAsUser: 1000, runAsGroup: 3000}
    volumeMounts: [{name: disk, mountPath: /disk}, {name: mem, mountPath: /mem}]
`, testimage.Ref, script)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "Running", running)
	got := a.waitLog(p, "c", 0, "end=1")
	for _, want := range []string{"/disk dir=drwxrwsrwx 2345 file=2345", "/mem dir=drwxrwsrwt 2345 file=2345"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing from the container's output:\n%s", want, got)
		}
	}
}
