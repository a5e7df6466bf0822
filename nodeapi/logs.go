package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/crilog"
	"github.com/nodeagent/nodeagent/runtime"
)

// ParseLogOptions reads kubelet's containerLogs query parameters (those of
// v1.PodLogOptions) and validates them as the API server does.
func ParseLogOptions(q url.Values, now time.Time) (crilog.ReadOptions, bool, error) {
	opts := crilog.ReadOptions{TailLines: -1}
	var errs []error
	boolean := func(name string) bool {
		v := q.Get(name)
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a boolean", name, v))
		}
		return b
	}
	integer := func(name string) (int64, bool) {
		v := q.Get(name)
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not an integer", name, v))
			return 0, false
		}
		return n, true
	}
	opts.Follow = boolean("follow")
	previous := boolean("previous")
	opts.Timestamps = boolean("timestamps")
	if n, ok := integer("tailLines"); ok {
		if n < 0 {
			errs = append(errs, fmt.Errorf("tailLines: Invalid value: %d: must be greater than or equal to 0", n))
		}
		opts.TailLines = n
	}
	if n, ok := integer("limitBytes"); ok {
		if n < 1 {
			errs = append(errs, fmt.Errorf("limitBytes: Invalid value: %d: must be greater than 0", n))
		}
		opts.LimitBytes = n
	}
	secs, hasSecs := integer("sinceSeconds")
	if hasSecs {
		if secs < 1 {
			errs = append(errs, fmt.Errorf("sinceSeconds: Invalid value: %d: must be greater than 0", secs))
		}
		opts.Since = now.Add(-time.Duration(secs) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if hasSecs {
			errs = append(errs, errors.New("at most one of `sinceTime` or `sinceSeconds` may be specified"))
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("sinceTime: %q is not an RFC3339 time", v))
		}
		opts.Since = t
	}
	return opts, previous, errors.Join(errs...)
}

// logAttempt is one container attempt's live log file.
type logAttempt struct {
	n    uint32
	path string
}

// logAttempts lists the container attempts that have log files in the
// container's directory under any of roots, newest first. An attempt
// found under several roots is the first root's.
func logAttempts(roots []string, podDir, container string) ([]logAttempt, error) {
	byN := map[uint32]string{}
	for _, root := range roots {
		if root == "" {
			continue
		}
		dir := filepath.Join(root, podDir, container)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			num, rest, ok := strings.Cut(e.Name(), ".log")
			if !ok || rest != "" && rest[0] != '.' {
				continue
			}
			n, err := strconv.ParseUint(num, 10, 32)
			if err != nil {
				continue
			}
			if _, seen := byN[uint32(n)]; !seen {
				byN[uint32(n)] = filepath.Join(dir, num+".log")
			}
		}
	}
	out := make([]logAttempt, 0, len(byN))
	for n, p := range byN {
		out = append(out, logAttempt{n: n, path: p})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].n > out[j].n })
	return out, nil
}

func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// waitingReason is the container's waiting reason from the pod status.
func waitingReason(pod *v1.Pod, name string) string {
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				return cs.State.Waiting.Reason
			}
		}
	}
	return "ContainerCreating"
}

func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, previous, err := ParseLogOptions(r.URL.Query(), s.opts.Clock.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, ok := s.opts.Pods.GetPodByName(ns, name)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, cname) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", cname, name), http.StatusNotFound)
		return
	}
	roots := append([]string{s.opts.LogRoot}, s.opts.LegacyLogRoots...)
	attempts, err := logAttempts(roots, ns+"_"+name+"_"+string(pod.UID), cname)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var attempt logAttempt
	switch {
	case previous && len(attempts) < 2:
		http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", cname, name), http.StatusBadRequest)
		return
	case previous:
		attempt = attempts[1]
	case len(attempts) == 0:
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start: %s", cname, name, waitingReason(pod, cname)), http.StatusBadRequest)
		return
	default:
		attempt = attempts[0]
	}
	path := attempt.path
	st := &attemptState{s: s, uid: pod.UID, name: cname, attempt: attempt.n}
	running := func() bool { return st.running(r.Context()) }
	if previous {
		opts.Follow = false // a terminated attempt has nothing more to say
	}
	w.Header().Set("Content-Type", "text/plain")
	var out io.Writer = w
	if opts.Follow {
		out = flushWriter{w}
	}
	if err := crilog.ReadLogs(r.Context(), path, opts, out, running); err != nil {
		s.log.Debug("node API: container logs", "pod", ns+"/"+name, "container", cname, "err", err)
		if errors.Is(err, os.ErrNotExist) {
			http.Error(w, fmt.Sprintf("container %q in pod %q: no log file", cname, name), http.StatusNotFound)
		}
	}
}

// attemptState tells a follow whether the attempt it reads still runs. The
// first check finds the attempt's container in one listing; later ones
// inspect only that container, so an idle follow costs two lookups a
// second instead of a listing of every container on the node. When the
// runtime cannot tell, the attempt is taken as running so a follow does
// not end early. A follow checks from one goroutine.
type attemptState struct {
	s       *Server
	uid     types.UID
	name    string
	attempt uint32
	id      string // the container, once found
}

func (a *attemptState) running(ctx context.Context) bool {
	if a.s.opts.Containers == nil {
		return false
	}
	if a.id != "" {
		c, err := a.s.opts.Containers.InspectContainer(ctx, a.id)
		switch {
		case errors.Is(err, runtime.ErrNotFound):
			return false
		case err != nil:
			return true
		}
		return mayRun(c.State)
	}
	cs, err := a.s.opts.Containers.ListContainers(ctx)
	if err != nil {
		return true
	}
	for _, c := range cs {
		if c.Pod.UID == a.uid && c.Name == a.name && c.Attempt == a.attempt {
			a.id = c.ID
			return mayRun(c.State)
		}
	}
	return false
}

// mayRun: a running container, or one whose state the runtime could not
// tell (containerd says unknown when the shim is slow to answer): a
// follow keeps going, as it does on errors.
func mayRun(s runtime.State) bool { return s == runtime.StateRunning || s == runtime.StateUnknown }

// flushWriter sends what a follow reads at once.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}
