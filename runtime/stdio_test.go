package runtime_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/runtime"
)

// readLog returns the records of a CRI log file as "stream content" lines:
// its whole records only, for the logger may be appending one as the file
// is read (a torn last record is the next read's).
func readLog(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		r, err := crilog.ParseRecord([]byte(l))
		if err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		out = append(out, r.Stream+" "+string(r.Content))
	}
	return out
}

func waitLog(t *testing.T, p string, want ...string) {
	t.Helper()
	waitLogWith(t, p, false, want...)
}

// waitLogAnyOrder is waitLog for records of both streams, whose relative
// order the separate pipes do not keep.
func waitLogAnyOrder(t *testing.T, p string, want ...string) {
	t.Helper()
	waitLogWith(t, p, true, want...)
}

func waitLogWith(t *testing.T, p string, anyOrder bool, want ...string) {
	t.Helper()
	want = slices.Clone(want)
	if anyOrder {
		slices.Sort(want)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := readLog(t, p)
		if anyOrder {
			slices.Sort(got)
		}
		if strings.Join(got, "|") == strings.Join(want, "|") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %s: have %q, want %q", p, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newStdioRuntime(t *testing.T) *runtime.Runtime {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := newRuntimeWith(t, func(o *runtime.Options) { o.ContainerLogger = self })
	return rt
}

func stdioSpec(t *testing.T, name string, cmd ...string) runtime.ContainerSpec {
	dir := t.TempDir()
	s := spec("stdio-"+name, name, cmd...)
	s.LogPath = filepath.Join(dir, "log", "0.log")
	s.StdioDir = filepath.Join(dir, "stdio")
	return s
}

func startSpec(t *testing.T, rt *runtime.Runtime, s runtime.ContainerSpec) string {
	t.Helper()
	ctx := context.Background()
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A stdin container reads what attach sessions write, keeps its stdin open
// when a session ends (no stdinOnce) and logs stdout and stderr separately;
// its logger survives being killed (RestoreStdioLoggers) without losing
// output.
func TestStdinAttach(t *testing.T) {
	rt := newStdioRuntime(t)
	s := stdioSpec(t, "cat", "sh", "-c", `while read l; do echo "out $l"; echo "err $l" >&2; done; echo eof`)
	s.Stdin = true
	id := startSpec(t, rt, s)
	ctx := context.Background()
	if err := rt.AttachStdin(ctx, id, runtime.AttachOptions{Stdin: strings.NewReader("one\n")}); err != nil {
		t.Fatal(err)
	}
	waitLogAnyOrder(t, s.LogPath, "stdout out one", "stderr err one")
	c := waitState(t, rt, id, runtime.StateRunning)
	if got := runtime.StdioOf(c); got != (runtime.StdioInfo{Stdin: true}) {
		t.Fatalf("StdioOf = %+v", got)
	}

	// Kill the logger (as systemd does with the agent's cgroup): the
	// container's output waits in the pipe until a new one runs.
	killLogger(t, s.StdioDir, id)
	if err := rt.AttachStdin(ctx, id, runtime.AttachOptions{Stdin: strings.NewReader("two\n")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	waitLogAnyOrder(t, s.LogPath, "stdout out one", "stderr err one")
	if err := rt.RestoreStdioLoggers(ctx); err != nil {
		t.Fatal(err)
	}
	// A second restore finds the new logger running.
	if err := rt.RestoreStdioLoggers(ctx); err != nil {
		t.Fatal(err)
	}
	waitLogAnyOrder(t, s.LogPath, "stdout out one", "stderr err one", "stdout out two", "stderr err two")
	if c := waitState(t, rt, id, runtime.StateRunning); c.State != runtime.StateRunning {
		t.Fatal("container stopped")
	}
}

// killLogger kills the process that holds the container's logger lock.
func killLogger(t *testing.T, dir, id string) {
	t.Helper()
	lock := filepath.Join(dir, id+".lock")
	st, err := os.Stat(lock)
	if err != nil {
		t.Fatal(err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/6")
	for _, fd := range procs {
		fst, err := os.Stat(fd)
		if err != nil || !os.SameFile(st, fst) {
			continue
		}
		pid := strings.Split(fd, "/")[2]
		p, err := os.FindProcess(atoi(t, pid))
		if err == nil {
			_ = p.Kill()
			_, _ = p.Wait()
			// The logger is not our child once reaped by Wait's goroutine;
			// wait for it to be gone.
			for i := 0; i < 100; i++ {
				if _, err := os.Stat("/proc/" + pid); err != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		t.Fatalf("logger %s did not die", pid)
	}
	t.Fatal("no logger holds the lock")
}

func atoi(t *testing.T, s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// stdinOnce: the end of the first attach session closes the container's
// stdin; later sessions find it closed.
func TestStdinOnce(t *testing.T) {
	rt := newStdioRuntime(t)
	s := stdioSpec(t, "once", "sh", "-c", `cat; echo done`)
	s.Stdin, s.StdinOnce = true, true
	id := startSpec(t, rt, s)
	ctx := context.Background()
	if err := rt.AttachStdin(ctx, id, runtime.AttachOptions{Stdin: strings.NewReader("hello\n")}); err != nil {
		t.Fatal(err)
	}
	c := waitExited(t, rt, id, 20*time.Second)
	if c.ExitCode != 0 {
		t.Fatalf("exit code %d", c.ExitCode)
	}
	waitLog(t, s.LogPath, "stdout hello", "stdout done")
	// A later session's input is dropped: nothing blocks, no error.
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := rt.AttachStdin(sctx, id, runtime.AttachOptions{Stdin: strings.NewReader("again\n")}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s.LogPath, "stdout hello", "stdout done")
}

// Without stdinOnce, the end of a session leaves stdin open.
func TestStdinStaysOpen(t *testing.T) {
	rt := newStdioRuntime(t)
	s := stdioSpec(t, "open", "sh", "-c", `cat; echo done`)
	s.Stdin = true
	id := startSpec(t, rt, s)
	ctx := context.Background()
	for _, in := range []string{"a\n", "b\n"} {
		if err := rt.AttachStdin(ctx, id, runtime.AttachOptions{Stdin: strings.NewReader(in)}); err != nil {
			t.Fatal(err)
		}
	}
	waitLog(t, s.LogPath, "stdout a", "stdout b")
	waitState(t, rt, id, runtime.StateRunning)
}

// A tty container gets a terminal: one output stream, logged as stdout,
// input echoed by the terminal, and resizes reach it.
func TestTTY(t *testing.T) {
	rt := newStdioRuntime(t)
	s := stdioSpec(t, "tty", "sh", "-c", `[ -t 0 ] && [ -t 1 ] && echo tty; read l; stty size; echo "got $l" >&2; read l`)
	s.Stdin, s.TTY = true, true
	id := startSpec(t, rt, s)
	ctx := context.Background()
	waitLog(t, s.LogPath, "stdout tty")
	resize := make(chan runtime.TerminalSize, 1)
	resize <- runtime.TerminalSize{Width: 91, Height: 17}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	pr, pw := newPipe(t)
	go func() { done <- rt.AttachStdin(actx, id, runtime.AttachOptions{Stdin: pr, Resize: resize}) }()
	time.Sleep(300 * time.Millisecond) // let the resize land before the read ends
	if _, err := pw.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	// The terminal echoes the input; stty prints the size.
	waitLog(t, s.LogPath, "stdout tty", "stdout x", "stdout 17 91", "stdout got x")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func newPipe(t *testing.T) (*os.File, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}
