package crilog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LoggerCommand marks a logger invocation. containerd's shim turns the
// query of a binary:// log URI into arguments as unordered key/value pairs
// (containerd pkg/process NewBinaryCmd, 1.6 to 2.x), so the marker is a
// key, not a leading subcommand: `nodeagent container-logger v1 path P
// max-size N max-files M`, in any pair order.
const LoggerCommand = "container-logger"

// loggerVersion is the value of the LoggerCommand key: the argument format.
const loggerVersion = "v1"

const (
	argPath     = "path"
	argMaxSize  = "max-size"
	argMaxFiles = "max-files"
)

// termDrain bounds how long a logger asked to stop (SIGTERM from the shim
// deleting the task, which waits 12s before SIGKILL) keeps draining the
// container's pipes before it exits.
const termDrain = 10 * time.Second

// LoggerArgs are the binary:// log URI arguments that make the shim start a
// logger writing to path with the given rotation.
func LoggerArgs(path string, rot Rotation) map[string]string {
	return map[string]string{
		LoggerCommand: loggerVersion,
		argPath:       path,
		argMaxSize:    strconv.FormatInt(rot.MaxSize, 10),
		argMaxFiles:   strconv.Itoa(rot.MaxFiles),
	}
}

// IsLoggerInvocation tells whether a process's arguments (without the
// program name) are a logger invocation.
func IsLoggerInvocation(args []string) bool {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == LoggerCommand {
			return true
		}
	}
	return false
}

// ParseLoggerArgs reads the key/value pairs of a logger invocation.
func ParseLoggerArgs(args []string) (string, Rotation, error) {
	if len(args)%2 != 0 {
		return "", Rotation{}, fmt.Errorf("container-logger: arguments must be key/value pairs, have %q", args)
	}
	var (
		path string
		rot  = Rotation{MaxSize: DefaultMaxSize, MaxFiles: DefaultMaxFiles}
		errs []error
	)
	for i := 0; i < len(args); i += 2 {
		k, v := args[i], args[i+1]
		switch k {
		case LoggerCommand:
			if v != loggerVersion {
				errs = append(errs, fmt.Errorf("%s: unknown argument format %q (want %q)", k, v, loggerVersion))
			}
		case argPath:
			path = v
		case argMaxSize:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a size in bytes", k, v))
			}
			rot.MaxSize = n
		case argMaxFiles:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive number of files", k, v))
			}
			rot.MaxFiles = n
		default:
			errs = append(errs, fmt.Errorf("unknown argument %q", k))
		}
	}
	if path == "" || path[0] != '/' {
		errs = append(errs, fmt.Errorf("%s: %q must be an absolute path", argPath, path))
	}
	if err := errors.Join(errs...); err != nil {
		return "", Rotation{}, fmt.Errorf("container-logger: %w", err)
	}
	return path, rot, nil
}

// RunLogger is the logger process: it reads the container's stdout and
// stderr from fds 3 and 4, writes them to the log file, and closes fd 5 once
// the file is open (the shim waits for that before it starts the
// container). With CONTAINER_ID set (by the shim) it answers drain requests
// on DrainSocket(CONTAINER_ID) (drain.go). It returns the exit code once
// both streams have ended, or termDrain after SIGTERM.
func RunLogger(args []string, stderr io.Writer) int {
	path, rot, err := ParseLoggerArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	// Non-blocking before os.NewFile, so that the Go runtime polls them
	// and a drain can read them between the copies' reads (pipe.go).
	// Only this process reads them: the shim (or the agent) closed its
	// copies of the read ends after starting it.
	for _, fd := range []int{3, 4} {
		_ = unix.SetNonblock(fd, true)
	}
	stdout := os.NewFile(3, "container-stdout")
	errout := os.NewFile(4, "container-stderr")
	ready := os.NewFile(5, "container-wait")
	if stdout == nil || errout == nil {
		fmt.Fprintln(stderr, "container-logger: fds 3 and 4 must be the container's stdout and stderr")
		return 2
	}
	report := func(err error) { fmt.Fprintf(stderr, "container-logger %s: %v\n", path, err) }
	w, err := OpenWriter(path, rot, nil, report)
	if err != nil {
		// Keep draining so the container does not die of SIGPIPE; the
		// writer retries opening on every batch.
		report(err)
		w = &Writer{path: path, rot: rot, now: time.Now, report: report}
	}
	defer w.Close()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var (
		wg     sync.WaitGroup
		pipes  []*pipeCopy
		copies []func() error
	)
	for _, s := range []struct {
		f    *os.File
		name string
	}{{stdout, Stdout}, {errout, Stderr}} {
		if p := newPipeCopy(w, s.f, s.name); p != nil {
			pipes = append(pipes, p)
			copies = append(copies, p.run)
		} else {
			copies = append(copies, func() error { return w.Copy(s.f, s.name) })
		}
	}
	if id := os.Getenv(containerIDEnv); id != "" && len(pipes) == 2 {
		serveDrain(id, func() error {
			var errs []error
			for _, p := range pipes {
				errs = append(errs, p.drain())
			}
			return errors.Join(errs...)
		}, report)
	}
	if ready != nil {
		ready.Close()
	}
	for _, run := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(); err != nil {
				report(err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return 0
	case <-sigs:
	}
	// The shim closed its ends of the pipes before signalling: what is
	// left is buffered, and EOF follows unless another process still
	// holds a write end.
	select {
	case <-done:
	case <-time.After(termDrain):
		report(errors.New("streams still open after SIGTERM; exiting"))
	}
	return 0
}
