package crilog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary act as the logger process, as the shim
// would start the agent binary.
func TestMain(m *testing.M) {
	if IsLoggerInvocation(os.Args[1:]) {
		os.Exit(RunLogger(os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}

// fakeNow returns a clock that advances 1ms per call from a fixed time.
func fakeNow() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCopyFormat(t *testing.T) {
	long := strings.Repeat("x", MaxLineSize) + "yz"
	for _, tc := range []struct {
		name, in string
		want     []string // "stream tag content"
	}{
		{"lines", "a\nb\n", []string{"stdout F a", "stdout F b"}},
		{"empty line", "\n", []string{"stdout F "}},
		{"crlf", "a\r\n", []string{"stdout F a"}},
		{"unterminated last line is partial at EOF, as containerd writes it", "a\nb", []string{"stdout F a", "stdout P b"}},
		{"long line is split", long + "\n", []string{"stdout P " + long[:MaxLineSize], "stdout F yz"}},
		{"exactly max size", long[:MaxLineSize] + "\n", []string{"stdout P " + long[:MaxLineSize], "stdout F "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "0.log")
			w, err := OpenWriter(p, Rotation{}, fakeNow(), func(err error) { t.Error(err) })
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Copy(strings.NewReader(tc.in), Stdout); err != nil {
				t.Fatal(err)
			}
			w.Close()
			lines := strings.Split(strings.TrimSuffix(readFile(t, p), "\n"), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d lines %q, want %q", len(lines), lines, tc.want)
			}
			prev := time.Time{}
			for i, l := range lines {
				ts, rest, _ := strings.Cut(l, " ")
				tm, err := time.Parse(time.RFC3339Nano, ts)
				if err != nil || !tm.After(prev) {
					t.Errorf("line %d: timestamp %q (%v) not after %v", i, ts, err, prev)
				}
				prev = tm
				if rest != tc.want[i] {
					t.Errorf("line %d = %.40q, want %.40q", i, rest, tc.want[i])
				}
				if _, err := ParseRecord([]byte(l)); err != nil {
					t.Errorf("line %d does not parse back: %v", i, err)
				}
			}
		})
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "0.log")
	rot := Rotation{MaxSize: 4096, MaxFiles: 3}
	w, err := OpenWriter(p, rot, fakeNow(), func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	const n = 2000
	for i := range n {
		fmt.Fprintf(&in, "line %05d\n", i)
	}
	if err := w.Copy(strings.NewReader(in.String()), Stderr); err != nil {
		t.Fatal(err)
	}
	w.Close()
	files, _ := filepath.Glob(p + "*")
	if len(files) != rot.MaxFiles {
		t.Fatalf("files %q, want %d", files, rot.MaxFiles)
	}
	rotated, _ := RotatedFiles(p)
	var all string
	for _, f := range append(rotated, p) {
		b := readFile(t, f)
		if int64(len(b)) > rot.MaxSize {
			t.Errorf("%s: %d bytes > %d", f, len(b), rot.MaxSize)
		}
		if !strings.HasSuffix(b, "\n") {
			t.Errorf("%s does not end on a record", f)
		}
		all += b
	}
	// The kept files hold the newest lines, in order, none missing.
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasSuffix(last, fmt.Sprintf("line %05d", n-1)) {
		t.Fatalf("last line %q", last)
	}
	first := n - len(lines)
	for i, l := range lines {
		if !strings.HasSuffix(l, fmt.Sprintf("stderr F line %05d", first+i)) {
			t.Fatalf("line %d = %q, want line %05d", i, l, first+i)
		}
	}
	// Names: kubelet's <log>.<yyyymmdd-hhmmss>, a counter within a second.
	for _, r := range rotated {
		if !regexp.MustCompile(`^` + regexp.QuoteMeta(p) + `\.20261122-10000\d(\.\d{3})?$`).MatchString(r) {
			t.Errorf("rotated name %q", r)
		}
	}
}

// A reader holding a rotated file open does not stop the writer, and sees
// that file's content complete.
func TestRotationWithOpenReader(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	w, err := OpenWriter(p, Rotation{MaxSize: 200, MaxFiles: 2}, fakeNow(), func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Copy(strings.NewReader("first\n"), Stdout)
	held, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_ = w.Copy(strings.NewReader(strings.Repeat("more lines to rotate\n", 50)), Stdout)
	w.Close()
	b, _ := io.ReadAll(held)
	if !strings.Contains(string(b), "stdout F first\n") {
		t.Fatalf("held file %q", b)
	}
}

// The logger process as the shim starts it: fds 3/4 the streams, fd 5
// closed when ready, args as unordered pairs. A writer that floods stdout
// with nobody reading the log never blocks, and every line lands.
func TestLoggerProcess(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c", "1.log")
	args := []string{"max-files", "4", "path", p, LoggerCommand, "v1", "max-size", "1048576"}
	cmd := exec.Command(os.Args[0], args...)
	outW, errW, stderr := startLogger(t, cmd)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("log file not there when ready: %v", err)
	}
	const lines = 100000 // ~5 MiB of records: several rotations
	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		for i := range lines {
			if _, err := fmt.Fprintf(outW, "%06d %s\n", i, strings.Repeat("0123456789", 3)); err != nil {
				t.Error(err)
				break
			}
		}
		_, _ = errW.Write([]byte("to stderr\n"))
		done <- time.Since(start)
	}()
	select {
	case d := <-done:
		t.Logf("%d lines written in %s", lines, d)
	case <-time.After(30 * time.Second):
		t.Fatal("container writes blocked")
	}
	outW.Close()
	errW.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("logger: %v (%s)", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("logger stderr: %s", stderr.String())
	}
	files, _ := filepath.Glob(p + "*")
	if len(files) != 4 {
		t.Errorf("files %q, want 4", files)
	}
	var buf bytes.Buffer
	if err := ReadLogs(context.Background(), p, ReadOptions{TailLines: -1}, &buf, nil); err != nil {
		t.Fatal(err)
	}
	// The kept files hold the newest stdout lines without a gap, and the
	// stderr line (streams are not ordered against each other).
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	next, sawStderr := -1, false
	for _, l := range got {
		if l == "to stderr" {
			sawStderr = true
			continue
		}
		var i int
		if _, err := fmt.Sscanf(l, "%06d", &i); err != nil {
			t.Fatalf("line %q", l)
		}
		if next >= 0 && i != next {
			t.Fatalf("line %d follows %d", i, next-1)
		}
		next = i + 1
	}
	if next != lines || !sawStderr {
		t.Fatalf("last stdout line %d, stderr line seen %v", next-1, sawStderr)
	}
}

// startLogger starts cmd as the shim starts the logger process (the
// container's stdout and stderr pipes and the ready pipe as fds 3-5) and
// returns once the logger says it is ready, with the pipes' write ends and
// its stderr. The caller closes the write ends and waits for cmd.
func startLogger(t *testing.T, cmd *exec.Cmd) (outW, errW *os.File, stderr *bytes.Buffer) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer readyR.Close()
	cmd.ExtraFiles = []*os.File{outR, errR, readyW}
	stderr = new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outR.Close()
	errR.Close()
	readyW.Close()
	if _, err := readyR.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("ready: %v (logger stderr %q)", err, stderr.String())
	}
	return outW, errW, stderr
}

func TestParseLoggerArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
		rot     Rotation
	}{
		{args: []string{"path", "/a/0.log", LoggerCommand, "v1"}, rot: Rotation{DefaultMaxSize, DefaultMaxFiles}},
		{args: []string{"max-size", "100", "max-files", "2", LoggerCommand, "v1", "path", "/a"}, rot: Rotation{100, 2}},
		{args: []string{LoggerCommand, "v2", "path", "/a"}, wantErr: "unknown argument format"},
		{args: []string{LoggerCommand, "v1", "path", "rel"}, wantErr: "must be an absolute path"},
		{args: []string{LoggerCommand, "v1", "path", "/a", "max-files", "0"}, wantErr: "max-files"},
		{args: []string{LoggerCommand, "v1", "path"}, wantErr: "pairs"},
		{args: []string{LoggerCommand, "v1", "path", "/a", "colour", "red"}, wantErr: `unknown argument "colour"`},
	} {
		_, rot, err := ParseLoggerArgs(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || rot != tc.rot {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, rot, err, tc.rot)
		}
	}
	// The URI arguments round-trip, in any order.
	m := LoggerArgs("/x/1.log", Rotation{MaxSize: 7, MaxFiles: 3})
	var args []string
	for k, v := range m {
		args = append(args, k, v)
	}
	if !IsLoggerInvocation(args) {
		t.Fatalf("%q not a logger invocation", args)
	}
	if p, rot, err := ParseLoggerArgs(args); err != nil || p != "/x/1.log" || rot != (Rotation{7, 3}) {
		t.Fatalf("round trip: %q %+v %v", p, rot, err)
	}
	if IsLoggerInvocation([]string{"--config", LoggerCommand}) {
		t.Fatal("a value is not the marker")
	}
}

// straddler yields 9-byte lines in chunks that always end mid-line, so the
// bufio buffer is never empty after a line, then blocks until released.
type straddler struct {
	left    int
	first   bool
	release chan struct{}
}

func (s *straddler) Read(p []byte) (int, error) {
	if s.left <= 0 {
		<-s.release
		return 0, io.EOF
	}
	chunk := "xxxx\nyyyy"[:]
	if !s.first {
		s.first = true
		chunk = "yyyy"
	}
	n := copy(p, chunk)
	s.left -= n
	return n, nil
}

// A stream that never pauses is still written as it comes, not kept in
// memory until it pauses.
func TestCopyWritesUnpausedStream(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.log")
	w, err := OpenWriter(p, Rotation{}, fakeNow(), func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	s := &straddler{left: 1 << 20, release: make(chan struct{})}
	done := make(chan error)
	go func() { done <- w.Copy(s, Stdout) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := os.Stat(p)
		if st != nil && st.Size() > 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d bytes written while the stream flows", st.Size())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(s.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
