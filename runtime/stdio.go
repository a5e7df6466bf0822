package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/namespaces"
	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/crilog"
)

// Containers with stdin or a terminal (a pod's `stdin`, `stdinOnce`, `tty`).
//
// The container's stdin is a FIFO in the container's StdioDir that the
// shim reads; the shim also keeps a write end open until the first attach
// session of a stdinOnce container ends (CloseIO), so neither an agent
// restart nor an attach client that goes away closes the container's stdin.
// Attach sessions open the FIFO for writing.
//
// Output still reaches the CRI log file through a logger process that does
// not live in the agent:
//   - with a terminal, the shim copies the console to the logger it starts
//     for a binary:// log URI, as for any container (one stream, stdout);
//   - with stdin and no terminal, containerd's shim only copies stdin for
//     FIFO (not binary) output, so stdout and stderr are FIFOs too, read by
//     a logger process the agent starts detached (own session, no parent
//     death signal), holding a lock file so that exactly one runs. The shim
//     keeps both ends of the output FIFOs open: if that logger is gone (a
//     `systemctl restart` kills the agent's whole cgroup), output waits in
//     the pipe, not lost, until RestoreStdioLoggers starts a new one.

// Labels that record a container's stdio.
const (
	labelStdioDir  = labelPrefix + "stdio-dir"
	labelStdin     = labelPrefix + "stdin"
	labelStdinOnce = labelPrefix + "stdin-once"
	labelTTY       = labelPrefix + "tty"
)

// stdioPaths are the files of one container in its stdio directory.
type stdioPaths struct{ stdin, stdout, stderr, lock string }

func stdioPathsOf(dir, id string) stdioPaths {
	p := filepath.Join(dir, id)
	return stdioPaths{stdin: p + ".stdin", stdout: p + ".stdout", stderr: p + ".stderr", lock: p + ".lock"}
}

// stdioLabels are the labels CreateContainer records for spec's stdio.
func stdioLabels(spec ContainerSpec) map[string]string {
	if !spec.Stdin && !spec.TTY {
		return nil
	}
	l := map[string]string{labelStdioDir: spec.StdioDir}
	if spec.Stdin {
		l[labelStdin] = "true"
	}
	if spec.Stdin && spec.StdinOnce {
		l[labelStdinOnce] = "true"
	}
	if spec.TTY {
		l[labelTTY] = "true"
	}
	return l
}

func validateStdio(s *ContainerSpec) error {
	if (s.Stdin || s.TTY) && !filepath.IsAbs(s.StdioDir) {
		return fmt.Errorf("stdioDir %q must be absolute with stdin or tty", s.StdioDir)
	}
	return nil
}

// stdioIO is a cio.IO that only names the paths the shim opens.
type stdioIO struct{ cfg cio.Config }

func (s *stdioIO) Config() cio.Config { return s.cfg }
func (s *stdioIO) Cancel()            {}
func (s *stdioIO) Wait()              {}
func (s *stdioIO) Close() error       { return nil }

