package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/dirwatch"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// Defaults of StaticOptions.
const (
	// DefaultStaticDebounce is how long the static source waits after the
	// last change in the manifest directory before it rescans it.
	DefaultStaticDebounce = 100 * time.Millisecond
	// DefaultStaticRescan is the period of the full rescan that catches what
	// inotify cannot see (a symlink's target changing outside the
	// directory); kubelet's fileCheckFrequency.
	DefaultStaticRescan = 20 * time.Second
)

// staticWatchRetry is the back-off of the retries when the directory cannot
// be watched (it and its parent missing, inotify limits): 1s, doubling up to
// Rescan (set in Run), no jitter. Every retry rescans.
var staticWatchRetry = wait.Backoff{Duration: time.Second, Factor: 2, Steps: math.MaxInt32}

// ErrDuplicateStaticPod is the error (inside a ManifestError) of a manifest
// whose namespace/name another manifest, earlier in path order, already
// defines.
var ErrDuplicateStaticPod = errors.New("duplicate static pod")

// StaticOptions configures a StaticSource.
type StaticOptions struct {
	// Dir is the manifest directory (staticPodPath). Required. It need not
	// exist: the source waits for it.
	Dir string
	// NodeName is passed to Decode. Required.
	NodeName string
	// Decode turns one file's content into a pod, setting the
	// content-derived UID and config annotations, and validates it
	// (DecodeManifest). Required.
	Decode func(data []byte, path, nodeName string) (*v1.Pod, error)
	// Debounce is the quiet time after the last change before a rescan.
	// Zero means DefaultStaticDebounce.
	Debounce time.Duration
	// Rescan is the period of the safety-net full rescan. Zero means
	// DefaultStaticRescan.
	Rescan time.Duration
	// Clock drives debounce, rescan and retries. Nil means the real clock.
	Clock clock.WithTicker
	// Logger receives the source's logs. Nil discards them.
	Logger *slog.Logger
	// OnError is called, from Run's goroutine, when a file cannot be used
	// (read, decode, validation, or ErrDuplicateStaticPod): once per
	// distinct (path, content, error). A rescan does not repeat it; fixing
	// the file and breaking it again, or removing and re-adding it, does.
	// It must not block for long. Nil means only the log line.
	OnError func(ManifestError)
}

// StaticSource is the static pod source: the pods defined by the manifest
// files in a directory.
//
// Files considered are the regular files (or symlinks to them) named
// *.yaml, *.yml or *.json that do not start with "."; everything else
// (editor swap and backup files, directories, other names) is ignored.
// The directory (not the files) is watched with inotify; changes are
// debounced and then the whole directory is rescanned, so atomic renames,
// editor save sequences, copies and truncate-then-write all end with the
// files' final content. A full rescan also runs every Rescan.
//
// Promises:
//   - Updates delivers the full set of pods, ordered by file path, after
//     the initial scan (even if empty, or the directory is missing or
//     unreadable: the consumer learns the source is ready) and after every
//     change of that set, and only then. Pods are fresh copies the consumer may keep and modify.
//   - A file that cannot be used is logged and reported through OnError,
//     and skipped; if the same path produced a pod before, that last good
//     pod is kept while the file is broken, so an operator's typo does not
//     stop a running pod. A removed file's pod disappears.
//   - Two files defining the same namespace/name: the first in path order
//     wins; the other is reported with ErrDuplicateStaticPod.
//   - A missing (or removed) directory means no static pods; the source
//     polls until it exists, then watches it again.
//
// Run owns all state; Updates may be called from any goroutine.
type StaticSource struct {
	dir      string
	nodeName string
	decode   func(data []byte, path, nodeName string) (*v1.Pod, error)
	debounce time.Duration
	rescan   time.Duration
	clock    clock.WithTicker // For testability.
	log      *slog.Logger
	onError  func(ManifestError)

	// updates is 1-buffered and latest-wins: publish replaces a snapshot
	// the consumer has not taken, so the watcher never blocks.
	updates chan []*v1.Pod
	started atomic.Bool

	// Owned by Run.
	files     map[string]fileState // last good content per path
	reported  map[string]reportKey // last error reported per path
	published bool
	lastKeys  []snapshotKey
	dirErr    string // last directory problem logged, "" when fine
}

// fileState is the last good pod produced by a path, and the content's hash.
type fileState struct {
	pod *v1.Pod
	sum [sha256.Size]byte
}

// reportKey identifies a reported problem: the same key is not reported
// twice in a row.
type reportKey struct {
	sum [sha256.Size]byte
	err string
}

// snapshotKey identifies one pod of a snapshot; equal key lists mean equal
// snapshots.
type snapshotKey struct {
	path string
	sum  [sha256.Size]byte
	uid  string
}

