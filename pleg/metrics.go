package pleg

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	relistDuration  prometheus.Histogram
	relistInterval  prometheus.Histogram
	relistFailures  prometheus.Counter
	events          *prometheus.CounterVec // type, source
	deliveryLatency prometheus.Histogram
	expectations    *prometheus.CounterVec // result: met, expired
	fallbacks       *prometheus.CounterVec // source
	fallbackActive  prometheus.Gauge
	discarded       *prometheus.CounterVec // consumer
	inspections     *prometheus.CounterVec // result: ok, notfound, error
	inspectDuration prometheus.Histogram
	sourceHealthy   *prometheus.GaugeVec // source
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns = "nodeagent"
	const sub = "pleg"
	m := &metrics{
		relistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "relist_duration_seconds", Help: "Duration of a relist (list + diff).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "relist_interval_seconds", Help: "Time between the starts of two relists.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 12)}),
		relistFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "relist_failures_total", Help: "Relists that failed."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "events_total", Help: "Pod lifecycle events generated, by type and detecting source."}, []string{"type", "source"}),
		deliveryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "event_delivery_latency_seconds", Help: "Time from the upstream signal (containerd event, inotify event, relist start) to delivery of the pod lifecycle event.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		expectations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "expectations_total", Help: "Expected events, by result (met, expired)."}, []string{"result"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "fallbacks_total", Help: "Times an event source failed and the PLEG fell back to fast relisting, by source."}, []string{"source"}),
		fallbackActive: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "fallback_active", Help: "1 while the PLEG relists at the fallback period because an event source failed."}),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "discarded_events_total", Help: "Events dropped because a consumer's channel was full, by consumer (watch, stream)."}, []string{"consumer"}),
		inspections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "inspections_total", Help: "Targeted container inspections, by result (ok, notfound, error)."}, []string{"result"}),
		inspectDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "inspection_duration_seconds", Help: "Duration of a targeted container inspection.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		sourceHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "source_healthy", Help: "1 while the event source works, by source."}, []string{"source"}),
	}
	if reg != nil {
		reg.MustRegister(m.relistDuration, m.relistInterval, m.relistFailures, m.events, m.deliveryLatency,
			m.expectations, m.fallbacks, m.fallbackActive, m.discarded, m.inspections, m.inspectDuration, m.sourceHealthy)
	}
	return m
}
