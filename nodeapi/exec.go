package nodeapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	streaming "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/nodeagent/nodeagent/runtime"
)

// Execer runs a command in a running container (runtime.Runtime.Exec).
type Execer interface {
	Exec(ctx context.Context, containerID string, o runtime.ExecOptions) (int, error)
}

// kubelet's streaming defaults: streamingConnectionIdleTimeout (4h,
// Options.StreamIdleTimeout's default) and the stream creation timeout
// (30s).
const (
	DefaultStreamIdleTimeout = 4 * time.Hour
	streamCreationTimeout    = 30 * time.Second
)

// streamIdleTimeout is how long an exec, attach or port-forward
// connection may be idle before it is closed; 0 never closes it (the
// streaming libraries' meaning).
func (s *Server) streamIdleTimeout() time.Duration {
	switch d := s.opts.StreamIdleTimeout; {
	case d == 0:
		return DefaultStreamIdleTimeout
	case d < 0:
		return 0
	default:
		return d
	}
}

// exec serves /exec/{namespace}/{pod}/{container} (and kubelet's form with
// the pod UID): SPDY or WebSocket streams, as kubectl 1.34 and the API
// server negotiate them, onto a command run in the container.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	if s.opts.Exec == nil {
		http.Error(w, "exec is not available: no container runtime", http.StatusServiceUnavailable)
		return
	}
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	streamOpts, err := streaming.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()[v1.ExecCommandParam]
	if len(cmd) == 0 {
		http.Error(w, "command is required", http.StatusBadRequest)
		return
	}
	pod, c, ok := s.streamTarget(w, r, ns, name, cname)
	if !ok {
		return
	}
	streaming.ServeExec(w, r, executor{s.opts.Exec, c.ID}, name, pod.UID, cname, cmd, streamOpts,
		s.streamIdleTimeout(), streamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

func uidParam(r *http.Request) string { return r.PathValue("uid") }

// runningContainer finds the container's running attempt.
func (s *Server) runningContainer(ctx context.Context, pod *v1.Pod, name string) (runtime.Container, error) {
	notRunning := fmt.Errorf("container %q in pod %q is not running", name, pod.Name)
	if s.opts.Containers == nil {
		return runtime.Container{}, notRunning
	}
	cs, err := s.opts.Containers.PodContainers(ctx, pod.UID)
	if err != nil {
		return runtime.Container{}, fmt.Errorf("container %q in pod %q: %w", name, pod.Name, err)
	}
	for _, c := range cs {
		if c.Pod.UID == pod.UID && c.Name == name && c.State == runtime.StateRunning {
			return c, nil
		}
	}
	return runtime.Container{}, notRunning
}

// executor adapts Execer to the streaming server.
type executor struct {
	e  Execer
	id string
}

func (x executor) ExecInContainer(ctx context.Context, _ string, _ types.UID, _ string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	o := runtime.ExecOptions{Cmd: cmd, TTY: tty}
	// Typed nils must stay untyped nils for the runtime.
	if in != nil {
		o.Stdin = in
	}
	if out != nil {
		o.Stdout = out
	}
	if errw != nil {
		o.Stderr = errw
	}
	if resize != nil {
		sizes := make(chan runtime.TerminalSize)
		o.Resize = sizes
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
	code, err := x.e.Exec(ctx, x.id, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
	}
	return nil
}

// streamTarget finds the running container an exec or attach request names
// (the pod's UID must match when the request gives one); it answers the
// request itself with 404 or 400 and false when there is none.
func (s *Server) streamTarget(w http.ResponseWriter, r *http.Request, ns, name, cname string) (*v1.Pod, runtime.Container, bool) {
	pod, ok := s.opts.Pods.GetPodByName(ns, name)
	if !ok || uidParam(r) != "" && types.UID(uidParam(r)) != pod.UID {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return nil, runtime.Container{}, false
	}
	if !hasContainer(pod, cname) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", cname, name), http.StatusNotFound)
		return nil, runtime.Container{}, false
	}
	c, err := s.runningContainer(r.Context(), pod, cname)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, runtime.Container{}, false
	}
	return pod, c, true
}
