package nodeapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// fakeJournal answers journalctl's unit listing with units and any other
// run with out and err, recording the arguments of each run.
type fakeJournal struct {
	mu        sync.Mutex
	units     string
	unitsErr  error
	out       string
	err       error
	calls     [][]string
	lastQuery []string
}

func (f *fakeJournal) Run(_ context.Context, args []string, w io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, args)
	if reflect.DeepEqual(args, []string{"--field", "_SYSTEMD_UNIT"}) {
		_, _ = io.WriteString(w, f.units)
		return f.unitsErr
	}
	f.lastQuery = args
	_, _ = io.WriteString(w, f.out)
	return f.err
}

func (f *fakeJournal) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.lastQuery = nil, nil
}

// logQueryEnv is a node API with the node log query on, journalctl faked,
// and a log directory of real files: syslog, app.log, sub/inner.log,
// dironly/ and a symbolic link out of the directory.
func logQueryEnv(t *testing.T) (*testEnv, *fakeJournal, string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"syslog":        "syslog line one\nsyslog line two\n",
		"app.log":       "app file log\n",
		"sub/inner.log": "inner log\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dironly"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	j := &fakeJournal{units: "containerd.service\nnodeagent.service\nsession-1.scope\n", out: "journal line\n"}
	e := newTestEnv(t, func(o *Options) {
		d := DefaultDebugOptions()
		d.SystemLogDir, d.LogQuery, d.Journal = dir, true, j
		o.Debug = &d
	})
	return e, j, dir
}

// The journalctl arguments built for each parameter set: kubelet's on
// Linux (--utc, --no-pager, short-precise; --since/--until in its layout;
// --pager-end --lines; a --unit per service; --grep; --boot N).
func TestLogQueryJournalArgs(t *testing.T) {
	e, j, _ := logQueryEnv(t)
	admin := bearer("good-admin")
	base := []string{"--utc", "--no-pager", "--output=short-precise"}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"query=nodeagent", append(base, "--unit=nodeagent")},
		{"query=nodeagent&query=containerd", append(base, "--unit=nodeagent", "--unit=containerd")},
		{"query=nodeagent.service", append(base, "--unit=nodeagent.service")},
		{"query=session-1.scope", append(base, "--unit=session-1.scope")},
		{"query=nodeagent&tailLines=5", append(base, "--pager-end", "--lines=5", "--unit=nodeagent")},
		{"query=nodeagent&tailLines=0", append(base, "--pager-end", "--lines=0", "--unit=nodeagent")},
		{"query=nodeagent&pattern=Ready%7Cstarted", append(base, "--unit=nodeagent", "--grep=Ready|started")},
		{"query=nodeagent&boot=0", append(base, "--unit=nodeagent", "--boot", "0")},
		{"query=nodeagent&boot=-2", append(base, "--unit=nodeagent", "--boot", "-2")},
		{"query=nodeagent&sinceTime=2024-03-05T07:08:09Z&untilTime=2024-12-25T23:59:00Z",
			append(base, "--since=2024-3-5 07:8:9", "--until=2024-12-25 23:59:0", "--unit=nodeagent")},
		// Another offset is the same instant, in UTC (journalctl reads the
		// times in its TZ=UTC).
		{"query=nodeagent&sinceTime=2024-03-05T09:08:09%2B02:00", append(base, "--since=2024-3-5 07:8:9", "--unit=nodeagent")},
		{"query=containerd&sinceTime=2024-01-01T00:00:00Z&untilTime=2024-01-02T00:00:00Z&tailLines=10&pattern=err&boot=-1",
			append(base, "--since=2024-1-1 00:0:0", "--until=2024-1-2 00:0:0", "--pager-end", "--lines=10", "--unit=containerd", "--grep=err", "--boot", "-1")},
		// Unknown parameters and empty values are no options.
		{"query=nodeagent&sinceTime=&other=1", append(base, "--unit=nodeagent")},
	} {
		j.reset()
		w := e.do("GET", "/logs/?"+tc.query, admin)
		if w.Code != 200 || w.Body.String() != "journal line\n" {
			t.Errorf("%s: %d %q, want 200 with journalctl's output", tc.query, w.Code, w.Body.String())
			continue
		}
		if ct := w.Header().Get("Content-Type"); ct != "text/plain;charset=UTF-8" {
			t.Errorf("%s: Content-Type %q", tc.query, ct)
		}
		if !reflect.DeepEqual(j.lastQuery, tc.want) {
			t.Errorf("%s: journalctl %q, want %q", tc.query, j.lastQuery, tc.want)
		}
		if len(j.calls) != 2 || !reflect.DeepEqual(j.calls[0], []string{"--field", "_SYSTEMD_UNIT"}) {
			t.Errorf("%s: runs %q, want the unit listing then the query", tc.query, j.calls)
		}
	}

	// journalctl failing is its own message (exit status: nothing added);
	// journalctl not running at all is kubelet's line.
	j.err = &exec.ExitError{}
	j.out = "Failed to add filter for units: No data available\n"
	if w := e.do("GET", "/logs/?query=nodeagent", admin); w.Code != 200 || w.Body.String() != j.out {
		t.Errorf("journalctl exiting 1: %d %q", w.Code, w.Body.String())
	}
	j.err, j.out = errors.New(`exec: "journalctl": executable file not found in $PATH`), ""
	if w := e.do("GET", "/logs/?query=nodeagent", admin); w.Body.String() != "\nerror: journal output not available\n" {
		t.Errorf("journalctl missing: %d %q", w.Code, w.Body.String())
	}
	if w := e.do("GET", "/logs/?query=nodeagent&boot=-1", admin); w.Body.String() != "" {
		t.Errorf("journalctl missing, previous boot: %q, want nothing (kubelet reports it for the current boot only)", w.Body.String())
	}
	j.err, j.out = nil, "journal line\n"

	// gzip when asked for exactly that, as kubelet.
	r := func(r *http.Request) { admin(r); r.Header.Set("Accept-Encoding", "gzip") }
	w := e.do("GET", "/logs/?query=nodeagent", r)
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("Accept-Encoding gzip: Content-Encoding %q", w.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); string(b) != "journal line\n" {
		t.Errorf("gzip answer %q", b)
	}
}

