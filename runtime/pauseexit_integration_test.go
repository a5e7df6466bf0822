package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/runtime"
)

// A pause that died says how (issue 15: shareProcessNamespace pauses that
// exit seconds after their start on a loaded host, cause not known yet):
// ListPauses reports the exit code and time of a stopped pause, which the
// worker logs when it removes it. Against containerd: the pause process
// SIGKILLed from the host ends with 137.
func TestListPausesSaysHowAPauseEnded(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	bin := buildPauseBinary(t)
	rt, _ := newRuntimeWith(t, func(o *runtime.Options) { o.ContainerLogger = bin })
	ctx := context.Background()
	pod := spec("pauseexit", "x").Pod
	id, err := rt.CreatePause(ctx, runtime.PauseSpec{Pod: pod, RootfsDir: filepath.Join(t.TempDir(), "pause-rootfs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
	ps, err := rt.ListPauses(ctx, pod.UID)
	if err != nil || len(ps) != 1 || ps[0].State != runtime.StateRunning || ps[0].Exit != "" {
		t.Fatalf("ListPauses = %+v, %v; want one running pause and no exit", ps, err)
	}
	if err := syscall.Kill(int(ps[0].Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ps, err = rt.ListPauses(ctx, pod.UID)
		if err == nil && len(ps) == 1 && ps[0].State == runtime.StateExited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause not seen exited 20s after SIGKILL: %+v, %v", ps, err)
		}
	}
	if !strings.HasPrefix(ps[0].Exit, "exit code 137 at ") {
		t.Errorf("Exit = %q, want exit code 137 and its time", ps[0].Exit)
	}
}
