package crilog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ReadOptions are kubelet's container log options.
type ReadOptions struct {
	// Follow keeps reading the live file until the container stops (the
	// running function passed to ReadLogs says so) or ctx ends.
	Follow bool
	// TailLines, when >= 0, starts at the TailLines-th record from the end.
	TailLines int64
	// LimitBytes, when > 0, stops after that many bytes of output.
	LimitBytes int64
	// Since, when set, skips records older than it.
	Since time.Time
	// Timestamps prefixes every record with its RFC3339Nano timestamp.
	Timestamps bool
	// Stderr, when set, receives the stderr records (out then receives
	// only stdout's); LimitBytes counts both.
	Stderr io.Writer
	// Positioned, when set, is called once the start position is fixed:
	// every record written after that is read (attach starts the
	// container's input only then, so no answer is missed).
	Positioned func()
}

// errLimit ends a read that reached LimitBytes.
var errLimit = errors.New("limit reached")

// followIdle is how often a follow with no new data asks whether the
// container still runs.
const followIdle = time.Second

// followPoll is how often a follow without inotify looks for new data.
const followPoll = 250 * time.Millisecond

// watchDir is an inotify watch of dir for follows; a variable so that
// tests can take inotify away.
var watchDir = func(dir string) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Record is one parsed line of a CRI log file.
type Record struct {
	Time    time.Time
	Stream  string
	Partial bool
	Content []byte // without the newline
}