// NewStaticSource validates o and returns a source; Run starts it.
func NewStaticSource(o StaticOptions) (*StaticSource, error) {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("Dir (staticPodPath) is empty"))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("NodeName is empty"))
	}
	if o.Decode == nil {
		errs = append(errs, errors.New("Decode is nil"))
	}
	if o.Debounce < 0 {
		errs = append(errs, fmt.Errorf("Debounce %v is negative", o.Debounce))
	}
	if o.Rescan < 0 {
		errs = append(errs, fmt.Errorf("Rescan %v is negative", o.Rescan))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("static pod source: %w", err)
	}
	s := &StaticSource{
		dir:      filepath.Clean(o.Dir),
		nodeName: o.NodeName,
		decode:   o.Decode,
		debounce: o.Debounce,
		rescan:   o.Rescan,
		clock:    o.Clock,
		log:      o.Logger,
		onError:  o.OnError,
		updates:  make(chan []*v1.Pod, 1),
		files:    map[string]fileState{},
		reported: map[string]reportKey{},
	}
	if s.debounce == 0 {
		s.debounce = DefaultStaticDebounce
	}
	if s.rescan == 0 {
		s.rescan = DefaultStaticRescan
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.onError == nil {
		s.onError = func(ManifestError) {}
	}
	s.log = s.log.With("source", kubetypes.SourceFile, "dir", s.dir)
	return s, nil
}

// Updates returns the channel of pod sets. It holds at most one set, the
// newest; it is closed when Run returns.
func (s *StaticSource) Updates() <-chan []*v1.Pod { return s.updates }

// Run watches the directory and publishes pod sets until ctx is done. It
// may be called once; later calls return at once.
func (s *StaticSource) Run(ctx context.Context) {
	if !s.started.CompareAndSwap(false, true) {
		s.log.Error("StaticSource.Run called twice; ignoring the second call")
		return
	}
	defer close(s.updates)

	retry := staticWatchRetry
	retry.Cap = s.rescan
	dw, err := dirwatch.New(dirwatch.Options{
		Dirs:     func() []string { return []string{s.dir} },
		Relevant: func(ev fsnotify.Event) bool { return isManifestName(filepath.Base(ev.Name)) },
		Debounce: s.debounce,
		Rescan:   s.rescan,
		Retry:    retry,
		Clock:    s.clock,
		Logger:   s.log,
	})
	if err != nil { // NewStaticSource validated the options
		s.log.Error("Cannot watch the static pod directory", "err", err)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); dw.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// The first notification comes once the directory (or its parent) is
	// watched; every later one after a change, a retry or a rescan.
	for {
		select {
		case <-ctx.Done():
			return
		case <-dw.C():
			s.sync()
		}
	}
}

// sync rescans the directory and publishes the pod set if it changed. It
// reports whether the directory could be read.
func (s *StaticSource) sync() bool {
	pods, keys, err := s.scan()
	switch {
	case err == nil:
		if s.dirErr != "" {
			s.log.Info("Static pod directory is readable again")
			s.dirErr = ""
		}
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		// No directory means no static pods.
		if msg := err.Error(); s.dirErr != msg {
			s.log.Warn("Static pod directory does not exist (or is not a directory); no static pods until it does", "err", err)
			s.dirErr = msg
		}
		clear(s.files)
		clear(s.reported)
		pods, keys = nil, nil
	default:
		// Unreadable for another reason: keep the current pods.
		if msg := err.Error(); s.dirErr != msg {
			s.log.Error("Cannot read the static pod directory; keeping the current static pods", "err", err)
			s.dirErr = msg
		}
		if s.published {
			return false
		}
		pods, keys = nil, nil // the consumer still learns the source started
	}
	if !s.published || !keysEqual(keys, s.lastKeys) {
		s.publish(pods)
		s.lastKeys = keys
		s.published = true
	}
	return err == nil
}

// publish puts pods on the updates channel, replacing a set the consumer has
// not taken yet. Only Run's goroutine sends, so this never blocks.
func (s *StaticSource) publish(pods []*v1.Pod) {
	if pods == nil {
		pods = []*v1.Pod{}
	}
	s.log.Info("Static pods changed", "count", len(pods))
	for {
		select {
		case s.updates <- pods:
			return
		default:
		}
		select {
		case <-s.updates:
		default:
		}
	}
}

