package pause

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestIsInvocation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"pause"}, true},
		{[]string{"container-logger", "v1"}, false},
		{[]string{"path", "pause"}, false},
	} {
		if got := IsInvocation(tc.args); got != tc.want {
			t.Errorf("IsInvocation(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// Reap collects an exited child (no zombie is left) and returns at once
// while others still run.
func TestReapCollectsExitedChildren(t *testing.T) {
	done := exec.Command("true")
	if err := done.Start(); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	pid := done.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := Reap(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			break // reaped: no zombie left
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d not reaped", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := sleeper.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the running child was touched: %v", err)
	}
}

// The loop reaps on SIGCHLD and ends with 0 on SIGTERM or SIGINT.
func TestLoopEndsOnTermAndInt(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
		sigs := make(chan os.Signal, 3)
		sigs <- syscall.SIGCHLD
		sigs <- sig
		sigs <- syscall.SIGCHLD // never read
		if code := loop(sigs, io.Discard); code != 0 || len(sigs) != 1 {
			t.Errorf("%v: exit code %d, %d signals left; want 0 and 1", sig, code, len(sigs))
		}
	}
}
