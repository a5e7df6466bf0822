package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeagent/nodeagent/config"
)

// An agent on a non-default containerd socket, upgraded from a version
// whose run directories carried the containerd namespace only, takes them
// over with what is in them (its running pods' namespace mounts); one
// whose directories exist already leaves both alone.
func TestAdoptLegacyRunDirs(t *testing.T) {
	cfg := config.Default()
	cfg.ContainerRuntimeEndpoint = "unix://" + filepath.Join(t.TempDir(), "containerd.sock")
	cfg.ContainerRuntimeNamespace = fmt.Sprintf("adopt-test-%d", os.Getpid())
	oldNetNS, oldPods := cfg.LegacyRunDirs()
	for _, d := range []string{oldNetNS, oldPods, cfg.NetNSDir(), cfg.PodNSDir()} {
		t.Cleanup(func() { _ = os.RemoveAll(d) })
	}
	for _, d := range []string{oldNetNS, oldPods} {
		if err := os.MkdirAll(filepath.Join(d, "pod-uid"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	adoptLegacyRunDirs(cfg, log)
	for _, d := range []string{cfg.NetNSDir(), cfg.PodNSDir()} {
		if _, err := os.Stat(filepath.Join(d, "pod-uid")); err != nil {
			t.Errorf("not taken over: %v", err)
		}
	}
	for _, d := range []string{oldNetNS, oldPods} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", d, err)
		}
	}
	// Both exist: nothing moves.
	if err := os.MkdirAll(oldNetNS, 0o755); err != nil {
		t.Fatal(err)
	}
	adoptLegacyRunDirs(cfg, log)
	if _, err := os.Stat(oldNetNS); err != nil {
		t.Errorf("an existing directory was taken over although the agent has its own: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.NetNSDir(), "pod-uid")); err != nil {
		t.Errorf("the agent's own directory changed: %v", err)
	}
}
