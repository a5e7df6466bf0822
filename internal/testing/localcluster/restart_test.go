package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Restart re-executes a component's own command line as a new process and
// goes on with the same log.
func TestRestartReexecutesTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &State{Dir: dir, Pids: map[string]int{}}
	if err := s.spawn("sleeper", "sh", "-c", "echo started; exec sleep 300"); err != nil {
		t.Fatal(err)
	}
	old := s.Pids["sleeper"]
	t.Cleanup(func() { stop(s.Pids["sleeper"], 0) })
	called := false
	if _, err := s.Restart(context.Background(), "sleeper", func() { called = !alive(old) }); err != nil {
		t.Fatal(err)
	}
	if !called {
		t.Error("onStopped was not called after the old process was gone")
	}
	if alive(old) {
		t.Errorf("old process %d still alive", old)
	}
	pid := s.Pids["sleeper"]
	if pid == old || !alive(pid) {
		t.Fatalf("new process %d (old %d) not running", pid, old)
	}
	// The restart came right after the spawn: the command line Stop saved
	// may be the shell's (before its exec), whose new run echoes and execs
	// sleep in its own time, which Start's one second does not bound on a
	// loaded machine. Polled, bounded.
	var cmdline, log []byte
	const want = "sleep\x00300\x00"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if cmdline, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil {
			t.Fatal(err)
		}
		if log, err = os.ReadFile(filepath.Join(dir, "logs", "sleeper.log")); err != nil {
			t.Fatal(err)
		}
		if string(cmdline) == want && strings.Contains(string(log), "started\n") || time.Now().After(deadline) {
			break
		}
	}
	if string(cmdline) != want {
		t.Errorf("new command line %q, want %q", cmdline, want)
	}
	if !strings.Contains(string(log), "started\n") || !strings.Contains(string(log), "started again") {
		t.Errorf("log %q lacks the first run's output or the restart marker", log)
	}
	saved, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Pids["sleeper"] != pid {
		t.Errorf("state file has pid %d, want %d", saved.Pids["sleeper"], pid)
	}
	if _, err := s.Restart(context.Background(), "nothing", nil); err == nil {
		t.Error("restarting an unknown component succeeded")
	}
}
