package runtime

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/namespaces"
)

// TerminalSize is a terminal's width and height in characters.
type TerminalSize struct{ Width, Height uint16 }

// ExecOptions describe a command run in a running container.
type ExecOptions struct {
	Cmd []string
	// Stdin, when set, is copied to the command's stdin, which is closed
	// when Stdin ends. Stdout and Stderr, when set, receive its output
	// (with TTY, Stdout receives both).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	// Resize, when set with TTY, resizes the command's terminal.
	Resize <-chan TerminalSize
}

// Exec runs a command in a running container, as the container's process
// (user, environment, working directory), and returns its exit code once it
// has exited and its output is copied. Cancelling ctx stops waiting and
// kills the command.
func (r *Runtime) Exec(ctx context.Context, id string, o ExecOptions) (int, error) {
	if len(o.Cmd) == 0 {
		return 0, fmt.Errorf("runtime: exec in %s: %w: no command", id, ErrInvalidSpec)
	}
	ctx = namespaces.WithNamespace(ctx, r.opts.Namespace)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("runtime: exec in %s: %w", id, convertErr(err))
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return 0, fmt.Errorf("runtime: exec in %s: %w", id, convertErr(err))
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("runtime: exec in %s: %w", id, convertErr(err))
	}
	pspec := *spec.Process
	pspec.Args = o.Cmd
	pspec.Terminal = o.TTY

	stdinEOF := make(chan struct{})
	var opts []cio.Opt
	var stdin io.Reader
	if o.Stdin != nil {
		stdin = &eofNotifier{r: o.Stdin, eof: stdinEOF}
	}
	// Without a terminal, containerd's shim copies stdout and stderr as a
	// pair: with one of them set and the other not, it tries to open the
	// missing one's fifo at "" and the exec fails to start ("opening file
	// \"\" failed"), though its process may have written some output
	// already (kubectl exec with stdout only, as the API server may ask for
	// it). As containerd's CRI, which makes both fifos always, the stream
	// nobody asked for is read and dropped.
	stdout, stderr := o.Stdout, o.Stderr
	if !o.TTY && (stdout == nil) != (stderr == nil) {
		if stdout == nil {
			stdout = io.Discard
		} else {
			stderr = io.Discard
		}
	}
	opts = append(opts, cio.WithStreams(stdin, stdout, stderr))
	if o.TTY {
		opts = append(opts, cio.WithTerminal)
	}
	execID := "exec-" + newID()[:16]
	proc, err := task.Exec(ctx, execID, &pspec, cio.NewCreator(opts...))
	if err != nil {
		return 0, fmt.Errorf("runtime: exec in %s: %w", id, convertErr(err))
	}
	// Delete with a context of its own: ctx may be cancelled by now.
	defer func() {
		dctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), r.opts.Namespace), r.opts.CallTimeout)
		defer cancel()
		_, _ = proc.Delete(dctx, containerd.WithProcessKill)
	}()
	statusC, err := proc.Wait(ctx)
	if err != nil {
		return 0, fmt.Errorf("runtime: exec in %s: wait: %w", id, convertErr(err))
	}
	if err := proc.Start(ctx); err != nil {
		return 0, fmt.Errorf("runtime: exec in %s: start: %w", id, convertErr(err))
	}
	if o.Stdin != nil {
		go func() {
			select {
			case <-stdinEOF:
				_ = proc.CloseIO(ctx, containerd.WithStdinCloser)
			case <-ctx.Done():
			}
		}()
	}
	if o.TTY && o.Resize != nil {
		go func() {
			for {
				select {
				case sz, ok := <-o.Resize:
					if !ok {
						return
					}
					_ = proc.Resize(ctx, uint32(sz.Width), uint32(sz.Height))
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	select {
	case st := <-statusC:
		// The output is complete once the copiers have drained the
		// fifos.
		proc.IO().Wait()
		code, _, err := st.Result()
		if err != nil {
			return 0, fmt.Errorf("runtime: exec in %s: %w", id, convertErr(err))
		}
		return int(code), nil
	case <-ctx.Done():
		proc.IO().Cancel()
		return 0, fmt.Errorf("runtime: exec in %s: %w", id, ctx.Err())
	}
}

// eofNotifier closes eof when its reader ends.
type eofNotifier struct {
	r    io.Reader
	eof  chan struct{}
	once sync.Once
}

func (e *eofNotifier) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.eof) })
	}
	return n, err
}
