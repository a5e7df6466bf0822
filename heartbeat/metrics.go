package heartbeat

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Metrics are the heartbeat's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	renewDuration  prometheus.Histogram
	attemptLatency prometheus.Histogram
	attempts       *prometheus.CounterVec
	failures       prometheus.Counter
	lastRenew      prometheus.Gauge
	duration       prometheus.Gauge
}

// NewMetrics registers the heartbeat metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		renewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nodeagent_lease_renew_duration_seconds", Buckets: buckets,
			Help: "Time from the start of a successful lease renewal to its success, retries included.",
		}),
		attemptLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nodeagent_lease_renew_attempt_duration_seconds", Buckets: buckets,
			Help: "Latency of single lease renewal attempts, successful or not.",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodeagent_lease_renew_attempts_total",
			Help: "Lease renewal attempts by result (success, conflict, not_found, timeout, error).",
		}, []string{"result"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodeagent_lease_renew_failures_total",
			Help: "Lease renewals in which every attempt failed.",
		}),
		lastRenew: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeagent_lease_last_renew_timestamp_seconds",
			Help: "Unix time of the last successful lease renewal.",
		}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodeagent_lease_duration_seconds",
			Help: "The lease duration in force (renewals happen every quarter of it).",
		}),
	}
	for _, r := range []string{"success", "conflict", "not_found", "timeout", "error"} {
		m.attempts.WithLabelValues(r)
	}
	reg.MustRegister(m.renewDuration, m.attemptLatency, m.attempts, m.failures, m.lastRenew, m.duration)
	return m
}

func attemptResult(err error) string {
	switch {
	case err == nil:
		return "success"
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsNotFound(err):
		return "not_found"
	case errors.Is(err, errAttemptTimeout), errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return "timeout"
	}
	return "error"
}

func (m *Metrics) observeAttempt(err error, d time.Duration) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(attemptResult(err)).Inc()
	m.attemptLatency.Observe(d.Seconds())
}

func (m *Metrics) observeRenewal(d time.Duration, now time.Time) {
	if m == nil {
		return
	}
	m.renewDuration.Observe(d.Seconds())
	m.lastRenew.Set(float64(now.UnixNano()) / 1e9)
}

func (m *Metrics) renewalFailed() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) setDuration(d time.Duration) {
	if m != nil {
		m.duration.Set(d.Seconds())
	}
}
