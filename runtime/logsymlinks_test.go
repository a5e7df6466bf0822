package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/runtime"
)

// Against containerd: a started container gets its /var/log/containers
// style symlink to its log file, named with a 64-hex ID; removing the
// container removes it; SyncLogSymlinks relinks a running container whose
// link is missing and drops a dangling link of a container that is gone.
func TestContainerLogSymlinks(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real containerd")
	}
	links := filepath.Join(t.TempDir(), "containers")
	rt, _ := newRuntimeWith(t, func(o *runtime.Options) { o.ContainerLogsDir = links })
	ctx := context.Background()
	s := spec("linked", "app", "sleep", "600")
	s.LogPath = filepath.Join(t.TempDir(), "pods", "default_linked_uid-linked", "app", "0.log")
	id, err := rt.CreateContainer(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveContainer(context.Background(), id) })
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(id) {
		t.Fatalf("container ID %q is not 64 hex digits", id)
	}
	link := crilog.SymlinkPath(links, "linked", "default", "app", id)
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("a created, not started container has a link: %v", err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(link); err != nil || got != s.LogPath {
		t.Fatalf("link -> %q (%v), want %q", got, err, s.LogPath)
	}

	// Lost (an agent that kept none): relinked. A stale one: dropped.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	stale := crilog.SymlinkPath(links, "gone", "default", "app", "0123456789abcdef")
	if err := os.Symlink(filepath.Join(t.TempDir(), "missing.log"), stale); err != nil {
		t.Fatal(err)
	}
	if err := rt.SyncLogSymlinks(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(link); err != nil || got != s.LogPath {
		t.Fatalf("after sync: link -> %q (%v), want %q", got, err, s.LogPath)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("the dangling link of a container that is gone stayed: %v", err)
	}

	if err := rt.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Fatalf("link left after the container's removal: %v", err)
	}
}
