package config

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
)

// logSink sends logs to t.Logf and keeps them for assertions.
type logSink struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	s.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLog waits until the logs contain every string of want.
func (s *logSink) waitLog(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s.String(), w)
		}
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("logs never contained %q", want)
}

func newTestLogger(t *testing.T) (*slog.Logger, *logSink) {
	s := &logSink{t: t}
	return slog.New(slog.NewTextHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug})), s
}

// startWatcher loads o, starts a Watcher on it and stops it at the end of
// the test.
func startWatcher(t *testing.T, o LoadOptions, clk clock.Clock, debounce time.Duration) (*Watcher, *logSink) {
	t.Helper()
	cfg, _, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	log, sink := newTestLogger(t)
	w := NewWatcher(o, log, clk, cfg)
	w.Debounce = debounce
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-w.started:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("Run ended before watching: %v", err)
	}
	return w, sink
}

func waitUpdate(t *testing.T, w *Watcher) *NodeAgentConfiguration {
	t.Helper()
	select {
	case c := <-w.Updates():
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no configuration update within 10s")
		return nil
	}
}

func expectNoUpdate(t *testing.T, w *Watcher, wait time.Duration) {
	t.Helper()
	select {
	case c := <-w.Updates():
		t.Fatalf("unexpected update: %+v", c)
	case <-time.After(wait):
	}
}

// writeAtomic writes a file the way configuration managers do: a temporary
// file renamed over the target.
func writeAtomic(t *testing.T, p, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherWithFsnotify(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", hdr+"nodeLeaseDurationSeconds: 40\n")
	dropIns := filepath.Join(dir, "config.d")
	if err := os.Mkdir(dropIns, 0o755); err != nil {
		t.Fatal(err)
	}
	w, logs := startWatcher(t, LoadOptions{Path: p, DropInDir: dropIns}, clock.RealClock{}, 50*time.Millisecond)

	// A drop-in that changes the lease duration is delivered.
	writeFile(t, dropIns, "50-lease.conf", hdr+"nodeLeaseDurationSeconds: 60\n")
	c := waitUpdate(t, w)
	if c.NodeLeaseDurationSeconds != 60 || c.RenewInterval() != 15*time.Second {
		t.Fatalf("lease %d renew %s, want 60 and 15s", c.NodeLeaseDurationSeconds, c.RenewInterval())
	}
	logs.waitLog(t, "applying configuration change without restart", "nodeLeaseDurationSeconds=60")

	// An invalid drop-in is rejected with its errors; nothing is delivered.
	bad := writeFile(t, dropIns, "60-bad.conf", hdr+"maxPods: -1\nnodeLeaseDurationSeconds: 0\n")
	logs.waitLog(t, "new configuration rejected", bad+":4: nodeLeaseDurationSeconds: Invalid value: 0: must be greater than 0", bad+":3: maxPods: Invalid value: -1: must be greater than 0")
	expectNoUpdate(t, w, 300*time.Millisecond)
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}

	// A change of a field that needs a restart is logged, not delivered.
	writeFile(t, dropIns, "70-pods.conf", hdr+"maxPods: 20\n")
	logs.waitLog(t, "configuration change requires restart", "fields=[maxPods]")
	expectNoUpdate(t, w, 300*time.Millisecond)

	// An atomic rewrite of the main file; the running maxPods stays.
	writeAtomic(t, p, hdr+"nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 1m\n")
	c = waitUpdate(t, w)
	if c.NodeStatusUpdateFrequency.Duration != 20*time.Second || c.NodeStatusReportFrequency.Duration != time.Minute {
		t.Errorf("frequencies %s/%s, want 20s/1m", c.NodeStatusUpdateFrequency.Duration, c.NodeStatusReportFrequency.Duration)
	}
	if c.NodeLeaseDurationSeconds != 60 || c.MaxPods != DefaultMaxPods {
		t.Errorf("lease %d maxPods %d, want 60 and the running %d", c.NodeLeaseDurationSeconds, c.MaxPods, DefaultMaxPods)
	}

	// Removing the drop-in brings the lease back to the main file's value.
	if err := os.Remove(filepath.Join(dropIns, "50-lease.conf")); err != nil {
		t.Fatal(err)
	}
	if c = waitUpdate(t, w); c.NodeLeaseDurationSeconds != DefaultNodeLeaseDurationSeconds {
		t.Errorf("lease %d after removing the drop-in, want %d", c.NodeLeaseDurationSeconds, DefaultNodeLeaseDurationSeconds)
	}

	// The drop-in directory is removed (rejected: it is configured) and
	// created again: it is watched again.
	must(t, os.RemoveAll(dropIns))
	logs.waitLog(t, dropIns+": cannot read drop-in directory: no such file or directory")
	must(t, os.Mkdir(dropIns, 0o755))
	writeFile(t, dropIns, "50-lease.conf", hdr+"nodeLeaseDurationSeconds: 60\n")
	if c = waitUpdate(t, w); c.NodeLeaseDurationSeconds != 60 {
		t.Fatalf("lease %d after re-creating the drop-in directory, want 60", c.NodeLeaseDurationSeconds)
	}
	writeFile(t, dropIns, "50-lease.conf", hdr+"nodeLeaseDurationSeconds: 80\n")
	if c = waitUpdate(t, w); c.NodeLeaseDurationSeconds != 80 {
		t.Fatalf("lease %d, want 80: the re-created directory is not watched", c.NodeLeaseDurationSeconds)
	}
}

