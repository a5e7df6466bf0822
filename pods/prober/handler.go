package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/runtime"
)

// HookRunner runs lifecycle hooks (postStart, preStop) as kubelet's
// handler runner: exec in the container, an HTTP GET, or a sleep.
type HookRunner struct {
	r     *runner
	clock clock.Clock
}

// NewHookRunner returns a HookRunner that execs through e.
func NewHookRunner(e Execer, c clock.Clock) *HookRunner {
	return &HookRunner{r: newRunner(e), clock: c}
}

// Run runs h for container c (its runtime ID containerID) of pod, whose
// IP is podIP. It returns kubelet's message for the failure ("" on
// success) and the error. An exec hook fails on a non-zero exit code; an
// HTTP hook only when no response comes (any status is fine); a sleep hook
// when ctx ends first. ctx bounds the hook (the grace period for preStop).
func (h *HookRunner) Run(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID, podIP string, hook *v1.LifecycleHandler) (string, error) {
	t := target{containerID: containerID, container: c, podIP: podIP}
	switch {
	case hook.Exec != nil:
		out := &limitBuffer{max: maxOutput}
		code, err := h.r.exec.Exec(ctx, containerID, runtime.ExecOptions{Cmd: hook.Exec.Command, Stdout: out, Stderr: out})
		if err == nil && code != 0 {
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(hook.Exec.Command, " "), code, out.String())
		}
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				hook.Exec.Command, c.Name, podName(pod), err, out.String()), err
		}
		return "", nil
	case hook.HTTPGet != nil:
		if err := h.httpHook(ctx, hook.HTTPGet, t); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				hook.HTTPGet.Path, c.Name, podName(pod), err), err
		}
		return "", nil
	case hook.Sleep != nil:
		t := h.clock.NewTimer(time.Duration(hook.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C():
			return "", nil
		case <-ctx.Done():
			err := errors.New("container terminated before sleep hook finished")
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				hook.Sleep.Seconds, c.Name, podName(pod), err), err
		}
	}
	err := fmt.Errorf("invalid handler: %v", hook)
	return fmt.Sprintf("Cannot run handler: %v", err), err
}

// httpHook sends the hook's GET; an HTTPS request answered in plain HTTP
// is retried over HTTP, as kubelet does.
func (h *HookRunner) httpHook(ctx context.Context, a *v1.HTTPGetAction, t target) error {
	if t.podIP == "" && a.Host == "" {
		return errors.New("failed to find networking container: the pod has no IP")
	}
	req, err := httpRequest(ctx, a, t, "lifecycle")
	if err != nil {
		return err
	}
	c := &http.Client{Transport: h.r.transport}
	res, err := c.Do(req)
	discard(res)
	if err != nil && req.URL.Scheme == "https" && errors.Is(err, http.ErrSchemeMismatch) {
		req = req.Clone(ctx)
		req.URL.Scheme = "http"
		req.Header.Del("Authorization")
		res, err = c.Do(req)
		discard(res)
	}
	return err
}

func discard(res *http.Response) {
	if res == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxOutput))
	res.Body.Close()
}

func podName(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
