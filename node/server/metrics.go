package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the node's Prometheus series. Every series lives in one
// registry (reg) that /metrics serves; nothing registers globally, so
// tests can make as many as they like.
type metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec   // by method and gRPC code
	errors   *prometheus.CounterVec   // failed requests by gRPC code
	latency  *prometheus.HistogramVec // by method
	appends  *prometheus.CounterVec   // append turns by result: stored, duplicate
	appended prometheus.Counter       // messages stored by appends

	batchCommands prometheus.Histogram
	batchBytes    prometheus.Histogram
	commitSeconds prometheus.Histogram
	commitErrors  prometheus.Counter
	asyncRetried  prometheus.Counter
	asyncLost     prometheus.Counter

	authFailures     prometheus.Counter
	authAuditDropped prometheus.Counter
	streamsRefused   prometheus.Counter     // past --grpc-max-streams-total
	remoteRejected   *prometheus.CounterVec // by reason
	recoveredPanics  *prometheus.CounterVec // by server: api, remote
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &metrics{reg: reg}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentstate_grpc_requests_total", Help: "gRPC requests served, by method and status code.",
	}, []string{"method", "code"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentstate_errors_total", Help: "Failed gRPC requests, by status code.",
	}, []string{"code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "agentstate_grpc_request_duration_seconds", Help: "gRPC request latency, by method.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"method"})
	m.appends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentstate_append_turns_total", Help: "Acknowledged append turns, by result (stored, duplicate).",
	}, []string{"result"})
	m.appended = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentstate_appended_messages_total", Help: "Messages stored by acknowledged appends (duplicates excluded).",
	})
	m.batchCommands = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "agentstate_audit_batch_commands", Help: "Commands per group-commit transaction.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	m.batchBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "agentstate_audit_batch_bytes", Help: "Estimated bytes written per group-commit transaction.",
		Buckets: prometheus.ExponentialBuckets(256, 4, 10),
	})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "agentstate_audit_commit_seconds", Help: "Latency of one group-commit transaction, fsync included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	m.commitErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentstate_audit_commit_errors_total", Help: "Group-commit transactions that rolled back.",
	})
	m.asyncRetried = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentstate_audit_async_retried_total", Help: "Async audit records whose transaction rolled back and that were queued again.",
	})
	m.asyncLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentstate_audit_async_lost_total", Help: "Async audit records that will never be stored.",
	})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentstate_auth_failures_total", Help: "Requests rejected for a missing or wrong bearer token.",
	})
	m.authAuditDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentstate_auth_failure_audit_dropped_total",
		Help: "auth_failure audit entries not written because of the rate limit or a full backlog (counted in the next entry).",
	})
	m.streamsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentstate_grpc_streams_refused_total", Help: "gRPC streams refused because --grpc-max-streams-total were open.",
	})
	m.remoteRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentstate_remote_rejected_total", Help: "Proto.Actor remote messages or streams the endpoint guard refused, by reason.",
	}, []string{"reason"})
	m.recoveredPanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentstate_recovered_panics_total", Help: "Panics recovered in request handlers, by server (api, remote).",
	}, []string{"server"})
	for _, c := range []prometheus.Collector{
		m.requests, m.errors, m.latency, m.appends, m.appended,
		m.batchCommands, m.batchBytes, m.commitSeconds, m.commitErrors, m.asyncRetried, m.asyncLost,
		m.authFailures, m.authAuditDropped, m.streamsRefused, m.remoteRejected, m.recoveredPanics,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		f(c)
	}
	return m
}

// BatchCommitted observes one group-commit transaction of the writer
// (its Observer hook). err non-nil means the transaction rolled back.
func (m *metrics) BatchCommitted(commands, bytes int, dur time.Duration, err error) {
	if err != nil {
		m.commitErrors.Inc()
		return
	}
	m.batchCommands.Observe(float64(commands))
	m.batchBytes.Observe(float64(bytes))
	m.commitSeconds.Observe(dur.Seconds())
}

// AsyncRetried counts async audit records queued again after a rollback.
func (m *metrics) AsyncRetried(entries int, _ error) { m.asyncRetried.Add(float64(entries)) }

// AsyncLost counts async audit records that will never be stored.
func (m *metrics) AsyncLost(entries int, _ error) { m.asyncLost.Add(float64(entries)) }

// gauges registers the series read from the running node at scrape time.
func (m *metrics) gauges(backlog func() int, backlogBytes func() int64, sessions, plans func() int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentstate_audit_backlog", Help: "Commands accepted by the writer and not yet answered.",
		}, func() float64 { return float64(backlog()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentstate_writer_backlog_bytes", Help: "Bytes of the commands accepted by the writer and not yet answered.",
		}, func() float64 { return float64(backlogBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentstate_active_actors", Help: "Live owner actors.", ConstLabels: prometheus.Labels{"kind": "session"},
		}, func() float64 { return float64(sessions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentstate_active_actors", Help: "Live owner actors.", ConstLabels: prometheus.Labels{"kind": "plan"},
		}, func() float64 { return float64(plans()) }),
	)
}

// clusterGauges registers a cluster member's series, read at scrape time:
// the members in its topology, the Router's retries (attempts known to
// have done nothing, sent again), and activations fenced by a newer one.
func (m *metrics) clusterGauges(members func() int, retries func() int64, fencedSessions, fencedPlans func() int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentstate_cluster_members", Help: "Members in this member's cluster topology, itself included.",
		}, func() float64 { return float64(members()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentstate_cluster_router_retries_total",
			Help: "Requests the cluster router sent again after an attempt known to have stored nothing (fenced or moving owner, lookup timeout, dead letter).",
		}, func() float64 { return float64(retries()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentstate_fenced_activations_total", Help: "Activations whose write the store fenced because a newer activation owns the id, by kind.",
			ConstLabels: prometheus.Labels{"kind": "session"},
		}, func() float64 { return float64(fencedSessions()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentstate_fenced_activations_total", Help: "Activations whose write the store fenced because a newer activation owns the id, by kind.",
			ConstLabels: prometheus.Labels{"kind": "plan"},
		}, func() float64 { return float64(fencedPlans()) }),
	)
}
