package nodeapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kubelet's node log query (KEP 2258; the NodeLogQuery feature gate with
// enableSystemLogQuery): GET /logs/?query=<service or file>&sinceTime=
// &untilTime=&tailLines=&pattern=&boot=. A service's log comes from
// journalctl, a file's from the system log directory.

// Kubelet's limits and journalctl's date layout (no zero padding).
const (
	logQueryMaxTailLines     = 100000
	logQueryMaxServiceLength = 256
	logQueryMaxServices      = 4
	journalDateLayout        = "2006-1-2 15:4:5"
	// logQueryTimeout bounds one query: the journalctl runs and the file
	// copies together.
	logQueryTimeout = 30 * time.Second
)

// serviceNameUnsafe matches what kubelet refuses in a service name: any
// character outside letters, digits and - _ . : @.
var serviceNameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9\-_.:@]`)

// Journal runs journalctl for the node log query.
type Journal interface {
	// Run runs journalctl with args, writing its standard output and
	// error to w. An *exec.ExitError means journalctl ran and failed (its
	// message is in w); any other error means it could not run.
	Run(ctx context.Context, args []string, w io.Writer) error
}

// execJournal is the host's journalctl.
type execJournal struct{}

func (execJournal) Run(ctx context.Context, args []string, w io.Writer) error {
	cmd := exec.CommandContext(ctx, "journalctl", args...)
	cmd.Stdout, cmd.Stderr = w, w
	// --since and --until are read in the local time zone: the query's
	// times are given to it in UTC (kubelet formats them in the caller's
	// offset, which journalctl then reads as the node's local time).
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.WaitDelay = time.Second
	return cmd.Run()
}

// logQueryOptions are the query's options for services' logs.
type logQueryOptions struct {
	since, until *time.Time
	tailLines    *int
	boot         *int
	pattern      string
}

func (o logQueryOptions) set() bool {
	return o.since != nil || o.until != nil || o.tailLines != nil || o.boot != nil || o.pattern != ""
}

// logQuery is a parsed node log query: services (queries without a slash)
// or files (with / or \, relative to the log directory).
type logQuery struct {
	services, files []string
	logQueryOptions
}

// parseLogQuery reads kubelet's query parameters. A nil query without
// errors means none of them was given: the request is for a path under
// /logs/. The errors are kubelet's, answered with 400.
func parseLogQuery(v url.Values) (*logQuery, field.ErrorList) {
	var (
		q    logQuery
		errs field.ErrorList
	)
	queries, given := v["query"]
	for _, s := range queries {
		switch {
		case strings.ContainsAny(s, `/\`):
			q.files = append(q.files, s)
		case strings.TrimSpace(s) != "":
			q.services = append(q.services, s)
		}
	}
	if given && len(q.files) == 0 && len(q.services) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("query"), queries, "may not be empty"))
	}
	for _, t := range []struct {
		name string
		dst  **time.Time
	}{{"sinceTime", &q.since}, {"untilTime", &q.until}} {
		s := v.Get(t.name)
		if s == "" {
			continue
		}
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(t.name), s, "invalid time format"))
			continue
		}
		*t.dst = &tm
	}
	for _, n := range []struct {
		name string
		dst  **int
	}{{"boot", &q.boot}, {"tailLines", &q.tailLines}} {
		s := v.Get(n.name)
		if s == "" {
			continue
		}
		i, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(n.name), s, err.Error()))
			continue
		}
		*n.dst = &i
	}
	q.pattern = v.Get("pattern")
	if len(errs) > 0 {
		return nil, errs
	}
	if len(q.services) == 0 && len(q.files) == 0 && !q.set() {
		return nil, nil
	}
	return &q, nil
}

// validate checks the query as kubelet does before running it (its
// errors are answered with 406). dir is the log directory a file query
// must name an existing entry of.
func (q *logQuery) validate(dir string) field.ErrorList {
	var errs field.ErrorList
	qp := field.NewPath("query")
	for _, s := range q.services {
		switch {
		case len(s) > logQueryMaxServiceLength:
			// kubelet's message, whatever its limit
			errs = append(errs, field.Invalid(qp, s, "length must be less than 100"))
		case serviceNameUnsafe.MatchString(s):
			errs = append(errs, field.Invalid(qp, s, "input contains unsupported characters"))
		}
	}
	if len(q.services) > logQueryMaxServices {
		errs = append(errs, field.TooMany(qp, len(q.services), logQueryMaxServices))
	}
	switch {
	case len(q.files) == 0 && len(q.services) == 0:
		errs = append(errs, field.Required(qp, "cannot be empty with options"))
	case len(q.files) > 0 && len(q.services) > 0:
		errs = append(errs, field.Invalid(qp, fmt.Sprintf("%v, %v", q.files, q.services), "cannot specify a file and service"))
	case len(q.files) > 1:
		errs = append(errs, field.Invalid(qp, q.files, "cannot specify more than one file"))
	case len(q.files) == 1 && q.set():
		errs = append(errs, field.Invalid(qp, q.files, "cannot specify file with options"))
	case len(q.files) == 1:
		if err := statInDir(dir, q.files[0]); err != nil {
			errs = append(errs, field.Invalid(qp, q.files, err.Error()))
		}
	}
	if q.since != nil && q.until != nil && q.since.After(*q.until) {
		errs = append(errs, field.Invalid(field.NewPath("untilTime"), q.until, "must be after `sinceTime`"))
	}
	if q.boot != nil && *q.boot > 0 {
		errs = append(errs, field.Invalid(field.NewPath("boot"), *q.boot, "must be less than 1"))
	}
	if q.tailLines != nil {
		if e := utilvalidation.IsInRange(*q.tailLines, 0, logQueryMaxTailLines); len(e) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("tailLines"), *q.tailLines, e[0]))
		}
	}
	if _, err := syntax.Parse(q.pattern, syntax.Perl); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("pattern"), q.pattern, err.Error()))
	}
	return errs
}

// statInDir checks that name exists in dir without leaving it (.. or a
// symbolic link out of dir are errors). A leading slash is the log
// directory itself, as in kubelet's documented `query=/<file>`.
func statInDir(dir, name string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	_, err = root.Stat(strings.TrimLeft(filepath.ToSlash(name), "/"))
	return err
}

// journalArgs are the arguments of the journalctl run for the services:
// kubelet's on Linux.
func (q *logQuery) journalArgs(services []string) []string {
	args := []string{"--utc", "--no-pager", "--output=short-precise"}
	if q.since != nil {
		args = append(args, "--since="+q.since.UTC().Format(journalDateLayout))
	}
	if q.until != nil {
		args = append(args, "--until="+q.until.UTC().Format(journalDateLayout))
	}
	if q.tailLines != nil {
		args = append(args, "--pager-end", "--lines="+strconv.Itoa(*q.tailLines))
	}
	for _, s := range services {
		if s != "" {
			args = append(args, "--unit="+s)
		}
	}
	if q.pattern != "" {
		args = append(args, "--grep="+q.pattern)
	}
	if q.boot != nil {
		args = append(args, "--boot", strconv.Itoa(*q.boot))
	}
	return args
}

// logQueryHandler serves /logs/ (its prefix stripped) with the node log
// query on: a request with any of the query's parameters is a query (and
// may not name a path); any other request is files' answers.
type logQueryHandler struct {
	dir     string
	files   http.Handler
	journal Journal
}

func (h logQueryHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, errs := parseLogQuery(r.URL.Query())
	if len(errs) > 0 {
		http.Error(w, errs.ToAggregate().Error(), http.StatusBadRequest)
		return
	}
	if q == nil {
		h.files.ServeHTTP(w, r)
		return
	}
	if r.URL.Path != "" && r.URL.Path != "/" {
		http.Error(w, "path not allowed in query mode", http.StatusNotAcceptable)
		return
	}
	if errs := q.validate(h.dir); len(errs) > 0 {
		http.Error(w, errs.ToAggregate().Error(), http.StatusNotAcceptable)
		return
	}
	if len(q.services) == 0 {
		// One file, validated above: served as /logs/<file> is.
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = filepath.ToSlash(q.files[0]), ""
		r2.URL = &u
		h.files.ServeHTTP(w, r2)
		return
	}
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	var out io.Writer = w
	if r.Header.Get("Accept-Encoding") == "gzip" {
		w.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
		defer func() { _ = gz.Close() }()
		out = gz
	}
	ctx, cancel := context.WithTimeout(r.Context(), logQueryTimeout)
	defer cancel()
	h.copyServices(ctx, out, q)
}

// copyServices writes the services' logs: journalctl's for those journald
// has entries of, the log files found for the others (not with options:
// those are for the journal).
func (h logQueryHandler) copyServices(ctx context.Context, w io.Writer, q *logQuery) {
	units := h.journalUnits(ctx)
	var inJournal, inFiles []string
	for _, s := range q.services {
		if units[s] || units[s+".service"] {
			inJournal = append(inJournal, s)
		} else {
			inFiles = append(inFiles, s)
		}
	}
	if len(inJournal) > 0 {
		err := h.journal.Run(ctx, q.journalArgs(inJournal), w)
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) && (q.boot == nil || *q.boot == 0) {
			fmt.Fprintf(w, "\nerror: journal output not available\n")
		}
	}
	if len(inFiles) == 0 {
		return
	}
	if q.set() {
		fmt.Fprintf(w, "\noptions present and query resolved to log files for %v\ntry without specifying options\n", inFiles)
		return
	}
	for _, s := range inFiles {
		if ctx.Err() != nil {
			fmt.Fprintf(w, "\ncontext error: %v\n", ctx.Err())
			return
		}
		copyServiceFile(ctx, w, h.dir, s)
	}
}

// journalUnits are the systemd units journald has entries of (journalctl
// --field _SYSTEMD_UNIT); none when journalctl cannot tell.
func (h logQueryHandler) journalUnits(ctx context.Context) map[string]bool {
	var buf bytes.Buffer
	if err := h.journal.Run(ctx, []string{"--field", "_SYSTEMD_UNIT"}, &buf); err != nil {
		return nil
	}
	units := map[string]bool{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		if u := strings.TrimSpace(sc.Text()); u != "" {
			units[u] = true
		}
	}
	return units
}

// copyServiceFile writes the log file of a service that does not log to
// the journal: the first of dir/<s>, dir/<s>.log, dir/<s>/<s>.log that is a
// file, as kubelet looks for it.
func copyServiceFile(ctx context.Context, w io.Writer, dir, s string) {
	var err error
	for _, name := range []string{s, s + ".log", s + "/" + s + ".log"} {
		if err = copyFileInDir(ctx, w, dir, name); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(w, "\nlog not found for %s\n", s)
	case err != nil:
		fmt.Fprintf(w, "\nerror getting log for %s: %v\n", s, err)
	}
}

// copyFileInDir copies dir/name to w, not leaving dir; a directory is
// fs.ErrNotExist.
func copyFileInDir(ctx context.Context, w io.Writer, dir, name string) error {
	f, err := os.OpenInRoot(dir, name)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fs.ErrNotExist
	}
	_, err = io.Copy(w, ctxReader{ctx, f})
	return err
}

// ctxReader stops reading when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
