package pods

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	workers       prometheus.Gauge
	syncs         *prometheus.CounterVec // result: ok, error
	startDuration prometheus.Histogram
	starts        *prometheus.CounterVec // kind: new, restart
	rejected      *prometheus.CounterVec // reason
	// kubelet's own (pkg/kubelet/metrics), under its names: a pod with
	// hostUsers: false whose sandbox a sync makes, and such a sync that
	// ended in an error (userNamespacedStart).
	usernsStarted prometheus.Counter
	usernsErrors  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns = "nodeagent"
	const sub = "pods"
	m := &metrics{
		workers: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "workers", Help: "Pod workers running (one per pod the agent knows)."}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "syncs_total", Help: "Pod syncs, by result (ok, error)."}, []string{"result"}),
		startDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "start_duration_seconds", Help: "Time from the agent first seeing a pod to all its containers running (pods that reach it).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "container_starts_total", Help: "Containers started, by kind (new: first attempt, restart: a later one)."}, []string{"kind"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "rejected_total", Help: "Pods refused at admission, by reason."}, []string{"reason"}),
		usernsStarted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubelet",
			Name: "started_user_namespaced_pods_total",
			Help: "Cumulative number of pods with user namespaces started. This metric will only be collected on Linux."}),
		usernsErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubelet",
			Name: "started_user_namespaced_pods_errors_total",
			Help: "Cumulative number of errors when starting pods with user namespaces. This metric will only be collected on Linux."}),
	}
	if reg != nil {
		reg.MustRegister(m.workers, m.syncs, m.startDuration, m.starts, m.rejected, m.usernsStarted, m.usernsErrors)
	}
	return m
}
