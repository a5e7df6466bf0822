package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/internal/netns"
	"github.com/nodeagent/nodeagent/runtime"
)

// buildPauseBinary builds the static binary whose pause mode the pause
// container runs.
func buildPauseBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nodeagent-container-logger")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/nodeagent-container-logger")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// A pod's pause against containerd: PID 1 of the PID namespace the pod's
// containers join (they see each other, none is PID 1), in the pod's IPC
// and UTS namespaces and /dev/shm with them, invisible to
// ListContainers, alive across a container's end, gone when removed.
func TestPauseSharesNamespacesAgainstContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	bin := buildPauseBinary(t)
	rt, _ := newRuntimeWith(t, func(o *runtime.Options) { o.ContainerLogger = bin })
	ctx := context.Background()
	dir := t.TempDir()
	nsDir := filepath.Join(dir, "podns")
	if err := netns.CreatePod(nsDir, netns.PodNamespaces{IPC: true, UTS: true, Hostname: "shared-host"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.RemovePod(nsDir) })
	pns := runtime.PodNamespaces{IPCPath: filepath.Join(nsDir, netns.IPCFile), ShmPath: filepath.Join(nsDir, netns.ShmDir), UTSPath: filepath.Join(nsDir, netns.UTSFile)}
	pod := spec("pidns", "x").Pod

	start := time.Now()
	pid, err := rt.CreatePause(ctx, runtime.PauseSpec{Pod: pod, RootfsDir: filepath.Join(dir, "pause-rootfs"), PodNamespaces: pns})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pause created and started in %v", time.Since(start))
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), pid) })
	ps, err := rt.ListPauses(ctx, pod.UID)
	if err != nil || len(ps) != 1 || ps[0].State != runtime.StateRunning || ps[0].Pid == 0 || ps[0].Pod != pod {
		t.Fatalf("ListPauses = %+v, %v; want the running pause", ps, err)
	}
	if other, _ := rt.ListPauses(ctx, "other-uid"); len(other) != 0 {
		t.Errorf("ListPauses of another pod: %+v", other)
	}
	if cs, _ := rt.ListContainers(ctx); len(cs) != 0 {
		t.Errorf("ListContainers shows the pause: %+v", cs)
	}
	pidNS := fmt.Sprintf("/proc/%d/ns/pid", ps[0].Pid)

	run := func(name string, cmd ...string) (string, string) {
		s := spec("pidns", name, cmd...)
		s.LogPath = filepath.Join(dir, name+".log")
		s.PodNamespaces = pns
		s.Security.PIDNSPath = pidNS
		id, err := rt.CreateContainer(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id, s.LogPath
	}
	a, _ := run("a", "sh", "-c", "echo from-a > /dev/shm/x; exec sleep 3601")
	waitState(t, rt, a, runtime.StateRunning)
	var out string
	for deadline := time.Now().Add(20 * time.Second); ; {
		b, log := run(fmt.Sprintf("b%d", time.Now().UnixNano()), "sh", "-c",
			"echo pid1=$(tr '\\0' ' ' < /proc/1/cmdline); ps -o pid,args; echo host=$(hostname); echo ipc=$(readlink /proc/self/ns/ipc); echo shm=$(cat /dev/shm/x); echo self=$$")
		waitState(t, rt, b, runtime.StateExited)
		raw, _ := os.ReadFile(log)
		out = string(raw)
		if strings.Contains(out, "shm=from-a") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var st unix.Stat_t
	if err := unix.Stat(pns.IPCPath, &st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pid1=/pause pause", "sleep 3601", "host=shared-host", fmt.Sprintf("ipc=ipc:[%d]", st.Ino), "shm=from-a"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing from the second container's view:\n%s", want, out)
		}
	}
	if strings.Contains(out, "self=1\n") {
		t.Errorf("a container is PID 1:\n%s", out)
	}

	// A container's end leaves the pause (and the namespace) running.
	if err := rt.StopContainer(ctx, a, time.Second); err != nil {
		t.Fatal(err)
	}
	if ps, _ := rt.ListPauses(ctx, pod.UID); len(ps) != 1 || ps[0].State != runtime.StateRunning {
		t.Fatalf("pause after a container stopped: %+v", ps)
	}
	start = time.Now()
	if err := rt.StopContainer(ctx, pid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the pause took %v to stop on SIGTERM", d)
	}
	if err := rt.RemoveContainer(ctx, pid); err != nil {
		t.Fatal(err)
	}
	if ps, err := rt.ListPauses(ctx, ""); err != nil || len(ps) != 0 {
		t.Errorf("ListPauses after removal = %+v, %v", ps, err)
	}
}