// stdioCreator prepares the stdio of a container whose labels ask for
// stdin or a terminal. done must be called once the task is created (the
// shim has opened the FIFOs) or failed.
func (r *Runtime) stdioCreator(id string, labels map[string]string) (_ cio.Creator, done func(), err error) {
	logPath := labels[labelLogPath]
	if r.opts.ContainerLogger == "" || logPath == "" {
		return nil, nil, fmt.Errorf("%w: stdin and tty need a log path and a container logger", ErrInvalidSpec)
	}
	dir := labels[labelStdioDir]
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("stdio directory: %w", err)
	}
	p := stdioPathsOf(dir, id)
	cfg := cio.Config{Terminal: labels[labelTTY] == "true"}
	if labels[labelStdin] == "true" {
		if err := mkfifo(p.stdin); err != nil {
			return nil, nil, err
		}
		cfg.Stdin = p.stdin
	}
	if cfg.Terminal {
		uri, err := cio.LogURIGenerator("binary", r.opts.ContainerLogger, crilog.LoggerArgs(logPath, r.opts.LogRotation))
		if err != nil {
			return nil, nil, fmt.Errorf("log URI: %w", err)
		}
		cfg.Stdout = uri.String()
		return func(string) (cio.IO, error) { return &stdioIO{cfg}, nil }, func() {}, nil
	}
	for _, f := range []string{p.stdout, p.stderr} {
		if err := mkfifo(f); err != nil {
			return nil, nil, err
		}
	}
	cfg.Stdout, cfg.Stderr = p.stdout, p.stderr
	// Hold write ends until the shim has its own, so the logger does not
	// read EOF from FIFOs nobody has opened for writing yet.
	var holders []*os.File
	done = func() {
		for _, f := range holders {
			_ = f.Close()
		}
	}
	for _, f := range []string{p.stdout, p.stderr} {
		fd, err := unix.Open(f, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("open %s: %w", f, err)
		}
		holders = append(holders, os.NewFile(uintptr(fd), f))
	}
	if _, err := r.startStdioLogger(p, logPath); err != nil {
		done()
		return nil, nil, err
	}
	return func(string) (cio.IO, error) { return &stdioIO{cfg}, nil }, done, nil
}

func mkfifo(path string) error {
	if err := unix.Mkfifo(path, 0o600); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mkfifo %s: %w", path, err)
	}
	return nil
}

// errLoggerRunning: another logger holds the container's lock file.
var errLoggerRunning = errors.New("a logger already runs")

// startStdioLogger starts a logger reading the output FIFOs of p, unless
// one already holds p.lock. The logger is the one the shim starts for a
// binary:// URI, with the same arguments and file descriptors (3 stdout, 4
// stderr, 5 ready), plus the locked lock file as fd 6, which it keeps open
// (and locked) until it exits.
func (r *Runtime) startStdioLogger(p stdioPaths, logPath string) (bool, error) {
	lock, err := os.OpenFile(p.lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, fmt.Errorf("logger lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, errLoggerRunning
		}
		return false, fmt.Errorf("logger lock %s: %w", p.lock, err)
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	for _, f := range []string{p.stdout, p.stderr} {
		// Non-blocking so that the open does not wait for a writer, then
		// blocking for the logger's reads.
		fd, err := unix.Open(f, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, fmt.Errorf("open %s: %w", f, err)
		}
		if err := unix.SetNonblock(fd, false); err != nil {
			_ = unix.Close(fd)
			return false, fmt.Errorf("open %s: %w", f, err)
		}
		files = append(files, os.NewFile(uintptr(fd), f))
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return false, fmt.Errorf("logger: %w", err)
	}
	defer readyR.Close()
	files = append(files, readyW)
	cmd := exec.Command(r.opts.ContainerLogger, loggerArgv(crilog.LoggerArgs(logPath, r.opts.LogRotation))...)
	cmd.ExtraFiles = []*os.File{files[0], files[1], readyW, lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start logger: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it while the agent lives
	_ = readyW.Close()
	// The logger closes its ready end once the log file is open.
	b := make([]byte, 1)
	_, _ = readyR.Read(b)
	return true, nil
}

// loggerArgv turns logger arguments into key/value pairs, in a stable
// order, as the shim does with a binary:// URI's query.
func loggerArgv(args map[string]string) []string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, k, args[k])
	}
	return out
}

// RestoreStdioLoggers starts a logger for every running container with
// stdin and no terminal whose logger is gone (killed with the agent's
// cgroup, for instance). Call it once connected, before serving attach.
func (r *Runtime) RestoreStdioLoggers(ctx context.Context) error {
	cs, err := r.ListContainers(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		l := c.Labels
		if c.State != StateRunning || l[labelStdin] != "true" || l[labelTTY] == "true" || l[labelLogPath] == "" || r.opts.ContainerLogger == "" {
			continue
		}
		started, err := r.startStdioLogger(stdioPathsOf(l[labelStdioDir], c.ID), l[labelLogPath])
		switch {
		case errors.Is(err, errLoggerRunning):
		case err != nil:
			errs = append(errs, fmt.Errorf("runtime: restore logger of %s: %w", c.ID, err))
		case started:
			r.opts.Logger.Info("restarted the log writer of a container with stdin", "containerID", c.ID)
		}
	}
	return errors.Join(errs...)
}

