package nodeapi

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// healthCheck is one of /healthz's named checks (kubelet's ping, log and
// syncloop), each also served alone at /healthz/<name>.
type healthCheck struct {
	name  string
	check func() error
}

// pingCheck is apiserver's PingHealthz: always ok.
var pingCheck = healthCheck{"ping", func() error { return nil }}

// healthChecks are kubelet's: ping (always ok), log (the log output is
// not blocked) and syncloop (Options.Healthy: kubelet's
// SyncLoopHealthCheck, the pod sync loop passes).
func (s *Server) healthChecks() []healthCheck {
	syncloop := func() error { return nil }
	if s.opts.Healthy != nil {
		syncloop = s.opts.Healthy
	}
	flush := s.opts.FlushLogs
	if flush == nil {
		flush = func() {}
	}
	lc := &logCheck{clock: s.opts.Clock, flush: flush}
	return []healthCheck{
		pingCheck,
		{"log", lc.check},
		{"syncloop", syncloop},
	}
}

// InstallPingHealthz serves /healthz and /healthz/ping on mux with the
// ping check alone, in the apiserver healthz format: what kubelet serves
// on its healthz port (healthzPort; healthz.InstallHandler with no
// checks, which installs ping), ok while the process serves.
func InstallPingHealthz(mux *http.ServeMux, log *slog.Logger) {
	installHealthz(mux, log, []healthCheck{pingCheck})
}

// installHealthz serves /healthz and /healthz/<check> for every method, as
// kubelet's healthz.InstallHandler does.
func installHealthz(mux *http.ServeMux, log *slog.Logger, checks []healthCheck) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { healthzRoot(w, r, log, checks) })
	for _, c := range checks {
		mux.HandleFunc("/healthz/"+c.name, func(w http.ResponseWriter, _ *http.Request) {
			if err := c.check(); err != nil {
				http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
				return
			}
			fmt.Fprint(w, "ok")
		})
	}
}

// healthzRoot runs every check not excluded (?exclude=name); a failure is
// 500 with each check's line and the reason withheld, ?verbose lists the
// checks on success. The apiserver healthz package's format, which
// kubelet serves.
func healthzRoot(w http.ResponseWriter, r *http.Request, log *slog.Logger, checks []healthCheck) {
	excluded := map[string]bool{}
	for _, x := range r.URL.Query()["exclude"] {
		excluded[x] = true
	}
	var out, failedLog bytes.Buffer
	var failed []string
	for _, c := range checks {
		if excluded[c.name] {
			delete(excluded, c.name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.name)
			continue
		}
		if err := c.check(); err != nil {
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.name)
			fmt.Fprintf(&failedLog, "[-]%s failed: %v\n", c.name, err)
			failed = append(failed, c.name)
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.name)
	}
	if len(excluded) > 0 {
		var names []string // sorted, as apiserver's
		for _, x := range slices.Sorted(maps.Keys(excluded)) {
			names = append(names, fmt.Sprintf("%q", x))
		}
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	if len(failed) > 0 {
		log.Info("healthz check failed", "checks", strings.Join(failed, ","), "detail", failedLog.String())
		http.Error(w, out.String()+"healthz check failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := r.URL.Query()["verbose"]; !verbose {
		fmt.Fprint(w, "ok")
		return
	}
	_, _ = out.WriteTo(w)
	fmt.Fprint(w, "healthz check passed\n")
}

// logCheck is kubelet's log health check (apiserver's LogHealthz, which
// flushes klog every minute and fails once no flush has completed for two
// minutes): logging is blocked when a flush of the log output has not
// returned for two minutes. A check starts a flush when none is in
// progress, so no goroutine runs between checks and a rarely checked
// agent is not reported blocked for having had nothing to flush.
type logCheck struct {
	clock clock.PassiveClock
	flush func()

	mu       sync.Mutex
	flushing bool
	started  time.Time // the flush in progress's start
}

var errLoggingBlocked = errors.New("logging blocked")

func (l *logCheck) check() error {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flushing {
		if now.Sub(l.started) >= 2*time.Minute {
			return errLoggingBlocked
		}
		return nil
	}
	l.flushing, l.started = true, now
	go func() {
		l.flush()
		l.mu.Lock()
		l.flushing = false
		l.mu.Unlock()
	}()
	return nil
}
