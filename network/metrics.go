package network

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the CNI runtime (nodeagent_network_*).
type metrics struct {
	ops      *prometheus.CounterVec   // operation: add, del, check; result: ok, error
	duration *prometheus.HistogramVec // operation
	ready    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "nodeagent", "network"
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "operations_total", Help: "CNI operations on pods (add, del, check), by result (ok, error)."}, []string{"operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "operation_duration_seconds", Help: "Duration of CNI operations on pods, all plugins of the network (as kubelet's network_plugin_operations_duration_seconds).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"operation"}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "ready", Help: "1 while a CNI network configuration is usable, else 0."}),
	}
	if reg != nil {
		reg.MustRegister(m.ops, m.duration, m.ready)
	}
	return m
}

func (m *metrics) observe(op string, start, end time.Time, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.ops.WithLabelValues(op, result).Inc()
	m.duration.WithLabelValues(op).Observe(end.Sub(start).Seconds())
}
