package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Restart stops one running component (SIGTERM, SIGKILL after 10s) and
// starts it again with the same command line, for fault and scale tests.
// The component's previous log is kept as <name>.log.prev. It returns once
// the new process is up: for kube-apiserver, once /readyz answers; for
// etcd, once /health does. stopped is when the old process was gone;
// onStopped (may be nil) is called then, before the new one starts.
func (s *State) Restart(ctx context.Context, name string, onStopped func()) (stopped time.Time, err error) {
	pid, ok := s.Pids[name]
	if !ok {
		return time.Time{}, fmt.Errorf("localcluster: no component %q", name)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return time.Time{}, fmt.Errorf("localcluster: command line of %s: %w", name, err)
	}
	args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
	if len(args) == 0 || args[0] == "" {
		return time.Time{}, fmt.Errorf("localcluster: empty command line of %s (pid %d)", name, pid)
	}
	stop(pid, 10*time.Second)
	stopped = time.Now()
	if onStopped != nil {
		onStopped()
	}
	logPath := filepath.Join(s.Dir, "logs", name+".log")
	_ = os.Rename(logPath, logPath+".prev")
	if err := s.spawn(name, args[0], args[1:]...); err != nil {
		return stopped, err
	}
	switch name {
	case "kube-apiserver":
		err = waitFor(ctx, 90*time.Second, s, name, s.apiserverReady)
	case "etcd":
		err = waitFor(ctx, 30*time.Second, s, name, func(ctx context.Context) error { return httpGet(ctx, http.DefaultClient, s.EtcdURL+"/health") })
	default:
		time.Sleep(time.Second)
		if !alive(s.Pids[name]) {
			err = s.exitError(name)
		}
	}
	return stopped, err
}
