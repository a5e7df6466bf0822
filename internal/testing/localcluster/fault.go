package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Fault control for the fault tests (e2e/fault): stop, start, freeze and
// kill single components of a running cluster. A component stopped with Stop
// or Kill is started again by Start with the same command line, its log
// appended to. These change the cluster under every client: tests that use
// them need a cluster of their own (or run alone).

// Stop ends component name with sig (SIGTERM: a clean stop; SIGKILL: a
// crash), waits for it to exit (SIGKILL after 10s), and remembers its command
// line for Start. Only the component's own process gets sig: containerd's
// shims, in their own process groups, keep the containers running.
func (s *State) Stop(name string, sig syscall.Signal) error {
	pid, ok := s.Pids[name]
	if !ok {
		return fmt.Errorf("localcluster: no component %q", name)
	}
	argv, err := commandLine(pid)
	if err != nil {
		return fmt.Errorf("localcluster: %s (pid %d): %w", name, pid, err)
	}
	if s.Args == nil {
		s.Args = map[string][]string{}
	}
	s.Args[name] = argv
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("localcluster: signalling %s: %w", name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(10 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s.save()
}

// commandLine reads a running process's argv. A process in the middle of
// execve has an empty command line for a moment (its new memory has no
// arguments yet), so an empty one is read again, for at most 2s.
func commandLine(pid int) ([]string, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			return nil, fmt.Errorf("not running: %w", err)
		}
		if s := strings.TrimRight(string(b), "\x00"); s != "" {
			return strings.Split(s, "\x00"), nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("empty command line (a zombie?)")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Start starts a component stopped with Stop, with its old command line,
// and waits until it serves (30s for etcd and containerd, 90s for the API
// server).
func (s *State) Start(ctx context.Context, name string) error {
	argv := s.Args[name]
	if len(argv) == 0 {
		return fmt.Errorf("localcluster: %s was not stopped with Stop", name)
	}
	if pid := s.Pids[name]; alive(pid) {
		return fmt.Errorf("localcluster: %s (pid %d) is still running", name, pid)
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n--- localcluster: started again at %s ---\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localcluster: starting %s again: %w", name, err)
	}
	s.Pids[name] = cmd.Process.Pid
	delete(s.Args, name)
	if err := s.save(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	switch name {
	case "kube-apiserver":
		return waitFor(ctx, 90*time.Second, s, name, s.apiserverReady)
	case "etcd":
		return waitFor(ctx, 30*time.Second, s, name, func(ctx context.Context) error { return httpGet(ctx, http.DefaultClient, s.EtcdURL+"/health") })
	case "containerd":
		return waitFor(ctx, 30*time.Second, s, name, func(ctx context.Context) error {
			c, err := (&net.Dialer{}).DialContext(ctx, "unix", s.ContainerdAddress)
			if err != nil {
				return err
			}
			return c.Close()
		})
	default:
		// Nothing to ask: give it a second to fail at start.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if !alive(s.Pids[name]) {
			return fmt.Errorf("localcluster: %s exited right after its start again", name)
		}
	}
	return nil
}

// Freeze stops component name with SIGSTOP: its sockets stay open and
// accept connections, but nothing answers. Thaw resumes it.
func (s *State) Freeze(name string) error { return s.signal(name, syscall.SIGSTOP) }

// Thaw resumes a component frozen with Freeze.
func (s *State) Thaw(name string) error { return s.signal(name, syscall.SIGCONT) }

func (s *State) signal(name string, sig syscall.Signal) error {
	pid, ok := s.Pids[name]
	if !ok || !alive(pid) {
		return fmt.Errorf("localcluster: %s is not running", name)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("localcluster: %s: %w", name, err)
	}
	return nil
}

// APIServerReady reports whether the API server answers /readyz.
func (s *State) APIServerReady(ctx context.Context) error { return s.apiserverReady(ctx) }