// ParseRecord parses one line of a CRI log file (without its newline).
func ParseRecord(line []byte) (Record, error) {
	var r Record
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return r, fmt.Errorf("crilog: no timestamp in %q", truncate(line))
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("crilog: timestamp: %w", err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || string(stream) != Stdout && string(stream) != Stderr {
		return r, fmt.Errorf("crilog: no stream in %q", truncate(line))
	}
	tag, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// "ts stream F" with empty content and no trailing space.
		tag, content = rest, nil
	}
	r.Time, r.Stream, r.Content = t, string(stream), content
	// Tags are ':'-separated; the first is P or F.
	first, _, _ := bytes.Cut(tag, []byte{':'})
	switch string(first) {
	case TagPartial:
		r.Partial = true
	case TagFull:
	default:
		return r, fmt.Errorf("crilog: unknown tag %q", tag)
	}
	return r, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// ReadLogs writes to out the log of one container attempt whose live file
// is path: its rotated files, oldest first, then the live one. running
// tells a follow whether more can come; nil means the container has ended.
// A missing live file with no rotated files is an error matching
// os.ErrNotExist.
func ReadLogs(ctx context.Context, path string, opts ReadOptions, out io.Writer, running func() bool) error {
	if running == nil {
		running = func() bool { return false }
	}
	rotated, err := RotatedFiles(path)
	if err != nil {
		return err
	}
	files := append(rotated, path)
	if _, err := os.Stat(path); err != nil {
		if len(rotated) == 0 {
			return fmt.Errorf("crilog: %w", err)
		}
		files = rotated
	}
	first, offset := 0, int64(0)
	if opts.TailLines >= 0 {
		first, offset, err = tailStart(files, opts.TailLines)
		if err != nil {
			return err
		}
	}
	if opts.Positioned != nil {
		opts.Positioned()
	}
	s := &sink{out: out, opts: opts}
	for i := first; i < len(files); i++ {
		f, err := os.Open(files[i])
		if errors.Is(err, os.ErrNotExist) {
			continue // removed by a rotation since we listed it
		}
		if err != nil {
			return fmt.Errorf("crilog: %w", err)
		}
		if i == first && offset > 0 {
			if _, err := f.Seek(offset, io.SeekStart); err != nil {
				f.Close()
				return fmt.Errorf("crilog: %w", err)
			}
		}
		br := bufio.NewReaderSize(f, 64<<10)
		s.partial = s.partial[:0] // a torn last line does not continue in the next file
		err = s.drain(br)
		if err == nil && opts.Follow && files[i] == path {
			return s.follow(ctx, path, f, br, running)
		}
		f.Close()
		if errors.Is(err, errLimit) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sink filters and writes records.
type sink struct {
	out     io.Writer
	opts    ReadOptions
	written int64
	partial []byte // an incomplete last line read so far (follow only)
}

// drain writes every complete line of br; an incomplete last line is kept
// for the next drain.
func (s *sink) drain(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err == nil {
			if len(s.partial) > 0 {
				s.partial = append(s.partial, line...)
				line = s.partial
			}
			err := s.line(line[:len(line)-1])
			s.partial = s.partial[:0]
			if err != nil {
				return err
			}
			continue
		}
		s.partial = append(s.partial, line...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("crilog: read: %w", err)
		}
	}
}

func (s *sink) line(l []byte) error {
	r, err := ParseRecord(l)
	if err != nil {
		// Not a CRI record: the raw output of a container started by an
		// agent older than the CRI format. It is shown as it is (it has
		// no time, so a since filter leaves it out).
		if !s.opts.Since.IsZero() {
			return nil
		}
		r = Record{Stream: Stdout, Content: l}
	} else if !s.opts.Since.IsZero() && r.Time.Before(s.opts.Since) {
		return nil
	}
	var buf []byte
	if s.opts.Timestamps && !r.Time.IsZero() {
		buf = r.Time.AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, ' ')
	}
	buf = append(buf, r.Content...)
	if !r.Partial {
		buf = append(buf, '\n')
	}
	limited := false
	if s.opts.LimitBytes > 0 && s.written+int64(len(buf)) >= s.opts.LimitBytes {
		buf = buf[:s.opts.LimitBytes-s.written]
		limited = true
	}
	w := s.out
	if s.opts.Stderr != nil && r.Stream == Stderr {
		w = s.opts.Stderr
	}
	n, err := w.Write(buf)
	s.written += int64(n)
	if err != nil {
		return fmt.Errorf("crilog: write: %w", err)
	}
	if limited {
		return errLimit
	}
	return nil
}

// follow keeps reading the live file f until the container stops or ctx
// ends; when the writer rotates, it finishes f and moves to the new file.
func (s *sink) follow(ctx context.Context, path string, f *os.File, br *bufio.Reader, running func() bool) error {
	defer func() { f.Close() }()
	// New data is noticed through inotify; where no inotify instance or
	// watch can be had (fs.inotify.max_user_instances is 128 by default,
	// and every follow takes one), the follow polls instead of ending.
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := watchDir(filepath.Dir(path)); err == nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	} else {
		poll := time.NewTicker(followPoll)
		defer poll.Stop()
		ev := make(chan fsnotify.Event)
		go func() {
			for {
				select {
				case <-poll.C:
					select {
					case ev <- fsnotify.Event{}:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		events = ev
	}
	idle := time.NewTimer(followIdle)
	defer idle.Stop()
	for {
		if err := s.drain(br); err != nil {
			if errors.Is(err, errLimit) {
				return nil
			}
			return err
		}
		if rotated(path, f) {
			// The writer has closed f before renaming it: what is
			// left in it is complete.
			if err := s.drain(br); err != nil {
				if errors.Is(err, errLimit) {
					return nil
				}
				return err
			}
			nf, err := os.Open(path)
			if err == nil {
				f.Close()
				f = nf
				br.Reset(f)
				s.partial = s.partial[:0]
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				return nil
			}
		case err := <-errs:
			return fmt.Errorf("crilog: follow: %w", err)
		case <-idle.C:
			if !running() {
				// One last read: the container may have written
				// just before it stopped.
				if err := s.drain(br); err != nil && !errors.Is(err, errLimit) {
					return err
				}
				return nil
			}
			idle.Reset(followIdle)
		}
	}
}

// rotated tells whether path now names another file than f.
func rotated(path string, f *os.File) bool {
	a, err := os.Stat(path)
	if err != nil {
		return false
	}
	b, err := f.Stat()
	if err != nil {
		return false
	}
	as, aok := a.Sys().(*syscall.Stat_t)
	bs, bok := b.Sys().(*syscall.Stat_t)
	return aok && bok && (as.Ino != bs.Ino || as.Dev != bs.Dev)
}

// tailStart finds where the last n lines of the files begin: the index of
// the file and the offset in it. Only whole lines count: the live file is
// read while its writer appends, and a read can see an append in part (a
// write that spans pages grows the file a page at a time). A torn last
// record is no line yet, as under kubelet (FindTailLineStartIndex); a
// follow reads it once it is whole.
func tailStart(files []string, n int64) (int, int64, error) {
	if n == 0 {
		// Nothing before the end: start after the last whole line of the
		// last file.
		off, _, err := lineStartFromEnd(files[len(files)-1], 0)
		if err != nil {
			return 0, 0, err
		}
		return len(files) - 1, off, nil
	}
	for i := len(files) - 1; i >= 0; i-- {
		off, found, err := lineStartFromEnd(files[i], n)
		if err != nil {
			return 0, 0, err
		}
		if found == n {
			return i, off, nil
		}
		n -= found
	}
	return 0, 0, nil
}

// lineStartFromEnd returns the offset of the n-th whole line from the end
// of the file (for n = 0: the end of the last whole line), or 0 and the
// number of whole lines when it has fewer. A last line without its newline
// is not counted.
func lineStartFromEnd(name string, n int64) (int64, int64, error) {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("crilog: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("crilog: %w", err)
	}
	buf := make([]byte, 32<<10)
	var count int64
	// The last newline ends the last whole line; it starts none (what
	// follows it, if anything, is a torn record).
	ended := false
	for pos := st.Size(); pos > 0; {
		start := max(pos-int64(len(buf)), 0)
		chunk := buf[:pos-start]
		if _, err := f.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("crilog: %w", err)
		}
		for j := len(chunk) - 1; j >= 0; j-- {
			if chunk[j] != '\n' {
				continue
			}
			if !ended {
				ended = true
				if n == 0 {
					return start + int64(j) + 1, 0, nil
				}
				continue
			}
			count++
			if count == n {
				return start + int64(j) + 1, n, nil
			}
		}
		pos = start
	}
	if !ended {
		return 0, 0, nil // empty, or only a torn record
	}
	return 0, count + 1, nil
}