// TestWatcherConfigMapSwap mimics how the kubelet updates a mounted
// ConfigMap: the file is a symlink through ..data, which is swapped
// atomically to a new timestamped directory.
func TestWatcherConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "..2026_01_01_00_00_00.1/config.yaml", hdr+"nodeLeaseDurationSeconds: 40\n")
	must(t, os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(dir, "..data")))
	must(t, os.Symlink("..data/config.yaml", filepath.Join(dir, "config.yaml")))
	w, _ := startWatcher(t, LoadOptions{Path: filepath.Join(dir, "config.yaml")}, clock.RealClock{}, 50*time.Millisecond)

	writeFile(t, dir, "..2026_01_01_00_01_00.2/config.yaml", hdr+"nodeLeaseDurationSeconds: 60\n")
	must(t, os.Symlink("..2026_01_01_00_01_00.2", filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(t, os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.1")))

	if c := waitUpdate(t, w); c.NodeLeaseDurationSeconds != 60 {
		t.Errorf("lease %d, want 60", c.NodeLeaseDurationSeconds)
	}
}

// TestWatcherSymlinkToOtherDirectory follows a file that is a symlink into
// another directory: writes to the target are seen.
func TestWatcherSymlinkToOtherDirectory(t *testing.T) {
	etc, srv := t.TempDir(), t.TempDir()
	target := writeFile(t, srv, "nodeagent.yaml", hdr)
	must(t, os.Symlink(target, filepath.Join(etc, "config.yaml")))
	w, _ := startWatcher(t, LoadOptions{Path: filepath.Join(etc, "config.yaml")}, clock.RealClock{}, 50*time.Millisecond)
	writeAtomic(t, target, hdr+"logging:\n  verbosity: 4\n")
	if c := waitUpdate(t, w); c.Logging.Verbosity != 4 {
		t.Errorf("verbosity %d, want 4", c.Logging.Verbosity)
	}
}

// TestWatcherDebounceAndTrigger uses a fake clock: a file change is read only
// after the debounce period, a Trigger (SIGHUP) at once.
func TestWatcherDebounceAndTrigger(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", hdr)
	fc := testingclock.NewFakeClock(time.Now())
	w, _ := startWatcher(t, LoadOptions{Path: p}, fc, time.Second)

	writeFile(t, dir, "config.yaml", hdr+"nodeLeaseDurationSeconds: 60\n")
	backofftest.WaitFor(t, fc.HasWaiters, "the debounce timer")
	expectNoUpdate(t, w, 200*time.Millisecond)
	fc.Step(time.Second)
	if c := waitUpdate(t, w); c.NodeLeaseDurationSeconds != 60 {
		t.Fatalf("lease %d, want 60", c.NodeLeaseDurationSeconds)
	}

	// An unrelated file in the directory does not arm the timer.
	writeFile(t, dir, "kubeconfig", "x")
	time.Sleep(200 * time.Millisecond)
	if fc.HasWaiters() {
		t.Errorf("an unrelated file armed the debounce timer")
	}

	// Trigger reads at once, without the clock moving. The write arms the
	// timer, which never fires here.
	writeFile(t, dir, "config.yaml", hdr+"nodeLeaseDurationSeconds: 80\n")
	w.Trigger()
	w.Trigger() // coalesces
	if c := waitUpdate(t, w); c.NodeLeaseDurationSeconds != 80 {
		t.Fatalf("lease %d, want 80", c.NodeLeaseDurationSeconds)
	}
}

func TestWatcherReload(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", hdr)
	log, logs := newTestLogger(t)
	w := NewWatcher(LoadOptions{Path: p}, log, testingclock.NewFakeClock(time.Now()), Default())

	if _, changed := w.Reload(); changed {
		t.Errorf("Reload of an unchanged file reported a change")
	}
	writeFile(t, dir, "config.yaml", hdr+"logging:\n  verbosity: 3\n  format: json\n")
	c, changed := w.Reload()
	if !changed || c.Logging.Verbosity != 3 || c.Logging.Format != "text" {
		t.Errorf("Reload = %+v, %v; want verbosity 3 and the running format text", c.Logging, changed)
	}
	if !strings.Contains(logs.String(), "fields=[logging.format]") {
		t.Errorf("the format change was not logged as requiring a restart:\n%s", logs)
	}
	// The restart warning is logged once, not on every reload.
	w.Reload()
	if n := strings.Count(logs.String(), "requires restart"); n != 1 {
		t.Errorf("restart warning logged %d times, want 1", n)
	}
	// So is a configuration warning: the caller's own at start (kubeadm's
	// unsupported KubeletConfiguration fields) is not repeated by reloads.
	kc := writeFile(t, dir, "kubelet.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodURL: http://127.0.0.1:1/pods\n")
	_, startWarnings, err := Load(LoadOptions{Path: kc})
	if err != nil || len(startWarnings) != 1 {
		t.Fatalf("Load: %v, warnings %q; want one", err, startWarnings)
	}
	kw := NewWatcher(LoadOptions{Path: kc}, log, testingclock.NewFakeClock(time.Now()), Default())
	kw.LoggedWarnings = startWarnings
	kw.Reload()
	kw.Reload()
	if n := strings.Count(logs.String(), "staticPodURL"); n != 0 {
		t.Errorf("the start-up warning was logged %d more times by reloads, want 0:\n%s", n, logs)
	}
	writeFile(t, dir, "kubelet.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodURL: http://127.0.0.1:1/pods\nstaticPodURLHeader:\n  X-Node: [a]\n")
	kw.Reload()
	kw.Reload()
	if n := strings.Count(logs.String(), "staticPodURLHeader"); n != 1 {
		t.Errorf("a changed warning was logged %d times, want 1:\n%s", n, logs)
	}
	writeFile(t, dir, "config.yaml", "garbage")
	if c, changed := w.Reload(); changed || c.Logging.Verbosity != 3 {
		t.Errorf("an invalid file changed the running configuration: %+v %v", c, changed)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestWatcherRetriesLostWatch removes the drop-in directory together with
// its parent, in a directory that is not watched: nothing is left to watch,
// so only the retry can notice that they came back. (A drop-in directory
// removed alone is seen through its parent's watch: TestWatcherWithFsnotify.)
func TestWatcherRetriesLostWatch(t *testing.T) {
	etc, other := t.TempDir(), t.TempDir()
	p := writeFile(t, etc, "config.yaml", hdr)
	parent := filepath.Join(other, "nodeagent")
	dropIns := filepath.Join(parent, "config.d")
	must(t, os.MkdirAll(dropIns, 0o755))
	fc := testingclock.NewFakeClock(time.Now())
	w, logs := startWatcher(t, LoadOptions{Path: p, DropInDir: dropIns}, fc, time.Second)

	must(t, os.RemoveAll(parent))
	backofftest.WaitFor(t, fc.HasWaiters, "the debounce timer")
	fc.Step(time.Second)
	logs.waitLog(t, "Cannot watch directory; retrying", "dir="+parent, "new configuration rejected")
	backofftest.WaitFor(t, fc.HasWaiters, "the retry timer")

	must(t, os.MkdirAll(dropIns, 0o755))
	writeFile(t, dropIns, "10.conf", hdr+"nodeLeaseDurationSeconds: 60\n")
	expectNoUpdate(t, w, 200*time.Millisecond)
	fc.Step(DefaultWatchRetry)
	if c := waitUpdate(t, w); c.NodeLeaseDurationSeconds != 60 {
		t.Fatalf("lease %d, want 60", c.NodeLeaseDurationSeconds)
	}
	// Watched again: a change is seen through the debounce timer.
	writeFile(t, dropIns, "10.conf", hdr+"nodeLeaseDurationSeconds: 80\n")
	backofftest.WaitFor(t, fc.HasWaiters, "the debounce timer")
	fc.Step(time.Second)
	if c := waitUpdate(t, w); c.NodeLeaseDurationSeconds != 80 {
		t.Fatalf("lease %d, want 80", c.NodeLeaseDurationSeconds)
	}
}
