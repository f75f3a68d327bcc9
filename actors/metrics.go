package actors

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the shell's Prometheus instruments, on a registry of their own
// (no global state, so tests and the simulator can run several systems).
// Label values are verbs, results and kinds: never an id or a secret.
type Metrics struct {
	Registry     *prometheus.Registry
	Callbacks    *prometheus.CounterVec
	Decision     prometheus.Histogram
	Persist      prometheus.Histogram
	MailboxDepth prometheus.Gauge
	Actors       *prometheus.CounterVec
	Restarts     *prometheus.CounterVec
	Passivations *prometheus.CounterVec
	Malformed    *prometheus.CounterVec
}

// NewMetrics registers the instruments.
func NewMetrics() *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 16) // 100µs .. ~3s
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_callbacks_total",
			Help: "Terraform callbacks by verb and result."}, []string{"verb", "result"}),
		Decision: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "warden_decision_seconds",
			Help: "Time from a callback reaching its actor to its durable decision.", Buckets: buckets}),
		Persist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "warden_persist_seconds",
			Help: "Time to commit one synced transition batch.", Buckets: buckets}),
		MailboxDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "warden_mailbox_depth",
			Help: "Messages routed to entity actors and not yet handled."}),
		Actors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_activations_total",
			Help: "Entity actors activated, by kind."}, []string{"kind"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_restarts_total",
			Help: "Entity actor failures handled by the supervisor, by kind."}, []string{"kind"}),
		Passivations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_passivations_total",
			Help: "Idle entity actors stopped to release memory, by kind."}, []string{"kind"}),
		Malformed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_malformed_records_total",
			Help: "Stored records that failed to decode or validate, by family."}, []string{"family"}),
	}
	m.Registry.MustRegister(m.Callbacks, m.Decision, m.Persist, m.MailboxDepth, m.Actors, m.Restarts, m.Passivations, m.Malformed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
