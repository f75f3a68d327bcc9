package runtime

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the runtime's own instruments; the process registers them
// (Collectors) beside its others. Label values are kinds, never ids.
type Metrics struct {
	Persist      prometheus.Histogram
	MailboxDepth prometheus.Gauge
	Activations  *prometheus.CounterVec
	Restarts     *prometheus.CounterVec
	Passivations *prometheus.CounterVec
}

// NewMetrics makes the instruments, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		Persist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "warden_persist_seconds",
			Help: "Time to commit one synced transition batch.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		MailboxDepth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "warden_mailbox_depth",
			Help: "Messages routed to entity actors and not yet handled."}),
		Activations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_activations_total",
			Help: "Entity actors activated, by kind."}, []string{"kind"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_restarts_total",
			Help: "Entity actor failures handled by the supervisor, by kind."}, []string{"kind"}),
		Passivations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_passivations_total",
			Help: "Idle entity actors stopped to release memory, by kind."}, []string{"kind"}),
	}
}

// Collectors are the instruments to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Persist, m.MailboxDepth, m.Activations, m.Restarts, m.Passivations}
}
