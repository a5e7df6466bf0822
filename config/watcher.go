package config

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/dirwatch"
)

// DefaultDebounce is how long the Watcher waits after the last file change
// before it re-reads the configuration, so that an editor's or a
// configuration manager's burst of writes is read once, complete.
const DefaultDebounce = 500 * time.Millisecond

// DefaultWatchRetry is the longest interval between retries of a directory
// the Watcher cannot watch (missing together with its parent, or inotify
// limits reached); each retry also re-reads the configuration, so nothing
// is missed meanwhile.
const DefaultWatchRetry = 10 * time.Second

// watchRetry is the back-off of those retries: 1s, doubling up to
// DefaultWatchRetry, no jitter (one local process, no herd to spread).
var watchRetry = wait.Backoff{Duration: time.Second, Factor: 2, Cap: DefaultWatchRetry, Steps: math.MaxInt32}

// Watcher re-loads the configuration on demand (Trigger, for SIGHUP) and when
// the main file's directory or the drop-in directory changes, and delivers
// the configuration in force after each change of a live field.
//
// The running configuration only ever changes in its LiveFields: a change
// of any other field is logged by name as requiring a restart and not
// delivered, and an invalid configuration is logged with all its problems
// while the running configuration stays in force.
//
// Run owns all state; Trigger and Updates may be called from any goroutine.
type Watcher struct {
	opts  LoadOptions
	log   *slog.Logger
	clock clock.Clock // For testability.

	// Debounce is the quiet time after a file change before re-reading;
	// set it before Run. Zero means DefaultDebounce.
	Debounce time.Duration
	// LoggedWarnings are the warnings the caller logged when it loaded the
	// running configuration; set it before Run. A reload logs its
	// warnings only when they differ from the last ones logged, so that a
	// warning (kubeadm's unsupported fields) is logged once at start, not
	// again on every reload.
	LoggedWarnings []string

	trigger chan struct{}                // 1-buffered: triggers coalesce
	started chan struct{}                // closed once Run watches (for tests)
	updates chan *NodeAgentConfiguration // 1-buffered: the newest wins

	// Owned by Run.
	running        *NodeAgentConfiguration
	pendingRestart []string
}

// NewWatcher returns a Watcher for the configuration described by o.
// running is the configuration the agent started with (from Load with the
// same options); if it is nil, Run loads it first. A nil logger discards
// logs.
func NewWatcher(o LoadOptions, logger *slog.Logger, clk clock.Clock, running *NodeAgentConfiguration) *Watcher {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		opts:    o,
		log:     logger,
		clock:   clk,
		trigger: make(chan struct{}, 1),
		started: make(chan struct{}),
		updates: make(chan *NodeAgentConfiguration, 1),
		running: running.DeepCopy(),
	}
}

// Trigger asks Run to re-read the configuration now (on SIGHUP). It never
// blocks; triggers that arrive while one is pending coalesce.
func (w *Watcher) Trigger() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// Updates delivers the configuration in force after a reload changed a live
// field. The channel holds one value; an unread value is replaced by a newer
// one, so a slow reader only sees the newest configuration.
func (w *Watcher) Updates() <-chan *NodeAgentConfiguration { return w.updates }

// Run watches until ctx is done, with internal/dirwatch: it re-reads the
// configuration once the directories are watched, after every debounced
// change, on Trigger, and on every retry while a directory cannot be
// watched (DefaultWatchRetry at most apart). It returns an error only if
// it was given no running configuration and the initial Load fails.
func (w *Watcher) Run(ctx context.Context) error {
	if w.running == nil {
		cfg, warnings, err := Load(w.opts)
		w.logWarnings(warnings)
		if err != nil {
			return fmt.Errorf("config watcher: initial load: %w", err)
		}
		w.running = cfg
	}
	debounce := w.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	dw, err := dirwatch.New(dirwatch.Options{
		Dirs:     w.dirs,
		Relevant: w.relevant,
		Debounce: debounce,
		Retry:    watchRetry,
		Clock:    w.clock,
		Logger:   w.log,
	})
	if err != nil {
		return fmt.Errorf("config watcher: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); dw.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// dirwatch's first notification comes once the directories are
	// watched: the re-read then catches a change made between the agent's
	// Load and the watches.
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.trigger:
			w.log.Info("re-reading configuration", "reason", "trigger")
			dw.Trigger() // re-checks the watches, then notifies
		case <-dw.C():
			w.log.Debug("re-reading configuration")
			w.reloadAndDeliver()
			if first {
				close(w.started)
				first = false
			}
		}
	}
}

