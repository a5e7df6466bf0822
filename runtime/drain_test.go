package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/runtime"
)

// Against containerd: once a container has exited, DrainOutput brings
// all it wrote to its log while its task is still there, the last line
// included (an unterminated one, which without a drain reaches the file
// only when the task is released and the writer sees EOF). After the
// release the writer is gone, and DrainOutput says so.
func TestDrainOutputOfAnExitedContainer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rt, cd := newRuntimeWith(t, func(o *runtime.Options) { o.ContainerLogger = self })
	ctx := context.Background()
	logPath := filepath.Join(t.TempDir(), "logs", "default_p_uid", "c", "0.log")
	s := spec("drain", "c", "sh", "-c", "yes 0123456789abcdefghij | head -n 30000; echo -n the-end; exit 3")
	s.LogPath = logPath
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	c := waitExited(t, rt, id, time.Minute)
	if c.ExitCode != 3 {
		t.Fatalf("exit code %d", c.ExitCode)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := rt.DrainOutput(dctx, c); err != nil {
		t.Fatalf("drain: %v", err)
	}
	t.Logf("drained in %s", time.Since(start))
	var buf bytes.Buffer
	if err := crilog.ReadLogs(ctx, logPath, crilog.ReadOptions{TailLines: -1}, &buf, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	if n := len(lines); n != 30001 || lines[n-1] != "the-end" {
		t.Fatalf("after the drain the log has %d lines ending %q, want 30001 ending the-end", n, lines[max(0, n-2):])
	}
	if err := rt.StopContainer(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	// The release ends the writer (the shim waits for it, up to 12 s).
	deadline := time.Now().Add(15 * time.Second)
	for err = rt.DrainOutput(ctx, c); !errors.Is(err, crilog.ErrNoLogger); err = rt.DrainOutput(ctx, c) {
		if time.Now().After(deadline) {
			t.Fatalf("drain after the release: %v, want ErrNoLogger", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}

	// Without a log writer of its own (the shim writes the file) the
	// output cannot be drained; without a log there is nothing to drain.
	plain := bareRuntime(t, cd, "", nil)
	if err := plain.DrainOutput(ctx, c); !errors.Is(err, runtime.ErrCannotDrain) {
		t.Fatalf("shim-written log: %v, want ErrCannotDrain", err)
	}
	c.LogPath = ""
	if err := plain.DrainOutput(ctx, c); err != nil {
		t.Fatalf("no log: %v", err)
	}
}
