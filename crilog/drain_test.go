package crilog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testPipe is a pipe whose read end is non-blocking before os.NewFile, as
// RunLogger makes fds 3 and 4.
func testPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func contents(t *testing.T, p string) []string {
	t.Helper()
	var buf bytes.Buffer
	if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: -1}, &buf, nil); err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(buf.String(), "\n")
}

// What a pipe holds is in the file once drain returns, an unterminated
// last line as a partial record; the copy goes on after it without
// writing anything twice.
func TestPipeDrainWritesWhatThePipeHolds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	w, err := OpenWriter(p, Rotation{}, fakeNow(), func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, pw := testPipe(t)
	pc := newPipeCopy(w, r, Stdout)
	if pc == nil {
		t.Fatal("a non-blocking pipe is not drainable")
	}
	// Nobody copies yet: only drain can bring these to the file.
	var want strings.Builder
	for i := range 500 {
		fmt.Fprintf(&want, "line %03d\n", i)
	}
	want.WriteString("the-end")
	if _, err := io.WriteString(pw, want.String()); err != nil {
		t.Fatal(err)
	}
	if err := pc.drain(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(contents(t, p), ""); got != want.String() {
		t.Fatalf("after drain the log reads %d bytes ending %q, want %d ending %q", len(got), tail(got), want.Len(), tail(want.String()))
	}
	// An empty pipe drains at once.
	if err := pc.drain(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pc.run() }()
	if _, err := io.WriteString(pw, " goes on\nnext\n"); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := contents(t, p)
	if n := len(got); n < 3 || got[n-3] != "the-end goes on\n" || got[n-2] != "next\n" || got[0] != "line 000\n" || n != 503 {
		t.Fatalf("after EOF: %d lines, %q", n, got[max(0, n-3):])
	}
}

func tail(s string) string { return s[max(0, len(s)-20):] }

// Racing the copy: once the writer's last write has returned, a drain
// leaves its last line in the file, whatever the copy was doing (a read
// not yet written is finished under the lock drain waits for).
func TestPipeDrainRacesTheCopy(t *testing.T) {
	for round := range 30 {
		p := filepath.Join(t.TempDir(), "0.log")
		w, err := OpenWriter(p, Rotation{}, nil, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		r, pw := testPipe(t)
		pc := newPipeCopy(w, r, Stdout)
		done := make(chan error, 1)
		go func() { done <- pc.run() }()
		last := fmt.Sprintf("last line of round %d", round)
		var b bytes.Buffer
		for i := range 3000 {
			fmt.Fprintf(&b, "%05d %s\n", i, strings.Repeat("x", 40))
		}
		b.WriteString(last)
		if _, err := pw.Write(b.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := pc.drain(); err != nil {
			t.Fatal(err)
		}
		got := contents(t, p)
		if n := len(got); n != 3001 || got[n-1] != last {
			t.Fatalf("round %d: %d lines after drain, last %q", round, n, got[n-1])
		}
		pw.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}

func testContainerID(t *testing.T) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "test-" + hex.EncodeToString(b)
}

// The socket protocol: an answer for each request, the drain's error
// passed on, no logger and a logger that does not answer told apart.
func TestDrainProtocol(t *testing.T) {
	id := testContainerID(t)
	calls := make(chan struct{}, 10)
	var (
		mu   sync.Mutex
		fail error
	)
	setFail := func(err error) { mu.Lock(); fail = err; mu.Unlock() }
	block := make(chan struct{})
	stop := serveDrain(id, func() error {
		calls <- struct{}{}
		mu.Lock()
		err := fail
		mu.Unlock()
		if err == errBlock {
			<-block
		}
		return err
	}, func(err error) { t.Error(err) })
	defer stop()
	ctx := context.Background()

	if err := Drain(ctx, id); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if len(calls) != 1 {
		t.Fatalf("%d drains for one request", len(calls))
	}
	setFail(errors.New("read stdout: input/output error\nsecond line"))
	if err := Drain(ctx, id); err == nil || !strings.Contains(err.Error(), "input/output error; second line") {
		t.Fatalf("a failed drain reads as %v", err)
	}
	if err := Drain(ctx, testContainerID(t)); !errors.Is(err, ErrNoLogger) {
		t.Fatalf("no logger: %v, want ErrNoLogger", err)
	}

	setFail(errBlock)
	defer close(block)
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Drain(tctx, id)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoLogger) {
		t.Fatalf("a logger that does not answer: %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the deadline held the client %s", took)
	}
	cctx, ccancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); ccancel() }()
	if err := Drain(cctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want context.Canceled", err)
	}
}

var errBlock = errors.New("block")

// The logger process as the shim starts it (CONTAINER_ID in its
// environment): a drain request brings the container's last, unterminated
// line to the file while the pipes are still open, which without a drain
// happens only at EOF, when the task is released.
func TestLoggerProcessDrains(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c", "0.log")
	id := testContainerID(t)
	cmd := exec.Command(os.Args[0], LoggerCommand, "v1", "path", p)
	cmd.Env = append(os.Environ(), containerIDEnv+"="+id)
	outW, errW, stderr := startLogger(t, cmd)
	defer func() {
		outW.Close()
		errW.Close()
		if err := cmd.Wait(); err != nil || stderr.Len() > 0 {
			t.Errorf("logger: %v, stderr %q", err, stderr.String())
		}
	}()
	for i := range 2000 {
		fmt.Fprintf(outW, "%04d %s\n", i, strings.Repeat("y", 60))
	}
	fmt.Fprint(errW, "oops\n")
	fmt.Fprint(outW, "DONE")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Drain(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Each stream on its own: the order of records across the two pipes
	// is whichever the logger read first.
	var out, errs bytes.Buffer
	if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: -1, Stderr: &errs}, &out, nil); err != nil {
		t.Fatal(err)
	}
	got := strings.SplitAfter(out.String(), "\n")
	if n := len(got); n != 2001 || got[n-1] != "DONE" {
		t.Fatalf("after drain stdout has %d lines ending %q, want 2001 ending DONE", n, got[max(0, n-2):])
	}
	if errs.String() != "oops\n" {
		t.Fatalf("after drain stderr is %q, want oops", errs.String())
	}
}

// A listener on a container's drain socket that runs neither as root nor
// as the client's user (a hostNetwork pod can bind the abstract name
// before the logger) is not trusted: Drain says so without asking it, and
// the agent falls back to releasing the task. The listener here is a real
// logger process started as nobody, which would answer "ok".
func TestDrainRefusesAListenerOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a listener as another user")
	}
	// A directory nobody can reach (t.TempDir's parent is 0700) holding a
	// copy of this test binary, the logger, and its log.
	dir, err := os.MkdirTemp("", "crilog-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "logger")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	id := testContainerID(t)
	cmd := exec.Command(bin, LoggerCommand, "v1", "path", filepath.Join(dir, "0.log"))
	cmd.Env = append(os.Environ(), containerIDEnv+"="+id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	outW, errW, _ := startLogger(t, cmd)
	defer func() {
		outW.Close()
		errW.Close()
		_ = cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = Drain(ctx, id)
	if err == nil || errors.Is(err, ErrNoLogger) || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("drain through a listener of uid 65534: %v, want a refusal naming the uid", err)
	}
}