func keysEqual(a, b []snapshotKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// scanned is one path's outcome in a scan: the pod it contributes (nil if
// none) and its problem (nil if none).
type scanned struct {
	path string
	pod  *v1.Pod
	sum  [sha256.Size]byte
	err  error
}

// scan reads every manifest in the directory and returns the pods, ordered
// by path, with their keys. Files that cannot be used are reported (once);
// a path's last good pod is kept while its file is broken. A directory
// error is returned as is (wrapped in *fs.PathError) and changes nothing.
func (s *StaticSource) scan() ([]*v1.Pod, []snapshotKey, error) {
	entries, err := os.ReadDir(s.dir) // sorted by name
	if err != nil {
		return nil, nil, err
	}
	var results []scanned
	for _, de := range entries {
		if !isManifestName(de.Name()) || de.IsDir() {
			continue
		}
		path := filepath.Join(s.dir, de.Name())
		r, ok := s.scanFile(path)
		if ok {
			results = append(results, r)
		}
	}

	// Forget paths that are gone: a file re-added later starts afresh.
	present := make(map[string]bool, len(results))
	for _, r := range results {
		present[r.path] = true
	}
	for p := range s.files {
		if !present[p] {
			delete(s.files, p)
		}
	}
	for p := range s.reported {
		if !present[p] {
			delete(s.reported, p)
		}
	}

	// The first path defining a namespace/name wins.
	owners := map[string]string{}
	var pods []*v1.Pod
	var keys []snapshotKey
	for i := range results {
		r := &results[i]
		if r.pod == nil {
			continue
		}
		name := kubetypes.FullName(r.pod)
		if owner, dup := owners[name]; dup {
			if r.err == nil {
				r.err = fmt.Errorf("%w: %s is already defined by %s", ErrDuplicateStaticPod, name, owner)
			}
			continue
		}
		owners[name] = r.path
		pods = append(pods, r.pod.DeepCopy())
		keys = append(keys, snapshotKey{path: r.path, sum: s.files[r.path].sum, uid: string(r.pod.UID)})
	}

	for _, r := range results {
		if r.err == nil {
			delete(s.reported, r.path) // breaking it again reports again
			continue
		}
		key := reportKey{sum: r.sum, err: r.err.Error()}
		if prev, ok := s.reported[r.path]; ok && prev == key {
			continue
		}
		s.reported[r.path] = key
		if last, ok := s.files[r.path]; ok && !errors.Is(r.err, ErrDuplicateStaticPod) {
			s.log.Error("Cannot use static pod manifest; keeping the pod of its last good version",
				"path", r.path, "err", r.err, "pod", kubetypes.FullName(last.pod), "podUID", string(last.pod.UID))
		} else {
			s.log.Error("Cannot use static pod manifest; skipping it", "path", r.path, "err", r.err)
		}
		s.onError(ManifestError{Path: r.path, Err: r.err})
	}
	return pods, keys, nil
}

// scanFile reads and decodes one manifest. ok is false if the file
// vanished meanwhile or is a directory (behind a symlink): nothing to say.
// A file that cannot be used yields its problem and, if any, the last good
// pod of its path.
func (s *StaticSource) scanFile(path string) (r scanned, ok bool) {
	r.path = path
	data, err := readManifest(path)
	switch {
	case errors.Is(err, errIsDir):
		return r, false
	case errors.Is(err, fs.ErrNotExist):
		if _, lerr := os.Lstat(path); errors.Is(lerr, fs.ErrNotExist) {
			return r, false // removed since ReadDir
		}
		// A dangling symlink: worth telling the operator.
		err = fmt.Errorf("symlink to a missing file: %w", err)
	}
	if err == nil {
		r.sum = sha256.Sum256(data)
		if last, ok := s.files[path]; ok && last.sum == r.sum {
			r.pod = last.pod // unchanged: no need to decode again
			return r, true
		}
		var pod *v1.Pod
		pod, err = s.decode(data, path, s.nodeName)
		var me *ManifestError
		if errors.As(err, &me) && me.Path == path {
			err = me.Err // reported as a ManifestError for path below
		}
		if err == nil {
			err = checkDecoded(pod)
		}
		if err == nil {
			s.files[path] = fileState{pod: pod, sum: r.sum}
			r.pod = pod
			return r, true
		}
	}
	r.err = err
	if last, ok := s.files[path]; ok {
		r.pod = last.pod
	}
	return r, true
}

// checkDecoded is the least the source needs of a decoded pod.
func checkDecoded(pod *v1.Pod) error {
	switch {
	case pod == nil:
		return errors.New("decoder returned no pod")
	case pod.Name == "":
		return errors.New("pod has no metadata.name")
	case pod.UID == "":
		return errors.New("decoder set no metadata.uid")
	}
	return nil
}

var errIsDir = errors.New("is a directory")

// readManifest reads a regular file (following symlinks), refusing other
// kinds of files without blocking on them (a FIFO), and files larger than
// MaxManifestSize (so that a stray huge file cannot exhaust memory).
func readManifest(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case fi.IsDir():
		return nil, errIsDir
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("not a regular file (mode %v)", fi.Mode())
	case fi.Size() > MaxManifestSize:
		return nil, fmt.Errorf("file is %d bytes, more than the %d a manifest may have", fi.Size(), MaxManifestSize)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(f, MaxManifestSize+1)); err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if buf.Len() > MaxManifestSize {
		return nil, fmt.Errorf("file grew beyond the %d bytes a manifest may have", MaxManifestSize)
	}
	return buf.Bytes(), nil
}

// isManifestName reports whether a directory entry's name is a manifest's:
// *.yaml, *.yml or *.json, not hidden. Editors' swap and backup files
// (.x.swp, x~, #x#, vim's 4913 probe) do not have these extensions.
func isManifestName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
