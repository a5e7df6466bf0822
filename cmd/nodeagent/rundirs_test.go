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
	cfg.RootDir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg.RootDir, "pods", "pod-uid"), 0o755); err != nil {
		t.Fatal(err)
	}
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

// The legacy name of a non-default socket's directory can be the name a
// default-socket agent on the same host uses now (same containerd
// namespace): its pods are not this agent's, and it keeps them.
func TestAdoptLegacyRunDirsLeavesOtherAgentsPods(t *testing.T) {
	cfg := config.Default()
	cfg.ContainerRuntimeEndpoint = "unix://" + filepath.Join(t.TempDir(), "containerd.sock")
	cfg.ContainerRuntimeNamespace = fmt.Sprintf("adopt-foreign-%d", os.Getpid())
	cfg.RootDir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg.RootDir, "pods", "mine"), 0o755); err != nil {
		t.Fatal(err)
	}
	oldNetNS, oldPods := cfg.LegacyRunDirs()
	for _, d := range []string{oldNetNS, oldPods, cfg.NetNSDir(), cfg.PodNSDir()} {
		t.Cleanup(func() { _ = os.RemoveAll(d) })
	}
	for _, d := range []string{oldNetNS, oldPods} {
		for _, uid := range []string{"mine", "theirs"} {
			if err := os.MkdirAll(filepath.Join(d, uid), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	adoptLegacyRunDirs(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, d := range []string{oldNetNS, oldPods} {
		if _, err := os.Stat(filepath.Join(d, "theirs")); err != nil {
			t.Errorf("another agent's pod was taken: %v", err)
		}
	}
	for _, d := range []string{cfg.NetNSDir(), cfg.PodNSDir()} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s created from another agent's directory: %v", d, err)
		}
	}
	// An empty legacy directory is nobody's pods: left alone.
	if err := os.RemoveAll(filepath.Join(oldNetNS, "theirs")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(oldNetNS, "mine")); err != nil {
		t.Fatal(err)
	}
	adoptLegacyRunDirs(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := os.Stat(cfg.NetNSDir()); !os.IsNotExist(err) {
		t.Errorf("an empty directory was taken over: %v", err)
	}
}
