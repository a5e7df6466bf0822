package crilog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The drain protocol. A logger started by containerd's shim knows its
// container's ID (the shim's CONTAINER_ID environment variable) and listens
// on the abstract unix socket DrainSocket(id), in the network namespace it
// shares with the shim and the agent. A client connects, sends
// drainRequest and reads one line: drainOK once everything the container's
// stdout and stderr pipes held when the request arrived is written to the
// log file (an unterminated last line as a partial record), or "error:
// <why>". For an exited container that is all its output: the pipes'
// other ends belong to its processes, which are gone, and to the shim,
// which writes nothing into them (no stdin, no terminal). The shim keeps
// its ends open until the task is deleted, so the logger never sees EOF
// before that: waiting for EOF means waiting for the task's release.
//
// Only peers running as root or as the logger's user are answered. A
// logger from before this protocol (or started without CONTAINER_ID) does
// not listen: clients see ErrNoLogger and fall back to releasing the task,
// which waits for the logger to reach EOF and exit.
const (
	drainSocketPrefix = "@nodeagent/container-logger/"
	drainRequest      = "drain v1\n"
	drainOK           = "ok\n"
	// drainIOTimeout bounds a connection's exchange on the logger's side.
	drainIOTimeout = 5 * time.Second
)

// containerIDEnv is set by containerd's shim for a binary:// logger
// (pkg/process NewBinaryCmd, 1.3 to 2.x).
const containerIDEnv = "CONTAINER_ID"

// ErrNoLogger: no logger answers on the container's drain socket (none
// runs, or one that does not speak the protocol).
var ErrNoLogger = errors.New("no logger listens for drain requests")

// DrainSocket is the abstract socket address of container id's logger.
func DrainSocket(id string) string { return drainSocketPrefix + id }

// serveDrain answers drain requests for container id with drain's result
// until stop is called (the logger never does: its socket goes with the
// process). A socket it cannot listen on is reported and leaves the logger
// without one (stop is then a no-op).
func serveDrain(id string, drain func() error, report func(error)) (stop func()) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		report(fmt.Errorf("drain socket: %w", err))
		return func() {}
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: DrainSocket(id)}); err != nil {
		_ = unix.Close(fd)
		report(fmt.Errorf("drain socket %s: %w", DrainSocket(id), err))
		return func() {}
	}
	if err := unix.Listen(fd, 8); err != nil {
		_ = unix.Close(fd)
		report(fmt.Errorf("drain socket %s: %w", DrainSocket(id), err))
		return func() {}
	}
	l := os.NewFile(uintptr(fd), "drain-socket")
	rc, err := l.SyscallConn()
	if err != nil {
		_ = l.Close()
		report(fmt.Errorf("drain socket: %w", err))
		return func() {}
	}
	var stopped atomic.Bool
	go func() {
		for {
			var (
				conn int
				aerr error
			)
			err := rc.Read(func(s uintptr) bool {
				conn, _, aerr = unix.Accept4(int(s), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
				return !errors.Is(aerr, unix.EAGAIN)
			})
			switch {
			case stopped.Load():
				if aerr == nil {
					_ = unix.Close(conn)
				}
				return
			case err != nil:
				report(fmt.Errorf("drain socket: %w", err))
				return
			case errors.Is(aerr, unix.EINTR), errors.Is(aerr, unix.ECONNABORTED):
				continue
			case aerr != nil:
				// Out of descriptors or memory: clients fall back.
				report(fmt.Errorf("drain socket: accept: %w", aerr))
				return
			}
			go answerDrain(conn, drain)
		}
	}()
	return func() {
		stopped.Store(true)
		_ = l.Close()
	}
}

// answerDrain serves one connection.
func answerDrain(fd int, drain func() error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		_ = unix.Close(fd)
		return
	}
	c := os.NewFile(uintptr(fd), "drain-conn")
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(drainIOTimeout))
	req := make([]byte, len(drainRequest))
	if _, err := io.ReadFull(c, req); err != nil {
		return
	}
	resp := drainOK
	if string(req) != drainRequest {
		resp = fmt.Sprintf("error: unknown request %q\n", req)
	} else if err := drain(); err != nil {
		resp = "error: " + strings.ReplaceAll(err.Error(), "\n", "; ") + "\n"
	}
	_, _ = io.WriteString(c, resp)
}

// Drain asks the logger of container id to write to the log file
// everything the container's pipes hold, and returns once it has (see the
// protocol above). It returns ErrNoLogger when no logger listens, ctx's
// error when ctx ends first.
func Drain(ctx context.Context, id string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("crilog: drain %s: %w", id, err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: DrainSocket(id)}); err != nil {
		_ = unix.Close(fd)
		if errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("crilog: drain %s: %w", id, ErrNoLogger)
		}
		// EAGAIN: the logger's backlog is full.
		return fmt.Errorf("crilog: drain %s: connect: %w", id, err)
	}
	// The socket's name is open to every process of the network
	// namespace (hostNetwork pods too): only a listener running as root
	// or as this process's user is a logger's answer to trust.
	if cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("crilog: drain %s: peer credentials: %w", id, err)
	} else if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		_ = unix.Close(fd)
		return fmt.Errorf("crilog: drain %s: %s is held by uid %d, not a logger", id, DrainSocket(id), cred.Uid)
	}
	c := os.NewFile(uintptr(fd), "drain")
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	resp, err := exchange(c)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Only ctx sets the connection's deadlines: its end is due
			// now, if the timer has not told it yet.
			<-ctx.Done()
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("crilog: drain %s: %w", id, err)
	}
	if resp != drainOK {
		return fmt.Errorf("crilog: drain %s: the logger says %q", id, strings.TrimSuffix(resp, "\n"))
	}
	return nil
}

// exchange sends the request and reads one line of answer.
func exchange(c *os.File) (string, error) {
	if _, err := io.WriteString(c, drainRequest); err != nil {
		return "", err
	}
	var resp []byte
	buf := make([]byte, 256)
	for len(resp) < 4096 {
		n, err := c.Read(buf)
		resp = append(resp, buf[:n]...)
		if i := bytes.IndexByte(resp, '\n'); i >= 0 {
			return string(resp[:i+1]), nil
		}
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("the logger closed the connection without an answer: %w", io.ErrUnexpectedEOF)
		}
		if err != nil {
			return "", err
		}
	}
	return "", errors.New("the logger's answer is too long")
}
