package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the server's Prometheus collectors. Each Server owns its own
// registry so that tests can run several servers in one process.
type Metrics struct {
	Registry *prometheus.Registry

	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	sseClients  prometheus.Gauge
	sseRejected *prometheus.CounterVec
	sseEvicted  *prometheus.CounterVec
	sseFrames   prometheus.Counter
	jobOutcomes *prometheus.CounterVec
}

// NewMetrics registers the collectors, plus Go runtime and process ones.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotkeeper_http_requests_total", Help: "HTTP requests by method, route and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "slotkeeper_http_request_duration_seconds", Help: "HTTP request latency (the stream route is excluded).",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		sseClients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slotkeeper_sse_clients", Help: "Connected SSE clients.",
		}),
		sseRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotkeeper_sse_rejected_total", Help: "SSE connections refused, by reason (cap, per_ip_cap, closed).",
		}, []string{"reason"}),
		sseEvicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotkeeper_sse_evictions_total", Help: "SSE clients disconnected by the server, by reason (lag, write_timeout, write_error, shutdown, reseed).",
		}, []string{"reason"}),
		sseFrames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slotkeeper_sse_changes_published_total", Help: "Change frames published to the SSE hub.",
		}),
		jobOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slotkeeper_job_outcomes_total", Help: "Jobs that reached a terminal state while this process ran, by kind and state.",
		}, []string{"kind", "state"}),
	}
	r.MustRegister(m.requests, m.duration, m.sseClients, m.sseRejected, m.sseEvicted, m.sseFrames, m.jobOutcomes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
