package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/testing/backofftest"
	"github.com/nodeagent/nodeagent/internal/testing/testlog"
	"github.com/nodeagent/nodeagent/kubetypes"
)

// fakeDecode stands in for DecodeManifest: strict YAML/JSON into a Pod, a
// name is required, and the UID and config hash derive from path and
// content as kubelet's do.
func fakeDecode(data []byte, path, nodeName string) (*v1.Pod, error) {
	var pod v1.Pod
	if err := yaml.UnmarshalStrict(data, &pod); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if pod.Name == "" {
		return nil, errors.New("metadata.name: Required value")
	}
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", nodeName, path)
	h.Write(data)
	sum := hex.EncodeToString(h.Sum(nil))[:32]
	pod.UID = types.UID(sum)
	pod.Annotations = map[string]string{kubetypes.AnnotationConfigHash: sum, kubetypes.AnnotationConfigSource: kubetypes.SourceFile}
	pod.Spec.NodeName = nodeName
	return &pod, nil
}

func manifest(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

const brokenManifest = "apiVersion: v1\nkind: Pod\nmetadata: [this is not a map\n"

// describe renders a pod set as "name=image,..." in the order given.
func describe(pods []*v1.Pod) string {
	var parts []string
	for _, p := range pods {
		img := ""
		if len(p.Spec.Containers) > 0 {
			img = p.Spec.Containers[0].Image
		}
		parts = append(parts, p.Name+"="+img)
	}
	return strings.Join(parts, ",")
}

// errLog records OnError calls; Run calls it from its goroutine.
type errLog struct {
	mu   sync.Mutex
	errs []ManifestError
}

func (l *errLog) add(e ManifestError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, e)
}

// count is how many reports named the file base.
func (l *errLog) count(base string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		if filepath.Base(e.Path) == base {
			n++
		}
	}
	return n
}

func (l *errLog) all() []ManifestError {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ManifestError(nil), l.errs...)
}

func newTestSource(t *testing.T, dir string, o StaticOptions) (*StaticSource, *errLog) {
	t.Helper()
	errs := &errLog{}
	o.Dir = dir
	o.NodeName = "node-1"
	o.Decode = fakeDecode
	o.Logger = testlog.New(t)
	o.OnError = errs.add
	s, err := NewStaticSource(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, errs
}

// run starts s.Run and stops it at the end of the test.
func run(t *testing.T, s *StaticSource) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// latest takes the pending snapshot, if any, without waiting.
func latest(s *StaticSource) ([]*v1.Pod, bool) {
	select {
	case pods := <-s.updates:
		return pods, true
	default:
		return nil, false
	}
}

// waitFor receives snapshots until one renders as want, or fails at the
// deadline.
func waitFor(t *testing.T, s *StaticSource, want string) []*v1.Pod {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	last := "(none)"
	for {
		select {
		case pods, ok := <-s.Updates():
			if !ok {
				t.Fatalf("updates closed while waiting for %q", want)
			}
			if last = describe(pods); last == want {
				return pods
			}
		case <-deadline.C:
			t.Fatalf("no snapshot %q within 10s; last seen %q", want, last)
		}
	}
}

// eventually polls cond until it holds or fails at the deadline.

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewStaticSourceValidates(t *testing.T) {
	ok := StaticOptions{Dir: "/etc/nodeagent/manifests", NodeName: "n", Decode: fakeDecode}
	for _, tc := range []struct {
		desc    string
		mutate  func(*StaticOptions)
		wantErr string
	}{
		{desc: "valid", mutate: func(*StaticOptions) {}},
		{desc: "empty dir", mutate: func(o *StaticOptions) { o.Dir = "" }, wantErr: "Dir"},
		{desc: "empty node name", mutate: func(o *StaticOptions) { o.NodeName = "" }, wantErr: "NodeName"},
		{desc: "no decoder", mutate: func(o *StaticOptions) { o.Decode = nil }, wantErr: "Decode"},
		{desc: "negative debounce", mutate: func(o *StaticOptions) { o.Debounce = -time.Second }, wantErr: "Debounce"},
		{desc: "negative rescan", mutate: func(o *StaticOptions) { o.Rescan = -time.Second }, wantErr: "Rescan"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := ok
			tc.mutate(&o)
			s, err := NewStaticSource(o)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.debounce != DefaultStaticDebounce || s.rescan != DefaultStaticRescan || s.clock == nil {
					t.Errorf("defaults not applied: debounce %v rescan %v clock %v", s.debounce, s.rescan, s.clock)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			}
		})
	}
}

