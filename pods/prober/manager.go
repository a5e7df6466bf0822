package prober

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/kubetypes"
)

// maxProbeRetries is how often a probe that could not run is tried again
// within one round (kubelet's).
const maxProbeRetries = 3

// Recorder records Events (record.EventRecorder's part the prober uses).
type Recorder interface {
	Event(object k8sruntime.Object, eventtype, reason, message string)
}

// Options configure a Manager.
type Options struct {
	// Exec runs exec probes in containers. Required.
	Exec Execer
	// Recorder receives Unhealthy and ProbeWarning events (nil: none).
	Recorder Recorder
	// OnChange is called (outside any lock) when a published result of
	// a pod changes: its worker should sync (restart a container that
	// failed its liveness probe, report readiness). Required.
	OnChange func(uid types.UID)
	Clock    clock.WithTicker
	Logger   *slog.Logger
	// Metrics count the probes run (kubelet's prober_probe_total); nil:
	// none.
	Metrics *Metrics
}

// Manager runs the probes of the pods it is told about: one goroutine per
// (pod, container, probe type), each on the probe's own period, as
// kubelet's prober workers. A goroutine that waits for its next period
// costs a timer and nothing else.
//
// The pod's worker tells the Manager the pod's spec, its IP and its
// containers' current attempts (SetPod) after every sync and forgets the
// pod when it ends (RemovePod). It reads the results back: Status for
// containerStatuses[].started/ready, Unhealthy for the containers to
// restart. All methods may be called concurrently.
type Manager struct {
	o     Options
	r     *runner
	start time.Time

	mu   sync.Mutex
	pods map[types.UID]*podEntry
}

// NewManager returns a Manager with no pods.
func NewManager(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Manager{o: o, r: newRunner(o.Exec), start: o.Clock.Now(), pods: map[types.UID]*podEntry{}}
}

type workerKey struct {
	container string
	kind      Kind
}

// published is a probe's result for one container attempt.
type published struct {
	id string
	r  Result
}

type podEntry struct {
	pod        *v1.Pod
	podIP      string
	containers map[string]Container
	workers    map[workerKey]*worker
	results    map[workerKey]published // for the current attempt only
}

// SetPod starts the probe workers of pod's containers (once) and tells
// them the pod's IP and each container's current attempt.
func (m *Manager) SetPod(pod *v1.Pod, podIP string, cs []Container) {
	var trigger []*worker
	m.mu.Lock()
	e := m.pods[pod.UID]
	if e == nil {
		if !hasProbes(pod) {
			m.mu.Unlock()
			return
		}
		e = &podEntry{containers: map[string]Container{}, workers: map[workerKey]*worker{}, results: map[workerKey]published{}}
		m.pods[pod.UID] = e
	}
	e.pod, e.podIP = pod, podIP
	for _, c := range cs {
		old := e.containers[c.Name]
		e.containers[c.Name] = c
		if c.ID != old.ID && c.Running && m.startedLocked(e, c.Name, c.ID) {
			// A new attempt that needs no startup probe: its readiness
			// is probed at once rather than a period later.
			if w := e.workers[workerKey{c.Name, Readiness}]; w != nil {
				trigger = append(trigger, w)
			}
		}
	}
	for _, c := range kubetypes.ProbedContainers(pod) {
		for k, p := range map[Kind]*v1.Probe{Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe, Startup: c.StartupProbe} {
			key := workerKey{c.Name, k}
			if p == nil || e.workers[key] != nil {
				continue
			}
			w := &worker{m: m, uid: pod.UID, container: c.DeepCopy(), kind: k, spec: p.DeepCopy(),
				stop: make(chan struct{}), trigger: make(chan struct{}, 1),
				labels: workerLabels(k, c.Name, pod.Name, pod.Namespace, pod.UID)}
			e.workers[key] = w
			go w.run()
		}
	}
	m.mu.Unlock()
	for _, w := range trigger {
		w.poke()
	}
}

