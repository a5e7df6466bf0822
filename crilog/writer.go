package crilog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxLineSize is the largest content of one record; longer lines are split
// into partial records (containerd's CRI default max_container_log_line_size).
const MaxLineSize = 16 * 1024

// Stream names and tags of the CRI format.
const (
	Stdout = "stdout"
	Stderr = "stderr"

	TagFull    = "F"
	TagPartial = "P"
)

// rotatedTimeFormat is kubelet's suffix of a rotated log file.
const rotatedTimeFormat = "20060102-150405"

// Rotation limits one container's log files.
type Rotation struct {
	// MaxSize is the largest size in bytes of one file (kubelet's
	// containerLogMaxSize). A single record larger than MaxSize is written
	// alone into a file of its own. Zero or negative: never rotate.
	MaxSize int64
	// MaxFiles is the most files kept, the live one included (kubelet's
	// containerLogMaxFiles); at least 2 when MaxSize is set.
	MaxFiles int
}

// Defaults as kubelet's.
const (
	DefaultMaxSize  = 10 << 20
	DefaultMaxFiles = 5
)

// Writer appends CRI records to one container's log file and rotates it.
// Its methods may be called from several goroutines (one per stream).
type Writer struct {
	path string
	rot  Rotation
	now  func() time.Time
	// report receives errors the writer recovers from by dropping records.
	report func(error)

	mu   sync.Mutex
	f    *os.File
	size int64
	buf  []byte
}

// OpenWriter opens (creating it and its directory if needed) the log file at
// path for appending. now stamps the records; nil means time.Now. report
// receives errors that made the writer drop records; nil discards them.
func OpenWriter(path string, rot Rotation, now func() time.Time, report func(error)) (*Writer, error) {
	if now == nil {
		now = time.Now
	}
	if report == nil {
		report = func(error) {}
	}
	w := &Writer{path: path, rot: rot, now: now, report: report}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("crilog: log directory: %w", err)
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("crilog: open %s: %w", w.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("crilog: stat %s: %w", w.path, err)
	}
	w.f, w.size = f, st.Size()
	return nil
}

// Close closes the live file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Copy reads r until EOF or a read error and writes every line as records of
// the given stream. A line longer than MaxLineSize becomes partial records;
// a last line without a newline is written as a partial record at EOF. Copy
// never stops reading because of a write error: such records are dropped
// and reported, so the process writing into r never blocks on the log.
func (w *Writer) Copy(r io.Reader, stream string) error {
	s := lineSplitter{stream: stream, now: w.now}
	buf := make([]byte, readSize)
	var batch records
	for {
		n, err := r.Read(buf)
		s.split(&batch, buf[:n])
		if err != nil {
			s.flush(&batch)
		}
		// Write once what one read brought in: fewer syscalls under a
		// flood, and no record waits for more input.
		w.write(&batch)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("crilog: read %s: %w", stream, err)
		}
	}
}

// readSize is how much one read of a container's stream takes at most.
const readSize = MaxLineSize

// lineSplitter cuts one stream into records: a line of less than
// MaxLineSize bytes is one full record (a trailing CR dropped), a longer
// one MaxLineSize-byte partial records and a full one. The start of a line
// not yet ended stays pending until its end, MaxLineSize bytes, or a flush.
type lineSplitter struct {
	stream  string
	now     func() time.Time
	pending []byte
}

// split adds the records p completes to b.
func (s *lineSplitter) split(b *records, p []byte) {
	for len(p) > 0 {
		room := MaxLineSize - len(s.pending)
		window := p
		if len(window) > room {
			window = window[:room]
		}
		if i := bytes.IndexByte(window, '\n'); i >= 0 {
			line := p[:i]
			if len(s.pending) > 0 {
				s.pending = append(s.pending, line...)
				line = s.pending
			}
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			b.add(s.now(), s.stream, TagFull, line)
			s.pending, p = s.pending[:0], p[i+1:]
			continue
		}
		if len(window) < room {
			s.pending = append(s.pending, p...)
			return
		}
		// MaxLineSize bytes without a newline: a partial record.
		if len(s.pending) > 0 {
			s.pending = append(s.pending, window...)
			window = s.pending
		}
		b.add(s.now(), s.stream, TagPartial, window)
		s.pending, p = s.pending[:0], p[room:]
	}
}

