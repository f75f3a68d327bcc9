package runtime

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the runtime's own instruments; the process registers them
// (Collectors) beside its others. Label values are kinds, never ids.
type Metrics struct {
	Persist      prometheus.Histogram
	Activations  *prometheus.CounterVec
	Restarts     *prometheus.CounterVec
	Passivations *prometheus.CounterVec
	// load are the gauges of what is in flight, read from the runtime
	// that started last with these metrics when scraped (a restarted
	// system's runtime replaces its predecessor's), so that the hot path
	// counts nothing for them.
	load    []prometheus.Collector
	current atomic.Pointer[Runtime]
}

// NewMetrics makes the instruments, unregistered.
func NewMetrics() *Metrics {
	m := &Metrics{
		Persist: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "warden_persist_seconds",
			Help: "Time to commit one synced transition batch.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		Activations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_activations_total",
			Help: "Entity actors activated, by kind."}, []string{"kind"}),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_restarts_total",
			Help: "Entity actor failures handled by the supervisor, by kind."}, []string{"kind"}),
		Passivations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_actor_passivations_total",
			Help: "Idle entity actors stopped to release memory, by kind."}, []string{"kind"}),
	}
	gauge := func(name, help string, of func(Load) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return of(m.loadNow()) })
	}
	m.load = []prometheus.Collector{
		gauge("warden_mailbox_depth", "Messages routed to entity actors and not yet handled (parked actors' excluded).",
			func(l Load) float64 { return float64(l.Queued) }),
		gauge("warden_actors_live", "Entity actors alive (activated and not passivated).",
			func(l Load) float64 { return float64(l.Live) }),
		gauge("warden_effects_in_flight", "Effects started and not finished: calls to the outside world.",
			func(l Load) float64 { return float64(l.Effects) }),
		gauge("warden_internal_retries_pending", "Internal events whose write failed, waiting to be tried again.",
			func(l Load) float64 { return float64(l.Retries) }),
	}
	return m
}

func (m *Metrics) loadNow() Load {
	if rt := m.current.Load(); rt != nil {
		return rt.Load()
	}
	return Load{}
}

// Collectors are the instruments to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.Persist, m.Activations, m.Restarts, m.Passivations}, m.load...)
}
