package crilog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// pipeCopy copies one of a container's output pipes into the log, as Copy
// does, and can be drained: drain writes, at once, everything the pipe
// held when it was called. The pipe is read without blocking, through the
// Go runtime's poller, so that a read and what it brought in are written
// under one lock: once drain holds the lock and finds the pipe empty, no
// byte read before is still on its way to the file.
type pipeCopy struct {
	w  *Writer
	f  *os.File
	rc syscall.RawConn
	fd int

	mu    sync.Mutex // held from a read until its records are written
	split lineSplitter
	buf   []byte
	batch records
	done  bool  // EOF or a read error
	err   error // the read error
	// blocking: the pipe could not be polled and Copy reads it, without
	// the lock; it cannot be drained.
	blocking bool
}

var errNotPollable = errors.New("the stream cannot be polled")

// newPipeCopy prepares the copy of f, a pipe or FIFO the caller made
// non-blocking before os.NewFile (so that f is pollable). A file that
// cannot be polled is copied by Copy and cannot be drained (nil).
func newPipeCopy(w *Writer, f *os.File, stream string) *pipeCopy {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	p := &pipeCopy{w: w, f: f, rc: rc, fd: -1, split: lineSplitter{stream: stream, now: w.now}, buf: make([]byte, readSize)}
	if err := rc.Control(func(fd uintptr) { p.fd = int(fd) }); err != nil {
		return nil
	}
	if fl, err := unix.FcntlInt(uintptr(p.fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
		return nil
	}
	return p
}

// run copies until EOF or a read error.
func (p *pipeCopy) run() error {
	for {
		var done bool
		err := p.rc.Read(func(fd uintptr) bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			_, more := p.readLocked(int(fd), len(p.buf))
			done = p.done
			return more || done
		})
		if err != nil {
			// The poller could not wait for the pipe (it is not
			// pollable): nothing was lost, go on blocking.
			return p.blockingCopy(err)
		}
		if done {
			if p.err != nil {
				return fmt.Errorf("crilog: read %s: %w", p.split.stream, p.err)
			}
			return nil
		}
	}
}

func (p *pipeCopy) blockingCopy(cause error) error {
	if err := unix.SetNonblock(p.fd, false); err != nil {
		return fmt.Errorf("crilog: read %s: %w", p.split.stream, errors.Join(cause, err))
	}
	p.mu.Lock()
	p.blocking = true
	p.split.flush(&p.batch) // Copy has its own splitter
	p.w.write(&p.batch)
	p.mu.Unlock()
	return p.w.Copy(p.f, p.split.stream)
}

// readLocked reads once, at most limit bytes, and writes the records that
// completes. It returns the bytes read and false when the pipe was empty.
func (p *pipeCopy) readLocked(fd, limit int) (int, bool) {
	if p.done {
		return 0, false
	}
	n, err := unix.Read(fd, p.buf[:limit])
	switch {
	case errors.Is(err, unix.EAGAIN):
		return 0, false
	case errors.Is(err, unix.EINTR):
		return 0, true
	case err != nil:
		p.done, p.err = true, err
		p.split.flush(&p.batch)
	case n == 0:
		p.done = true
		p.split.flush(&p.batch)
	default:
		p.split.split(&p.batch, p.buf[:n])
	}
	p.w.write(&p.batch)
	return max(n, 0), true
}

// drain reads and writes what the pipe holds now (not what is written
// into it meanwhile: a writer that never stops cannot hold drain up),
// then writes an unterminated last line as a partial record.
func (p *pipeCopy) drain() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocking {
		return fmt.Errorf("crilog: drain %s: %w", p.split.stream, errNotPollable)
	}
	// TIOCINQ is Linux's FIONREAD: the bytes a pipe holds.
	left, err := unix.IoctlGetInt(p.fd, unix.TIOCINQ)
	if err != nil {
		return fmt.Errorf("crilog: drain %s: %w", p.split.stream, err)
	}
	for left > 0 && !p.done {
		n, more := p.readLocked(p.fd, min(left, len(p.buf)))
		if !more {
			break // emptied by another reader of the same pipe
		}
		left -= n
	}
	p.split.flush(&p.batch)
	p.w.write(&p.batch)
	if p.err != nil {
		return fmt.Errorf("crilog: drain %s: %w", p.split.stream, p.err)
	}
	return nil
}