// flush adds what is pending as a partial record, as containerd's CRI
// logger writes an unterminated last line, so that readers give back
// exactly what was written (`echo -n DONE` reads as "DONE", not "DONE\n":
// kubelet's FallbackToLogsOnError termination message). Should the line
// go on later, its rest follows as further records, which readers join.
func (s *lineSplitter) flush(b *records) {
	if len(s.pending) > 0 {
		b.add(s.now(), s.stream, TagPartial, s.pending)
		s.pending = s.pending[:0]
	}
}

// records is a batch of formatted records in one buffer.
type records struct {
	buf  []byte
	ends []int
}

func (b *records) add(t time.Time, stream, tag string, content []byte) {
	b.buf = t.UTC().AppendFormat(b.buf, time.RFC3339Nano)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, stream...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, tag...)
	b.buf = append(b.buf, ' ')
	b.buf = append(b.buf, content...)
	b.buf = append(b.buf, '\n')
	b.ends = append(b.ends, len(b.buf))
}

func (b *records) reset() { b.buf, b.ends = b.buf[:0], b.ends[:0] }

// write appends a batch, rotating between records where the live file would
// exceed MaxSize.
func (w *Writer) write(b *records) {
	defer b.reset()
	if len(b.ends) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	start, from := 0, 0
	for _, end := range b.ends {
		// w.size counts the records of this batch not yet written too.
		if w.rot.MaxSize > 0 && w.size > 0 && w.size+int64(end-from) > w.rot.MaxSize {
			w.append(b.buf[start:from])
			w.rotate()
			start = from
		}
		w.size += int64(end - from)
		from = end
	}
	w.append(b.buf[start:from])
}

// append writes p to the live file; size was already counted.
func (w *Writer) append(p []byte) {
	if len(p) == 0 {
		return
	}
	if w.f == nil {
		if err := w.open(); err != nil {
			w.report(fmt.Errorf("dropped %d bytes: %w", len(p), err))
			return
		}
		w.size += int64(len(p))
	}
	if _, err := w.f.Write(p); err != nil {
		w.report(fmt.Errorf("crilog: dropped log bytes: write %s: %w", w.path, err))
	}
}

// rotate renames the live file to <path>.<timestamp>, removes the oldest
// rotated files beyond MaxFiles-1 and opens a new live file.
func (w *Writer) rotate() {
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			w.report(fmt.Errorf("crilog: close %s: %w", w.path, err))
		}
		w.f = nil
	}
	w.size = 0
	rotated, err := RotatedFiles(w.path)
	if err != nil {
		w.report(err)
	}
	name := w.rotatedName(rotated)
	if err := os.Rename(w.path, name); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.report(fmt.Errorf("crilog: rotate %s: %w", w.path, err))
	} else {
		rotated = append(rotated, name)
	}
	keep := w.rot.MaxFiles - 1
	if keep < 1 {
		keep = 1
	}
	for i := 0; i < len(rotated)-keep; i++ {
		if err := os.Remove(rotated[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			w.report(fmt.Errorf("crilog: remove old log: %w", err))
		}
	}
	if err := w.open(); err != nil {
		w.report(err)
	}
}

// rotatedName is kubelet's <path>.<yyyymmdd-hhmmss> (UTC, so that the names
// sort in time order whatever the zone). Rotations within one second (or
// after the clock went back) get a fixed-width counter after the newest
// rotated name, so that names always sort in rotation order.
func (w *Writer) rotatedName(rotated []string) string {
	name := w.path + "." + w.now().UTC().Format(rotatedTimeFormat)
	n := len(rotated)
	if n == 0 || rotated[n-1] < name {
		return name
	}
	last := rotated[n-1]
	baseLen := len(w.path) + 1 + len(rotatedTimeFormat)
	count := 0
	if len(last) > baseLen+1 {
		count, _ = strconv.Atoi(last[baseLen+1:])
	}
	return fmt.Sprintf("%s.%03d", last[:baseLen], count+1)
}

// RotatedFiles lists the rotated files of the live log at path, oldest
// first. Compressed (.gz) and temporary (.tmp) files are left out.
func RotatedFiles(path string) ([]string, error) {
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, fmt.Errorf("crilog: list rotated logs of %s: %w", path, err)
	}
	out := matches[:0]
	for _, m := range matches {
		suffix := strings.TrimPrefix(m, path+".")
		if len(suffix) < len(rotatedTimeFormat) || strings.HasSuffix(m, ".gz") || strings.HasSuffix(m, ".tmp") {
			continue
		}
		if _, err := time.Parse(rotatedTimeFormat, suffix[:len(rotatedTimeFormat)]); err != nil {
			continue
		}
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