// Parameter errors are 400, the query's checks 406, with kubelet's
// messages; none of them runs journalctl.
func TestLogQueryValidation(t *testing.T) {
	e, j, _ := logQueryEnv(t)
	admin := bearer("good-admin")
	for _, tc := range []struct {
		path string
		code int
		want []string
	}{
		{"/logs/?query", 400, []string{`query: Invalid value: `, "may not be empty"}},
		{"/logs/?query=%20%20&query=", 400, []string{"query: Invalid value", "may not be empty"}},
		{"/logs/?query=nodeagent&sinceTime=2019-12-04%2002:00:00", 400, []string{`sinceTime: Invalid value: "2019-12-04 02:00:00": invalid time format`}},
		{"/logs/?query=nodeagent&untilTime=yesterday", 400, []string{`untilTime: Invalid value: "yesterday": invalid time format`}},
		{"/logs/?query=nodeagent&tailLines=ten", 400, []string{`tailLines: Invalid value: "ten": strconv.Atoi: parsing "ten": invalid syntax`}},
		{"/logs/?query=nodeagent&boot=last", 400, []string{`boot: Invalid value: "last": strconv.Atoi: parsing "last": invalid syntax`}},
		{"/logs/?sinceTime=x&untilTime=y", 400, []string{"sinceTime: Invalid value", "untilTime: Invalid value"}},

		{"/logs/syslog?query=nodeagent", 406, []string{"path not allowed in query mode"}},
		{"/logs/sub/?tailLines=3", 406, []string{"path not allowed in query mode"}},
		{"/logs/?tailLines=3", 406, []string{"query: Required value: cannot be empty with options"}},
		{"/logs/?query=node%20agent", 406, []string{`query: Invalid value: "node agent": input contains unsupported characters`}},
		{"/logs/?query=a%3Bb", 406, []string{"input contains unsupported characters"}},
		{"/logs/?query=" + strings.Repeat("x", 257), 406, []string{"length must be less than 100"}},
		{"/logs/?query=a&query=b&query=c&query=d&query=e", 406, []string{"query: Too many: 5: must have at most 4 items"}},
		{"/logs/?query=nodeagent&query=/syslog", 406, []string{"cannot specify a file and service"}},
		{"/logs/?query=/syslog&query=/app.log", 406, []string{"cannot specify more than one file"}},
		{"/logs/?query=/syslog&tailLines=2", 406, []string{"cannot specify file with options"}},
		{"/logs/?query=/missing.log", 406, []string{"query: Invalid value", "no such file or directory"}},
		{"/logs/?query=../etc/passwd", 406, []string{"path escapes from parent"}},
		{"/logs/?query=/escape", 406, []string{"path escapes from parent"}},
		{"/logs/?query=nodeagent&sinceTime=2024-02-01T00:00:00Z&untilTime=2024-01-01T00:00:00Z", 406, []string{"untilTime: Invalid value", "must be after `sinceTime`"}},
		{"/logs/?query=nodeagent&boot=1", 406, []string{"boot: Invalid value: 1: must be less than 1"}},
		{"/logs/?query=nodeagent&tailLines=-1", 406, []string{"tailLines: Invalid value: -1: must be between 0 and 100000, inclusive"}},
		{"/logs/?query=nodeagent&tailLines=100001", 406, []string{"must be between 0 and 100000, inclusive"}},
		{"/logs/?query=nodeagent&pattern=foo%5C", 406, []string{`pattern: Invalid value: "foo\\": error parsing regexp: trailing backslash at end of expression`}},
		{"/logs/?query=nodeagent&boot=3&tailLines=-4", 406, []string{"must be less than 1", "must be between 0 and 100000"}},
	} {
		j.reset()
		w := e.do("GET", tc.path, admin)
		body := w.Body.String()
		ok := w.Code == tc.code
		for _, s := range tc.want {
			ok = ok && strings.Contains(body, s)
		}
		if !ok {
			t.Errorf("%.80s: %d %q, want %d with %q", tc.path, w.Code, body, tc.code, tc.want)
		}
		if len(j.calls) != 0 {
			t.Errorf("%.80s: ran journalctl %q", tc.path, j.calls)
		}
	}
	// The bounds themselves are valid.
	for _, p := range []string{"/logs/?query=nodeagent&tailLines=100000", "/logs/?query=nodeagent&boot=0",
		"/logs/?query=a&query=b&query=c&query=nodeagent", "/logs/?query=svc_1.x:y@z"} {
		if w := e.do("GET", p, admin); w.Code != 200 {
			t.Errorf("%s: %d %q", p, w.Code, w.Body.String())
		}
	}
}