func TestStaticScanFiles(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		setup    func(t *testing.T, dir, outside string)
		want     string
		reported []string // file bases, in path order
	}{
		{
			desc: "manifest names only",
			setup: func(t *testing.T, dir, _ string) {
				for _, f := range []string{"a.yaml", "b.yml", "c.json", ".hidden.yaml", ".a.yaml.swp", "a.yaml.swp",
					"a.yaml.swx", "a.yaml~", "#a.yaml#", "4913", "notes.txt", "a.yaml.bak", "README"} {
					write(t, filepath.Join(dir, f), manifest(strings.NewReplacer(".", "-", "#", "x", "~", "t").Replace(f), "img"))
				}
				must(t, os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755))
				write(t, filepath.Join(dir, "sub.yaml", "d.yaml"), manifest("d", "img"))
			},
			want: "a-yaml=img,b-yml=img,c-json=img",
		},
		{
			desc: "symlinks",
			setup: func(t *testing.T, dir, outside string) {
				write(t, filepath.Join(outside, "real.yaml"), manifest("linked", "img"))
				must(t, os.Symlink(filepath.Join(outside, "real.yaml"), filepath.Join(dir, "link.yaml")))
				must(t, os.Symlink(filepath.Join(outside, "missing.yaml"), filepath.Join(dir, "dangling.yaml")))
				must(t, os.Symlink(outside, filepath.Join(dir, "dirlink.yaml")))
			},
			want:     "linked=img",
			reported: []string{"dangling.yaml"},
		},
		{
			desc: "a FIFO is refused without blocking",
			setup: func(t *testing.T, dir, _ string) {
				must(t, syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644))
				write(t, filepath.Join(dir, "z.yaml"), manifest("z", "img"))
			},
			want:     "z=img",
			reported: []string{"fifo.yaml"},
		},
		{
			desc: "too large a file",
			setup: func(t *testing.T, dir, _ string) {
				f, err := os.Create(filepath.Join(dir, "big.yaml"))
				must(t, err)
				must(t, f.Truncate(MaxManifestSize+1))
				must(t, f.Close())
			},
			reported: []string{"big.yaml"},
		},
		{
			desc: "broken and invalid files are skipped, the others kept",
			setup: func(t *testing.T, dir, _ string) {
				write(t, filepath.Join(dir, "a.yaml"), brokenManifest)
				write(t, filepath.Join(dir, "b.yaml"), manifest("b", "img"))
				write(t, filepath.Join(dir, "c.yaml"), manifest("", "img"))
			},
			want:     "b=img",
			reported: []string{"a.yaml", "c.yaml"},
		},
		{
			desc: "duplicate namespace/name: the first path wins",
			setup: func(t *testing.T, dir, _ string) {
				write(t, filepath.Join(dir, "b.yaml"), manifest("x", "from-b"))
				write(t, filepath.Join(dir, "a.yaml"), manifest("x", "from-a"))
				write(t, filepath.Join(dir, "c.yaml"), manifest("w", "from-c"))
			},
			want:     "x=from-a,w=from-c",
			reported: []string{"b.yaml"},
		},
		{
			desc: "same name in two namespaces is no duplicate",
			setup: func(t *testing.T, dir, _ string) {
				write(t, filepath.Join(dir, "a.yaml"), manifest("x", "a"))
				write(t, filepath.Join(dir, "b.yaml"), strings.Replace(manifest("x", "b"), "name: x", "name: x\n  namespace: kube-system", 1))
			},
			want: "x=a,x=b",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			tc.setup(t, dir, outside)
			s, errs := newTestSource(t, dir, StaticOptions{})
			if !s.sync() {
				t.Error("sync reported a problem with the directory")
			}
			pods, ok := latest(s)
			if !ok {
				t.Fatal("no snapshot after the first sync")
			}
			if got := describe(pods); got != tc.want {
				t.Errorf("pods %q, want %q", got, tc.want)
			}
			var reported []string
			for _, e := range errs.all() {
				t.Logf("reported: %v", &e)
				reported = append(reported, filepath.Base(e.Path))
				if e.Err == nil {
					t.Errorf("report for %s has no error", e.Path)
				}
			}
			if strings.Join(reported, ",") != strings.Join(tc.reported, ",") {
				t.Errorf("reported %v, want %v", reported, tc.reported)
			}
		})
	}
}

