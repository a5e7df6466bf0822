// Package pause is the pod's PID-namespace holder ("pause" process) of
// shareProcessNamespace pods: PID 1 of the pod's PID namespace. It reaps
// the zombies the namespace's orphans leave behind (an init's duty) and
// sleeps until SIGTERM or SIGINT, then exits 0.
//
// It runs in nodeagent-container-logger's `pause` mode (a static binary
// without the agent's packages), inside a container with a read-only
// rootfs holding only that binary, so it imports nothing beyond the
// standard library and x/sys.
package pause

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Command is the first argument that selects the pause mode.
const Command = "pause"

// IsInvocation reports whether args (without the program name) ask for the
// pause mode.
func IsInvocation(args []string) bool { return len(args) > 0 && args[0] == Command }

// Run sleeps, reaping children, until SIGTERM or SIGINT; it returns the
// exit code.
func Run(stderr io.Writer) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	return loop(sigs, stderr)
}

// loop handles the signals Run subscribed to.
func loop(sigs <-chan os.Signal, stderr io.Writer) int {
	for s := range sigs {
		if s == syscall.SIGCHLD {
			if err := Reap(); err != nil {
				fmt.Fprintln(stderr, "pause: reaping:", err)
			}
			continue
		}
		return 0
	}
	return 0
}

// Reap collects every exited child without blocking. It fails only on an
// unexpected wait4 error (ECHILD, "no children", is the normal end).
func Reap() error {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return nil
		case err != nil:
			return err
		case pid <= 0:
			return nil // children left, none exited
		}
	}
}