// removeStdio removes a container's stdio files.
func removeStdio(labels map[string]string, id string) {
	dir := labels[labelStdioDir]
	if dir == "" {
		return
	}
	p := stdioPathsOf(dir, id)
	for _, f := range []string{p.stdin, p.stdout, p.stderr, p.lock} {
		_ = os.Remove(f)
	}
}

// AttachOptions describe an attach session's input.
type AttachOptions struct {
	// Stdin is copied to the container's stdin until it ends. When it
	// ends, a stdinOnce container's stdin is closed.
	Stdin io.Reader
	// Resize, with a terminal, resizes it.
	Resize <-chan TerminalSize
}

// StdioInfo is what a container was given.
type StdioInfo struct{ Stdin, StdinOnce, TTY bool }

// StdioOf reads a container's stdio from its labels.
func StdioOf(c Container) StdioInfo {
	l := c.Labels
	return StdioInfo{Stdin: l[labelStdin] == "true", StdinOnce: l[labelStdinOnce] == "true", TTY: l[labelTTY] == "true"}
}

// AttachStdin copies o.Stdin to a running container's stdin and applies
// terminal resizes until o.Stdin ends or ctx is done. Input to a container
// without stdin, or whose stdin a stdinOnce session closed, is read and
// dropped, and AttachStdin returns when ctx is done. It does not return
// the container's output: that is in its log (LogPath).
func (r *Runtime) AttachStdin(ctx context.Context, id string, o AttachOptions) error {
	ctx = namespaces.WithNamespace(ctx, r.opts.Namespace)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("runtime: attach to %s: %w", id, convertErr(err))
	}
	labels, err := c.Labels(ctx)
	if err != nil {
		return fmt.Errorf("runtime: attach to %s: %w", id, convertErr(err))
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return fmt.Errorf("runtime: attach to %s: %w", id, convertErr(err))
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	rctx, stopResize := context.WithCancel(ctx)
	defer stopResize()
	if labels[labelTTY] == "true" && o.Resize != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case sz, ok := <-o.Resize:
					if !ok {
						return
					}
					_ = task.Resize(rctx, uint32(sz.Width), uint32(sz.Height))
				case <-rctx.Done():
					return
				}
			}
		}()
	}
	// noStdin: the input has nowhere to go; resizes still apply until
	// the session ends.
	noStdin := func() error {
		if o.Stdin != nil {
			_, _ = io.Copy(io.Discard, o.Stdin)
		}
		<-ctx.Done()
		return nil
	}
	if o.Stdin == nil || labels[labelStdin] != "true" {
		return noStdin()
	}
	path := stdioPathsOf(labels[labelStdioDir], id).stdin
	// Non-blocking: with no reader (the shim closed stdin) the open fails
	// at once instead of waiting.
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENOENT) {
			return noStdin() // closed by stdinOnce
		}
		return fmt.Errorf("runtime: attach to %s: open stdin: %w", id, err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("runtime: attach to %s: open stdin: %w", id, err)
	}
	w := os.NewFile(uintptr(fd), path)
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, o.Stdin)
		copied <- err
	}()
	select {
	case <-copied:
	case <-ctx.Done():
	}
	_ = w.Close()
	if labels[labelStdinOnce] == "true" {
		// kubelet's stdinOnce: the first attach session's end closes the
		// container's stdin (the shim's own write end).
		cctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.WithoutCancel(ctx), r.opts.Namespace), r.opts.CallTimeout)
		defer cancel()
		if err := task.CloseIO(cctx, containerd.WithStdinCloser); err != nil && !errors.Is(convertErr(err), ErrNotFound) {
			return fmt.Errorf("runtime: attach to %s: close stdin: %w", id, convertErr(err))
		}
	}
	return nil
}