// TestStaticSyncHistory drives one source through a history of directory
// changes, one sync per step, and checks what is published and reported.
func TestStaticSyncHistory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "manifests")
	must(t, os.Mkdir(dir, 0o755))
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	s, errs := newTestSource(t, dir, StaticOptions{})

	var keptUID types.UID
	for i, step := range []struct {
		desc        string
		do          func(t *testing.T)
		publish     bool   // a snapshot is published
		want        string // the snapshot, if published
		wantReports int    // reports so far, in total
	}{
		{desc: "empty directory: the first snapshot is published", do: func(*testing.T) {}, publish: true, want: ""},
		{desc: "nothing changed", do: func(*testing.T) {}},
		{desc: "add a", do: func(t *testing.T) { write(t, a, manifest("a", "v1")) }, publish: true, want: "a=v1"},
		{desc: "a broken: last good kept", do: func(t *testing.T) { write(t, a, brokenManifest) }, wantReports: 1},
		{desc: "rescan does not report again", do: func(*testing.T) {}, wantReports: 1},
		{desc: "a broken differently: reported", do: func(t *testing.T) { write(t, a, brokenManifest+"#2\n") }, wantReports: 2},
		{desc: "a fixed", do: func(t *testing.T) { write(t, a, manifest("a", "v2")) }, publish: true, want: "a=v2", wantReports: 2},
		{desc: "a broken again the same way: reported again", do: func(t *testing.T) { write(t, a, brokenManifest+"#2\n") }, wantReports: 3},
		{desc: "a removed while broken: its pod goes", do: func(t *testing.T) { must(t, os.Remove(a)) }, publish: true, want: "", wantReports: 3},
		{desc: "a re-added broken: reported, no pod", do: func(t *testing.T) { write(t, a, brokenManifest+"#2\n") }, wantReports: 4},
		{desc: "b duplicates a", do: func(t *testing.T) {
			write(t, a, manifest("x", "from-a"))
			write(t, b, manifest("x", "from-b"))
		}, publish: true, want: "x=from-a", wantReports: 5},
		{desc: "duplicate not reported again", do: func(*testing.T) {}, wantReports: 5},
		{desc: "a removed: b takes the name", do: func(t *testing.T) { must(t, os.Remove(a)) }, publish: true, want: "x=from-b", wantReports: 5},
		{desc: "directory removed: no static pods", do: func(t *testing.T) { must(t, os.RemoveAll(dir)) }, publish: true, want: "", wantReports: 5},
		{desc: "directory still missing", do: func(*testing.T) {}, wantReports: 5},
		{desc: "directory back", do: func(t *testing.T) {
			must(t, os.Mkdir(dir, 0o755))
			write(t, b, manifest("b", "v1"))
		}, publish: true, want: "b=v1", wantReports: 5},
	} {
		step.do(t)
		s.sync()
		pods, published := latest(s)
		if published != step.publish {
			t.Fatalf("step %d %q: published %v (%q), want %v", i, step.desc, published, describe(pods), step.publish)
		}
		if published && describe(pods) != step.want {
			t.Fatalf("step %d %q: pods %q, want %q", i, step.desc, describe(pods), step.want)
		}
		if got := len(errs.all()); got != step.wantReports {
			t.Fatalf("step %d %q: %d reports, want %d: %v", i, step.desc, got, step.wantReports, errs.all())
		}
		if step.desc == "add a" {
			keptUID = pods[0].UID
		}
	}
	if keptUID == "" {
		t.Fatal("no UID recorded")
	}
	for _, e := range errs.all() {
		if filepath.Base(e.Path) == "b.yaml" && !errors.Is(e.Err, ErrDuplicateStaticPod) {
			t.Errorf("b.yaml reported with %v, want ErrDuplicateStaticPod", e.Err)
		}
	}
}

// TestStaticKeepsLastGoodPod checks that the pod kept for a broken file is
// the last good one, unchanged (same UID), and that consumers get copies.
func TestStaticKeepsLastGoodPod(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	write(t, a, manifest("a", "v1"))
	s, errs := newTestSource(t, dir, StaticOptions{})
	s.sync()
	good, _ := latest(s)
	good[0].Spec.Containers[0].Image = "mutated by the consumer"

	write(t, a, brokenManifest)
	write(t, filepath.Join(dir, "b.yaml"), manifest("b", "v1"))
	s.sync()
	pods, ok := latest(s)
	if !ok {
		t.Fatal("adding b published nothing")
	}
	if describe(pods) != "a=v1,b=v1" {
		t.Fatalf("pods %q, want a=v1,b=v1", describe(pods))
	}
	if pods[0].UID != good[0].UID {
		t.Errorf("kept pod UID %s, want the last good %s", pods[0].UID, good[0].UID)
	}
	if n := errs.count("a.yaml"); n != 1 {
		t.Errorf("a.yaml reported %d times, want 1", n)
	}
}