// A file query, and a service that journald has no entries of, answer
// from the real files of the log directory (kubelet's /var/log): the
// file named, or the service's <s>, <s>.log or <s>/<s>.log; /logs/<path>
// stays the file server; the query needs nodes/log as /logs/ does.
func TestLogQueryFiles(t *testing.T) {
	e, j, dir := logQueryEnv(t)
	admin, logReader, nobody := bearer("good-admin"), bearer("good-log-reader"), bearer("good-nobody")
	for _, tc := range []struct {
		path string
		who  func(*http.Request)
		code int
		want string
	}{
		{"/logs/?query=/syslog", logReader, 200, "syslog line one\nsyslog line two\n"},
		{"/logs/?query=sub/inner.log", admin, 200, "inner log\n"},
		{"/logs/?query=/sub/inner.log", admin, 200, "inner log\n"},
		{"/logs/syslog", admin, 200, "syslog line one\nsyslog line two\n"},
		{"/logs/sub/inner.log", admin, 200, "inner log\n"},
		{"/logs/?other=1", admin, 200, `<a href="syslog">syslog</a>`},
		{"/logs/?query=/syslog", nobody, 403, "subresource(s)=[log]"},
		// services not in the journal: their files
		{"/logs/?query=syslog", admin, 200, "syslog line one\nsyslog line two\n"},
		{"/logs/?query=app", admin, 200, "app file log\n"},
		{"/logs/?query=app.log", admin, 200, "app file log\n"},
		{"/logs/?query=inner", admin, 200, "\nlog not found for inner\n"},
		{"/logs/?query=dironly", admin, 200, "\nlog not found for dironly\n"},
		{"/logs/?query=app&tailLines=1", admin, 200, "\noptions present and query resolved to log files for [app]\ntry without specifying options\n"},
		// a service in the journal and one in a file: both, journal first
		{"/logs/?query=app&query=nodeagent", admin, 200, "journal line\napp file log\n"},
	} {
		w := e.do("GET", tc.path, tc.who)
		if w.Code != tc.code || (tc.code == 200 && !strings.HasPrefix(tc.want, "<") && w.Body.String() != tc.want) || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %q, want %d with %q", tc.path, w.Code, w.Body.String(), tc.code, tc.want)
		}
	}
	if !reflect.DeepEqual(j.lastQuery, []string{"--utc", "--no-pager", "--output=short-precise", "--unit=nodeagent"}) {
		t.Errorf("journalctl for app and nodeagent: %q, want nodeagent's unit only", j.lastQuery)
	}

	// journalctl cannot list units (no journal): every service is looked
	// for in files.
	j.units, j.unitsErr = "", &exec.ExitError{}
	if w := e.do("GET", "/logs/?query=nodeagent", admin); w.Body.String() != "\nlog not found for nodeagent\n" {
		t.Errorf("no journal: %q", w.Body.String())
	}
	if err := os.WriteFile(filepath.Join(dir, "nodeagent.log"), []byte("agent file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if w := e.do("GET", "/logs/?query=nodeagent", admin); w.Body.String() != "agent file\n" {
		t.Errorf("no journal, nodeagent.log: %q", w.Body.String())
	}
}

// The host's journalctl through the real Journal: with no journal on
// this machine it lists no unit, and the service's file is the answer;
// on a machine with a journal, the unit's entries or the file.
func TestLogQueryHostJournalctl(t *testing.T) {
	if _, err := exec.LookPath("journalctl"); err != nil {
		t.Fatal("journalctl is not installed (apt-get install systemd)")
	}
	dir := t.TempDir()
	const svc = "nodeagent-logquery-test-no-such-unit"
	if err := os.WriteFile(filepath.Join(dir, svc+".log"), []byte("from the file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t, func(o *Options) {
		d := DefaultDebugOptions()
		d.SystemLogDir, d.LogQuery = dir, true
		o.Debug = &d
	})
	w := e.do("GET", "/logs/?query="+svc, bearer("good-admin"))
	if w.Code != 200 || w.Body.String() != "from the file\n" {
		t.Errorf("%d %q, want the service's file", w.Code, w.Body.String())
	}
}
