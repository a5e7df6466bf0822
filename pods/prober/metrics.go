package prober

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Metrics are kubelet's prober metrics (pkg/kubelet/prober), which kubelet
// serves on the node API's /metrics/probes: prober_probe_total by
// probe_type, result, container, pod, namespace and pod_uid, and
// prober_probe_duration_seconds. A worker's series go when the worker
// ends (its pod or container is gone), as kubelet's. A nil *Metrics
// records nothing.
type Metrics struct {
	results  *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the prober metrics with reg; nil reg: none.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: "[BETA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help: "[ALPHA] Duration in seconds for a probe response.",
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
	reg.MustRegister(m.results, m.duration)
	return m
}

// probeLabels identify one worker's series.
type probeLabels struct {
	kind                           Kind
	container, pod, namespace, uid string
}

// Result names of prober_probe_total's result label (kubelet's).
const (
	resultSuccessful = "successful"
	resultFailed     = "failed"
	resultUnknown    = "unknown"
)

// observe counts one probe that ran (kubelet counts none for a probe that
// errored) and, for a success or an unknown result, its duration, as
// kubelet's worker does.
func (m *Metrics) observe(l probeLabels, r Result, took time.Duration) {
	if m == nil {
		return
	}
	name := resultUnknown
	switch r {
	case Success:
		name = resultSuccessful
	case Failure:
		name = resultFailed
	}
	m.results.WithLabelValues(l.kind.String(), name, l.container, l.pod, l.namespace, l.uid).Inc()
	if r != Failure {
		m.duration.WithLabelValues(l.kind.String(), l.container, l.pod, l.namespace).Observe(took.Seconds())
	}
}

// forget deletes a worker's series.
func (m *Metrics) forget(l probeLabels) {
	if m == nil {
		return
	}
	for _, r := range []string{resultSuccessful, resultFailed, resultUnknown} {
		m.results.DeleteLabelValues(l.kind.String(), r, l.container, l.pod, l.namespace, l.uid)
	}
	m.duration.DeleteLabelValues(l.kind.String(), l.container, l.pod, l.namespace)
}

func workerLabels(kind Kind, container, pod, namespace string, uid types.UID) probeLabels {
	return probeLabels{kind: kind, container: container, pod: pod, namespace: namespace, uid: string(uid)}
}