func hasProbes(pod *v1.Pod) bool {
	for _, c := range kubetypes.ProbedContainers(pod) {
		if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
			return true
		}
	}
	return false
}

// RemovePod stops the pod's probe workers and forgets its results.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	e := m.pods[uid]
	delete(m.pods, uid)
	m.mu.Unlock()
	if e == nil {
		return
	}
	for _, w := range e.workers {
		close(w.stop)
	}
}

// Probed is what the probes say of a running container.
type Probed struct {
	// Started: the startup probe succeeded (or there is none).
	Started bool
	// Ready: started, and the readiness probe succeeded (or there is
	// none).
	Ready bool
}

// Status returns what the probes say of the container attempt id of the
// pod; ok is false when none of its containers has probes.
func (m *Manager) Status(uid types.UID, name, id string) (Probed, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil {
		return Probed{}, false
	}
	var p Probed
	p.Started = m.startedLocked(e, name, id)
	p.Ready = p.Started
	if e.workers[workerKey{name, Readiness}] != nil {
		p.Ready = p.Started && e.result(name, id, Readiness) == Success
	}
	return p, true
}

func (m *Manager) startedLocked(e *podEntry, name, id string) bool {
	if e.workers[workerKey{name, Startup}] == nil {
		return true
	}
	return e.result(name, id, Startup) == Success
}

// Kill is a running container whose liveness or startup probe failed: the
// pod's worker restarts it.
type Kill struct {
	Name, ID string
	Kind     Kind
	// Grace is the probe's terminationGracePeriodSeconds (nil: the pod's).
	Grace *int64
}

// Message is the Killing event's message (kubelet's).
func (k Kill) Message(restart bool) string {
	msg := fmt.Sprintf("Container %s failed %s probe", k.Name, kindName(k.Kind))
	if restart {
		msg += ", will be restarted"
	}
	return msg
}

func kindName(k Kind) string {
	switch k {
	case Liveness:
		return "liveness"
	case Readiness:
		return "readiness"
	}
	return "startup"
}

// Unhealthy returns the running containers of the pod whose liveness or
// startup probe failed.
func (m *Manager) Unhealthy(uid types.UID) []Kill {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.pods[uid]
	if e == nil {
		return nil
	}
	var out []Kill
	for name, c := range e.containers {
		if !c.Running || c.ID == "" {
			continue
		}
		for _, k := range []Kind{Startup, Liveness} {
			w := e.workers[workerKey{name, k}]
			if w == nil || e.result(name, c.ID, k) != Failure {
				continue
			}
			out = append(out, Kill{Name: name, ID: c.ID, Kind: k, Grace: w.spec.TerminationGracePeriodSeconds})
			break
		}
	}
	return out
}

// worker runs one probe of one container.
type worker struct {
	m         *Manager
	uid       types.UID
	container *v1.Container
	kind      Kind
	spec      *v1.Probe
	stop      chan struct{} // closed by RemovePod
	trigger   chan struct{} // 1-buffered: probe now
	st        state         // owned by the goroutine
	labels    probeLabels   // its prober_* series
}

func (w *worker) poke() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

func (w *worker) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer w.m.o.Metrics.forget(w.labels)
	go func() {
		<-w.stop
		cancel()
	}()
	c := w.m.o.Clock
	period := time.Duration(max(w.spec.PeriodSeconds, 1)) * time.Second
	if period > c.Since(w.m.start) {
		// Probes of pods adopted after an agent restart spread over a
		// period rather than all running at once (kubelet's jitter).
		t := c.NewTimer(time.Duration(rand.Float64() * float64(period)))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	tick := c.NewTicker(period)
	defer tick.Stop()
	for w.once(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		case <-w.trigger:
		}
	}
}