func (w *Watcher) reloadAndDeliver() {
	next, changed := w.Reload()
	if !changed {
		return
	}
	select { // replace an unread value
	case <-w.updates:
	default:
	}
	w.updates <- next
}

// Reload re-reads the configuration once and returns the configuration in
// force afterwards and whether a live field changed. It is the body of
// Run's loop; tests call it directly. It must not be called concurrently
// with Run.
func (w *Watcher) Reload() (*NodeAgentConfiguration, bool) {
	cfg, warnings, err := Load(w.opts)
	w.logWarnings(warnings)
	if err != nil {
		var problems []string
		if ce, ok := err.(*Error); ok {
			problems = ce.Lines()
		} else {
			problems = []string{err.Error()}
		}
		w.log.Error("new configuration rejected; the running configuration stays in force", "problems", problems)
		return w.running, false
	}
	if w.running == nil {
		w.running = cfg
		return cfg, false
	}
	live, restart := LiveChanges(w.running, cfg)
	if !slices.Equal(restart, w.pendingRestart) {
		if len(restart) > 0 {
			w.log.Warn("configuration change requires restart; the running values stay in force until then", "fields", restart)
		}
		w.pendingRestart = restart
	}
	if len(live) == 0 {
		return w.running, false
	}
	next := WithLiveChanges(w.running, cfg)
	attrs := []any{"fields", live}
	for _, f := range live {
		attrs = append(attrs, f, liveValue(next, f))
	}
	w.log.Info("applying configuration change without restart", attrs...)
	w.running = next
	return next.DeepCopy(), true
}

func liveValue(c *NodeAgentConfiguration, f string) any {
	switch f {
	case "nodeLeaseDurationSeconds":
		return c.NodeLeaseDurationSeconds
	case "nodeStatusUpdateFrequency":
		return c.NodeStatusUpdateFrequency.Duration.String()
	case "nodeStatusReportFrequency":
		return c.NodeStatusReportFrequency.Duration.String()
	case "logging.verbosity":
		return c.Logging.Verbosity
	}
	return nil
}

func (w *Watcher) logWarnings(warnings []string) {
	if slices.Equal(warnings, w.LoggedWarnings) {
		return
	}
	w.LoggedWarnings = warnings
	for _, s := range warnings {
		w.log.Warn("configuration warning", "warning", s)
	}
}

// dirs returns the directories to watch: the main file's directory, the
// directory of its symlink target (which changes on a ConfigMap-style swap)
// and the drop-in directory.
func (w *Watcher) dirs() []string {
	var out []string
	if w.opts.Path != "" {
		p := absPath(w.opts.Path)
		out = append(out, filepath.Dir(p))
		if t, err := filepath.EvalSymlinks(p); err == nil {
			out = append(out, filepath.Dir(t))
		}
	}
	if w.opts.DropInDir != "" {
		out = append(out, absPath(w.opts.DropInDir))
	}
	return out
}

// relevant reports whether ev may change the configuration: anything in the
// drop-in directory, and in the main file's directory the file itself, its
// symlink target and ConfigMap-style "..data" entries. Pure attribute
// changes are ignored.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	dir, base := filepath.Dir(ev.Name), filepath.Base(ev.Name)
	if w.opts.DropInDir != "" && (dir == absPath(w.opts.DropInDir) || ev.Name == absPath(w.opts.DropInDir)) {
		return true // a drop-in, or the directory itself replaced
	}
	if w.opts.Path == "" {
		return false
	}
	p := absPath(w.opts.Path)
	if base == filepath.Base(p) || strings.HasPrefix(base, "..") {
		return true
	}
	if t, err := filepath.EvalSymlinks(p); err == nil && ev.Name == t {
		return true
	}
	if _, err := os.Lstat(p); err != nil {
		return true // the file is gone or being replaced
	}
	return false
}