func TestStaticPublishLatestWins(t *testing.T) {
	s, _ := newTestSource(t, t.TempDir(), StaticOptions{})
	for _, name := range []string{"one", "two", "three"} {
		s.publish([]*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: name}}})
	}
	if n := len(s.updates); n != 1 {
		t.Fatalf("%d snapshots buffered, want 1", n)
	}
	if pods, _ := latest(s); describe(pods) != "three=" {
		t.Errorf("got %q, want the newest (three)", describe(pods))
	}
}

// TestStaticRunInotify edits a real directory the ways operators and their
// tools do and waits for the resulting pod sets through real inotify (the
// rescan period is too long to help).
func TestStaticRunInotify(t *testing.T) {
	parent, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(parent, "manifests")
	must(t, os.Mkdir(dir, 0o755))
	s, errs := newTestSource(t, dir, StaticOptions{Debounce: 10 * time.Millisecond, Rescan: time.Hour})
	run(t, s)
	waitFor(t, s, "")

	a := filepath.Join(dir, "a.yaml")
	for _, step := range []struct {
		desc string
		do   func(t *testing.T)
		want string
	}{
		{"create", func(t *testing.T) { write(t, a, manifest("a", "v1")) }, "a=v1"},
		{"truncate and write in two writes", func(t *testing.T) {
			f, err := os.OpenFile(a, os.O_WRONLY|os.O_TRUNC, 0)
			must(t, err)
			m := manifest("a", "v2")
			_, err = f.WriteString(m[:20])
			must(t, err)
			_, err = f.WriteString(m[20:])
			must(t, err)
			must(t, f.Close())
		}, "a=v2"},
		{"atomic replace (temp file renamed over)", func(t *testing.T) {
			tmp := filepath.Join(dir, ".a.yaml.tmp")
			write(t, tmp, manifest("a", "v3"))
			must(t, os.Rename(tmp, a))
		}, "a=v3"},
		{"vim save (backup rename, probe, write, delete backup)", func(t *testing.T) {
			must(t, os.Rename(a, a+"~"))
			write(t, filepath.Join(dir, "4913"), "")
			must(t, os.Remove(filepath.Join(dir, "4913")))
			write(t, filepath.Join(dir, ".a.yaml.swp"), "swap")
			write(t, a, manifest("a", "v4"))
			must(t, os.Remove(a+"~"))
			must(t, os.Remove(filepath.Join(dir, ".a.yaml.swp")))
		}, "a=v4"},
		{"cp from elsewhere", func(t *testing.T) {
			src := filepath.Join(outside, "c.yaml")
			write(t, src, manifest("c", "v1"))
			in, err := os.Open(src)
			must(t, err)
			defer in.Close()
			out, err := os.Create(filepath.Join(dir, "c.yaml"))
			must(t, err)
			_, err = io.Copy(out, in)
			must(t, err)
			must(t, out.Close())
		}, "a=v4,c=v1"},
		{"broken new file: skipped, the others kept", func(t *testing.T) {
			write(t, filepath.Join(dir, "b.yaml"), brokenManifest)
			backofftest.WaitFor(t, func() bool { return errs.count("b.yaml") == 1 }, "b.yaml reported")
			write(t, filepath.Join(dir, "d.yaml"), manifest("d", "v1")) // a visible change to wait for
		}, "a=v4,c=v1,d=v1"},
		{"broken edit of a good file: last good kept", func(t *testing.T) {
			write(t, a, brokenManifest)
			backofftest.WaitFor(t, func() bool { return errs.count("a.yaml") == 1 }, "a.yaml reported")
			must(t, os.Remove(filepath.Join(dir, "d.yaml")))
		}, "a=v4,c=v1"},
		{"duplicate name", func(t *testing.T) {
			write(t, filepath.Join(dir, "e.yaml"), manifest("c", "from-e"))
			backofftest.WaitFor(t, func() bool { return errs.count("e.yaml") == 1 }, "e.yaml reported")
			must(t, os.Remove(filepath.Join(dir, "c.yaml")))
		}, "a=v4,c=from-e"},
		{"delete", func(t *testing.T) { must(t, os.Remove(a)) }, "c=from-e"},
		{"directory moved away and re-created", func(t *testing.T) {
			must(t, os.Rename(dir, dir+".old"))
			must(t, os.Mkdir(dir, 0o755))
			write(t, filepath.Join(dir, "g.yaml"), manifest("g", "v1"))
		}, "g=v1"},
		{"new directory is watched", func(t *testing.T) { write(t, filepath.Join(dir, "h.yaml"), manifest("h", "v1")) }, "g=v1,h=v1"},
	} {
		t.Logf("step: %s", step.desc)
		step.do(t)
		waitFor(t, s, step.want)
	}
	// Many rescans ran; every broken file was reported once.
	for _, base := range []string{"a.yaml", "b.yaml", "e.yaml"} {
		if n := errs.count(base); n != 1 {
			t.Errorf("%s reported %d times, want 1", base, n)
		}
	}
}

