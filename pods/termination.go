package pods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/containerspec"
	"github.com/nodeagent/nodeagent/runtime"
)

// Kubelet's limits on termination messages.
const (
	// maxTerminationMessage is what is read of the message file (its
	// last bytes).
	maxTerminationMessage = 4096
	// maxTerminationLogLines and maxTerminationLogBytes bound the
	// message taken from the log (FallbackToLogsOnError).
	maxTerminationLogLines = 80
	maxTerminationLogBytes = 2048
)

// LabelTerminationMessagePath is the label holding the host file a
// container's terminationMessagePath is bind-mounted from, so that its
// message is found again after an agent restart.
const LabelTerminationMessagePath = containerspec.LabelTerminationMessagePath

// terminationMessages returns the termination messages of the pod's
// exited containers by container ID. A message is read once, when its
// container is first seen exited.
func (w *worker) terminationMessages(ctx context.Context, pod *v1.Pod, rs pleg.PodStatus) map[string]string {
	if w.report.messages == nil {
		w.report.messages = map[string]string{}
	}
	out := map[string]string{}
	for _, c := range rs.Containers {
		if c.State != runtime.StateExited {
			continue
		}
		msg, ok := w.report.messages[c.ID]
		if !ok {
			msg = terminationMessage(ctx, c, containerSpecOf(pod, c.Name))
			w.report.messages[c.ID] = msg
		}
		if msg != "" {
			out[c.ID] = msg
		}
	}
	return out
}

// terminationMessage is kubelet's message of an exited container: the
// last 4096 bytes of its message file; with FallbackToLogsOnError, when
// that is empty and the container failed, the end of its log (80 lines,
// 2048 bytes).
func terminationMessage(ctx context.Context, c runtime.Container, spec *v1.Container) string {
	fallback := spec != nil && spec.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError && c.ExitCode != 0
	if p := c.Labels[LabelTerminationMessagePath]; p != "" {
		msg, err := readTail(p, maxTerminationMessage)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Sprintf("Error on reading termination log %s: %v", p, err)
		case msg != "" || !fallback:
			return msg
		}
	}
	if !fallback || c.LogPath == "" {
		return ""
	}
	tail := &tailBuffer{max: maxTerminationLogBytes}
	if err := crilog.ReadLogs(ctx, c.LogPath, crilog.ReadOptions{TailLines: maxTerminationLogLines}, tail, nil); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(tail.b)
}

// readTail reads the last max bytes of a file.
func readTail(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if off := fi.Size() - max; off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return "", err
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, max))
	return string(b), err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}