// once is one probe round; false ends the worker.
func (w *worker) once(ctx context.Context) bool {
	m := w.m
	m.mu.Lock()
	e := m.pods[w.uid]
	if e == nil || ctx.Err() != nil {
		m.mu.Unlock()
		return false
	}
	c := e.containers[w.container.Name]
	pod, podIP := e.pod, e.podIP
	started := m.startedLocked(e, c.Name, c.ID)
	r := w.st.begin(w.kind, w.spec, c, started, pod.DeletionTimestamp != nil, restartable(pod) || kubetypes.IsSidecar(w.container), m.o.Clock.Now())
	changed := false
	if r.set != nil {
		changed = w.publishLocked(e, c.ID, *r.set)
	}
	m.mu.Unlock()
	if changed {
		m.o.OnChange(w.uid)
	}
	if r.stop {
		return false
	}
	if !r.probe {
		return true
	}

	began := m.o.Clock.Now()
	out := m.r.probe(ctx, w.spec, target{containerID: c.ID, container: w.container, podIP: podIP})
	for i := 1; out.err != nil && i < maxProbeRetries && ctx.Err() == nil; i++ {
		out = m.r.probe(ctx, w.spec, target{containerID: c.ID, container: w.container, podIP: podIP})
	}
	if ctx.Err() != nil {
		return false
	}
	if out.err == nil {
		m.o.Metrics.observe(w.labels, out.result, m.o.Clock.Since(began))
	}
	res := out.result
	switch {
	case out.err != nil:
		res = Failure
		w.event(pod, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe errored and resulted in %s state: %v", w.kind, res, out.err))
	case res == Failure:
		w.event(pod, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", w.kind, out.output))
	case out.warning:
		w.event(pod, v1.EventTypeWarning, "ProbeWarning", fmt.Sprintf("%s probe warning: %s", w.kind, out.output))
	case res == Unknown:
		res = Failure
	}
	if res == Failure {
		m.o.Logger.Info("probe failed", "pod", pod.Namespace+"/"+pod.Name, "podUID", w.uid, "container", c.Name,
			"containerID", c.ID, "probe", w.kind.String(), "output", out.output, "err", out.err)
	}
	set := w.st.end(w.kind, w.spec, res)
	if set == nil {
		return true
	}
	m.mu.Lock()
	changed = false
	var ready *worker
	if e := m.pods[w.uid]; e != nil && e.containers[c.Name].ID == c.ID {
		changed = w.publishLocked(e, c.ID, *set)
		if changed && w.kind == Startup && *set == Success {
			ready = e.workers[workerKey{c.Name, Readiness}]
		}
	}
	m.mu.Unlock()
	if ready != nil {
		ready.poke()
	}
	if changed {
		m.o.OnChange(w.uid)
	}
	return true
}

// publishLocked sets the container's result for this probe and reports
// whether it changed.
func (w *worker) publishLocked(e *podEntry, id string, r Result) bool {
	k := workerKey{w.container.Name, w.kind}
	old, had := e.results[k]
	e.results[k] = published{id: id, r: r}
	return !had || old.id != id || old.r != r
}

// result is the published result of a probe for the container attempt id
// (Unknown when none).
func (e *podEntry) result(name, id string, k Kind) Result {
	if p, ok := e.results[workerKey{name, k}]; ok && p.id == id {
		return p.r
	}
	return Unknown
}

func restartable(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

func (w *worker) event(pod *v1.Pod, typ, reason, msg string) {
	if w.m.o.Recorder == nil {
		return
	}
	w.m.o.Recorder.Event(ContainerRef(pod, w.container.Name), typ, reason, msg)
}

// ContainerRef is the object of a container's Events, as kubelet makes it:
// the pod with the container's field path.
func ContainerRef(pod *v1.Pod, name string) *v1.ObjectReference {
	path := fmt.Sprintf("spec.containers{%s}", name)
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			path = fmt.Sprintf("spec.initContainers{%s}", name)
		}
	}
	return &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, FieldPath: path,
	}
}