// TestStaticRunDirCreatedLate starts without the directory, then creates,
// removes and re-creates it.
func TestStaticRunDirCreatedLate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	s, _ := newTestSource(t, dir, StaticOptions{Debounce: 10 * time.Millisecond, Rescan: time.Hour})
	run(t, s)
	waitFor(t, s, "") // ready although the directory is missing

	must(t, os.Mkdir(dir, 0o755))
	write(t, filepath.Join(dir, "a.yaml"), manifest("a", "v1"))
	waitFor(t, s, "a=v1")
	write(t, filepath.Join(dir, "b.yaml"), manifest("b", "v1")) // seen through inotify now
	waitFor(t, s, "a=v1,b=v1")

	must(t, os.RemoveAll(dir))
	waitFor(t, s, "")

	must(t, os.Mkdir(dir, 0o755))
	write(t, filepath.Join(dir, "c.yaml"), manifest("c", "v1"))
	waitFor(t, s, "c=v1")
}

// TestStaticRunFakeClock checks the debounce and the periodic rescan with a
// fake clock (and real inotify).
func TestStaticRunFakeClock(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const debounce, rescan = time.Second, time.Minute
	s, _ := newTestSource(t, dir, StaticOptions{Debounce: debounce, Rescan: rescan, Clock: clk})
	run(t, s)
	waitFor(t, s, "")
	backofftest.WaitFor(t, func() bool { return clk.Waiters() == 1 }, "the rescan ticker")

	// A symlink to a file outside the directory: changing the target is
	// invisible to the directory's inotify watch.
	target := filepath.Join(outside, "real.yaml")
	write(t, target, manifest("a", "v1"))
	must(t, os.Symlink(target, filepath.Join(dir, "a.yaml")))
	backofftest.WaitFor(t, func() bool { return clk.Waiters() == 2 }, "the debounce timer")
	clk.Step(debounce - time.Millisecond)
	assertNoUpdate(t, s)
	clk.Step(time.Millisecond)
	waitFor(t, s, "a=v1")
	backofftest.WaitFor(t, func() bool { return clk.Waiters() == 1 }, "the debounce timer to go")

	write(t, target, manifest("a", "v2"))
	assertNoUpdate(t, s)
	clk.Step(rescan)
	waitFor(t, s, "a=v2")
}

// assertNoUpdate fails if a snapshot arrives soon. It can only catch an
// update that is already due, which is what the callers check.
func assertNoUpdate(t *testing.T, s *StaticSource) {
	t.Helper()
	select {
	case pods := <-s.Updates():
		t.Fatalf("unexpected snapshot %q", describe(pods))
	case <-time.After(100 * time.Millisecond):
	}
}

// TestStaticWithDecodeManifest runs a scan with the real decoder: its pods
// and its errors (already ManifestErrors) come out as the source promises.
func TestStaticWithDecodeManifest(t *testing.T) {
	dir := t.TempDir()
	web, err := os.ReadFile(filepath.Join("testdata", "manifests", "web.yaml"))
	must(t, err)
	write(t, filepath.Join(dir, "web.yaml"), string(web))
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, strings.Replace(manifest("bad", "busybox"), "spec:\n", "spec:\n  bogusField: 1\n", 1))

	s, errs := newTestSource(t, dir, StaticOptions{})
	s.decode = DecodeManifest
	s.sync()
	pods, ok := latest(s)
	if !ok || len(pods) != 1 {
		t.Fatalf("pods %q (published %v), want the web pod only", describe(pods), ok)
	}
	if p := pods[0]; p.Name != "web-node-1" || p.UID == "" || p.Annotations[kubetypes.AnnotationConfigHash] != string(p.UID) {
		t.Errorf("pod %s uid %q hash %q, want web-node-1 with its UID as config hash", p.Name, p.UID, p.Annotations[kubetypes.AnnotationConfigHash])
	}
	reports := errs.all()
	if len(reports) != 1 || reports[0].Path != bad {
		t.Fatalf("reports %v, want one for %s", reports, bad)
	}
	msg := reports[0].Error()
	if strings.Count(msg, bad) != 1 || !strings.Contains(msg, "bogusField") {
		t.Errorf("report %q should name the path once and the bad field", msg)
	}
}
