package crilog

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testlog"

	"github.com/fsnotify/fsnotify"
)

// writeLog writes n numbered lines through a Writer that rotates every few
// lines; the fake clock stamps line i at base+(i+1)ms.
func writeLog(t *testing.T, n int, rot Rotation) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	w, err := OpenWriter(p, rot, fakeNow(), func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "l%02d\n", i)
	}
	if err := w.Copy(strings.NewReader(in.String()), Stdout); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return p
}

func lines(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "l%02d\n", i)
	}
	return b.String()
}

func TestReadLogs(t *testing.T) {
	// 40-byte records, 5 per file, 10 files: everything is kept.
	p := writeLog(t, 50, Rotation{MaxSize: 200, MaxFiles: 20})
	if r, _ := RotatedFiles(p); len(r) != 9 {
		t.Fatalf("rotated %q", r)
	}
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		opts ReadOptions
		want string
	}{
		{"all", ReadOptions{TailLines: -1}, lines(0, 50)},
		{"tail within the live file", ReadOptions{TailLines: 3}, lines(47, 50)},
		{"tail across files", ReadOptions{TailLines: 12}, lines(38, 50)},
		{"tail more than there is", ReadOptions{TailLines: 500}, lines(0, 50)},
		{"tail 0", ReadOptions{TailLines: 0}, ""},
		{"since", ReadOptions{TailLines: -1, Since: base.Add(41 * time.Millisecond)}, lines(40, 50)},
		{"since and tail", ReadOptions{TailLines: 5, Since: base.Add(48 * time.Millisecond)}, lines(47, 50)},
		{"limit bytes", ReadOptions{TailLines: -1, LimitBytes: 10}, "l00\nl01\nl0"},
		{"timestamps", ReadOptions{TailLines: 1, Timestamps: true}, "2026-11-22T10:00:00.05Z l49\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := ReadLogs(context.Background(), p, tc.opts, &buf, nil); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Fatalf("got %q, want %q", buf.String(), tc.want)
			}
		})
	}
	if err := ReadLogs(context.Background(), filepath.Join(t.TempDir(), "none.log"), ReadOptions{TailLines: -1}, &bytes.Buffer{}, nil); !os.IsNotExist(err) && !strings.Contains(fmt.Sprint(err), "no such file") {
		t.Fatalf("missing log: %v", err)
	}
}

// A read racing the writer's append can see its last record in part: that
// record is no line yet for --tail (as kubelet's tail counts only whole
// lines), and a follow from the end starts at its beginning, so that it
// comes out whole once written, not as a fragment.
func TestTailIgnoresATornLastRecord(t *testing.T) {
	p := writeLog(t, 5, Rotation{})
	whole, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := []byte("2026-11-22T10:00:00.9Z stdout F l05\n")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(rec[:20]); err != nil { // torn within the timestamp
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tail int64
		want string
	}{{1, lines(4, 5)}, {2, lines(3, 5)}, {5, lines(0, 5)}, {9, lines(0, 5)}, {-1, lines(0, 5)}} {
		var buf bytes.Buffer
		if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: tc.tail}, &buf, nil); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tc.want {
			t.Errorf("tail %d with a torn last record: %q, want %q", tc.tail, buf.String(), tc.want)
		}
	}
	if off, n, err := lineStartFromEnd(p, 0); err != nil || off != int64(len(whole)) || n != 0 {
		t.Errorf("the end of the whole lines: %d %d %v, want %d", off, n, err, len(whole))
	}

	// Follow from the end (kubectl logs -f --tail=0, attach): the torn
	// record, completed, is the first line out.
	out := &testlog.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, positioned := make(chan error, 1), make(chan struct{})
	opts := ReadOptions{Follow: true, TailLines: 0, Positioned: func() { close(positioned) }}
	go func() { done <- ReadLogs(ctx, p, opts, out, func() bool { return true }) }()
	<-positioned
	if _, err := f.Write(rec[20:]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); out.String() != "l05\n"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("followed %q, want the completed record l05", out.String())
		}
	}
	cancel()
	<-done
}

func TestReadPartialLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	long := strings.Repeat("y", MaxLineSize+5)
	w, _ := OpenWriter(p, Rotation{}, fakeNow(), nil)
	_ = w.Copy(strings.NewReader(long+"\nshort\n"), Stdout)
	w.Close()
	var buf bytes.Buffer
	if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: -1}, &buf, nil); err != nil {
		t.Fatal(err)
	}
	if buf.String() != long+"\nshort\n" {
		t.Fatalf("partial lines not joined: %d bytes", buf.Len())
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer = testlog.Buffer

// A follow sees lines as they are written, across rotations, and ends once
// the container no longer runs.
func TestFollow(t *testing.T) { testFollow(t) }

// Without inotify (its per-user instance limit reached) a follow polls
// instead of ending: same output, same end.
func TestFollowWithoutInotify(t *testing.T) {
	orig := watchDir
	t.Cleanup(func() { watchDir = orig })
	watchDir = func(string) (*fsnotify.Watcher, error) { return nil, syscall.EMFILE }
	testFollow(t)
}

func testFollow(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	w, err := OpenWriter(p, Rotation{MaxSize: 300, MaxFiles: 3}, nil, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Copy(strings.NewReader("before\n"), Stdout)
	var run atomic.Bool
	run.Store(true)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(context.Background(), p, ReadOptions{Follow: true, TailLines: -1}, out, run.Load)
	}()
	want := "before\n"
	for i := range 30 {
		line := fmt.Sprintf("follow %02d", i)
		start := time.Now()
		_ = w.Copy(strings.NewReader(line+"\n"), Stdout)
		want += line + "\n"
		for !strings.HasSuffix(out.String(), line+"\n") {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("line %d not followed; have %q", i, out.String())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	w.Close()
	if r, _ := RotatedFiles(p); len(r) != 2 {
		t.Fatalf("no rotation happened: %q", r)
	}
	run.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * followIdle):
		t.Fatal("follow did not end after the container stopped")
	}
	if out.String() != want {
		t.Fatalf("followed %q, want %q", out.String(), want)
	}
}

// How long a line takes from the container's pipe to a follower's output:
// the logger's write plus the follower's fsnotify wake-up and read. It logs
// the percentiles (docs/benchmarks.md) and fails only when p99 exceeds 1s.
func TestFollowLatency(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	w, err := OpenWriter(p, Rotation{MaxSize: 64 << 10, MaxFiles: 3}, nil, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.Copy(pr, Stdout) }()
	defer pw.Close()
	seen := make(chan time.Time, 1)
	out := writerFunc(func(b []byte) (int, error) {
		if bytes.Contains(b, []byte("mark")) {
			seen <- time.Now()
		}
		return len(b), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = ReadLogs(ctx, p, ReadOptions{Follow: true, TailLines: 0}, out, func() bool { return true })
	}()
	time.Sleep(50 * time.Millisecond)
	const n = 300
	lat := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		fmt.Fprintf(pw, "mark %d %s\n", i, strings.Repeat("x", 200))
		select {
		case at := <-seen:
			lat = append(lat, at.Sub(start))
		case <-time.After(5 * time.Second):
			t.Fatalf("line %d not followed", i)
		}
		time.Sleep(time.Duration(i%7) * time.Millisecond)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("follow latency over %d lines (with rotations): p50 %s, p99 %s, max %s", n, p50, p99, lat[n-1])
	if p99 > time.Second {
		t.Fatalf("p99 %s", p99)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestReadLogsSeparateStreams(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	w, _ := OpenWriter(p, Rotation{}, fakeNow(), nil)
	_ = w.Copy(strings.NewReader("out 1\nout 2\n"), Stdout)
	_ = w.Copy(strings.NewReader("err 1\n"), Stderr)
	w.Close()
	var out, errb bytes.Buffer
	if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: -1, Stderr: &errb}, &out, nil); err != nil {
		t.Fatal(err)
	}
	if out.String() != "out 1\nout 2\n" || errb.String() != "err 1\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
}

// A log written raw (by an agent older than the CRI format) still reads.
func TestReadRawLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte("plain one\nplain two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: 1, Timestamps: true}, &buf, nil); err != nil || buf.String() != "plain two\n" {
		t.Fatalf("%q %v", buf.String(), err)
	}
	buf.Reset()
	if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: -1, Since: time.Now().Add(-time.Hour)}, &buf, nil); err != nil || buf.Len() != 0 {
		t.Fatalf("since: %q %v", buf.String(), err)
	}
}
