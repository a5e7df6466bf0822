package nodeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	streaming "k8s.io/kubelet/pkg/cri/streaming/remotecommand"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/runtime"
)

// StdinAttacher copies an attach session's input to a running container's
// stdin and applies terminal resizes (runtime.Runtime.AttachStdin).
type StdinAttacher interface {
	AttachStdin(ctx context.Context, containerID string, o runtime.AttachOptions) error
}

// attach serves /attach/{namespace}/{pod}/{container}: the running
// container's output from now on, separated by stream (one stream with a
// terminal), until it stops or the client goes away; the client's input
// goes to the container's stdin (pod spec `stdin`), and with `stdinOnce`
// the end of that input closes it, as kubelet. The container's output goes
// to its log writer (package crilog), which outlives the agent, so attach
// follows the log file.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	streamOpts, err := streaming.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, c, ok := s.streamTarget(w, r, ns, name, cname)
	if !ok {
		return
	}
	if c.LogPath == "" {
		http.Error(w, fmt.Sprintf("container %q in pod %q has no log to attach to", cname, name), http.StatusBadRequest)
		return
	}
	streaming.ServeAttach(w, r, attacher{s: s, pod: pod, c: c}, name, pod.UID, cname, streamOpts,
		s.streamIdleTimeout(), streamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

type attacher struct {
	s   *Server
	pod *v1.Pod
	c   runtime.Container
}

func (a attacher) AttachContainer(ctx context.Context, _ string, _ types.UID, _ string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	info := runtime.StdioOf(a.c)
	// Input starts once the output is positioned, so that no answer to it
	// is missed. It ends with the session: the streaming server closes
	// the streams once AttachContainer returns.
	var once sync.Once
	startInput := func() { once.Do(func() { go a.input(ctx, in, resize) }) }
	defer startInput() // ReadLogs failed before positioning: drain

	var stdout, stderr io.Writer = io.Discard, io.Discard
	if out != nil {
		stdout = out
	}
	if errw != nil {
		stderr = errw
	}
	if info.TTY {
		// The logger drops the terminal's carriage returns; a raw-mode
		// client needs them back.
		stdout = crlfWriter{stdout}
	}
	st := &attemptState{s: a.s, uid: a.pod.UID, name: a.c.Name, attempt: a.c.Attempt, id: a.c.ID}
	running := func() bool { return st.running(ctx) }
	err := crilog.ReadLogs(ctx, a.c.LogPath, crilog.ReadOptions{Follow: true, TailLines: 0, Stderr: stderr, Positioned: startInput}, stdout, running)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// input copies the session's stdin and resizes to the container; input the
// container cannot take (no stdin, closed by stdinOnce, no runtime) is read
// and dropped so the client never blocks.
func (a attacher) input(ctx context.Context, in io.Reader, resize <-chan remotecommand.TerminalSize) {
	var sizes chan runtime.TerminalSize
	if resize != nil {
		sizes = make(chan runtime.TerminalSize)
		go func() {
			defer close(sizes)
			for sz := range resize {
				select {
				case sizes <- runtime.TerminalSize{Width: sz.Width, Height: sz.Height}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	o := runtime.AttachOptions{}
	if in != nil {
		o.Stdin = in
	}
	if sizes != nil {
		o.Resize = sizes
	}
	if a.s.opts.Attach == nil || (o.Stdin == nil && o.Resize == nil) {
		drain(in)
		return
	}
	if err := a.s.opts.Attach.AttachStdin(ctx, a.c.ID, o); err != nil {
		if ctx.Err() == nil {
			a.s.log.Info("attach input", "pod", a.pod.Namespace+"/"+a.pod.Name, "container", a.c.Name, "err", err)
		}
		drain(in)
	}
}

func drain(in io.Reader) {
	if in != nil {
		_, _ = io.Copy(io.Discard, in)
	}
}

// crlfWriter turns "\n" into "\r\n".
type crlfWriter struct{ w io.Writer }

func (c crlfWriter) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, '\n') < 0 {
		return c.w.Write(p)
	}
	if _, err := c.w.Write(crlf(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// crlf puts "\r" before every "\n" that has none.
func crlf(p []byte) []byte {
	out := make([]byte, 0, len(p)+8)
	for i, b := range p {
		if b == '\n' && (i == 0 || p[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, b)
	}
	return out
}
