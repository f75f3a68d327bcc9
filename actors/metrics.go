package actors

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

// Metrics are the shell's Prometheus instruments, on a registry of their own
// (no global state, so tests and the simulator can run several systems).
// Label values are verbs, results and kinds: never an id or a secret.
type Metrics struct {
	Registry  *prometheus.Registry
	Callbacks *prometheus.CounterVec
	Decision  prometheus.Histogram
	// Runtime are the runtime's own: commit latency, mailbox depth,
	// activations, restarts, passivations.
	Runtime *runtime.Metrics
	// Forwarded counts requests a cluster node passed to the owner of
	// their entity, by entity kind.
	Forwarded *prometheus.CounterVec
	Malformed *prometheus.CounterVec
	// Failures counts marquees that failed, by the rule that failed them;
	// Retries the retries warden made itself, by kind.
	Failures *prometheus.CounterVec
	Retries  *prometheus.CounterVec
	// Drivers times every driver call by driver and outcome.
	Drivers *prometheus.HistogramVec
	// Pool gauges: reserved, queued and limit per pool.
	PoolReserved *prometheus.GaugeVec
	PoolQueued   *prometheus.GaugeVec
	PoolLimit    *prometheus.GaugeVec
	// EnvTransitions counts environment state changes by the state
	// entered; DriftFound and DriftResolved the drift records.
	EnvTransitions *prometheus.CounterVec
	DriftFound     prometheus.Counter
	DriftResolved  prometheus.Counter
	// HTTPRequests and HTTPSeconds are the API's requests by route
	// pattern (never a raw path: ids stay out of labels) and status code.
	HTTPRequests *prometheus.CounterVec
	HTTPSeconds  *prometheus.HistogramVec
}

// NewMetrics registers the instruments.
func NewMetrics() *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 16) // 100µs .. ~3s
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_callbacks_total",
			Help: "Terraform callbacks by verb and result."}, []string{"verb", "result"}),
		Decision: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "warden_decision_seconds",
			Help: "Time from a callback handed to its marquee to its durable decision.", Buckets: buckets}),
		Runtime: runtime.NewMetrics(),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_cluster_forwarded_total",
			Help: "Requests this node forwarded to the owner of their entity's shard, by kind."}, []string{"kind"}),
		Malformed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_malformed_records_total",
			Help: "Stored records that failed to decode or validate, by family."}, []string{"family"}),
	}
	m.Failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_marquee_failures_total",
		Help: "Marquees that failed, by the rule that failed them (M15, M16, M18, M19, M21, M22, M5)."}, []string{"rule"})
	m.Retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_retries_total",
		Help: "Retries warden made itself, by kind: stuck (M21), bootstrap (M19), environment (E9), internal_write."}, []string{"kind"})
	m.Drivers = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "warden_driver_seconds",
		Help:    "Driver call durations by driver (dispatch, bootstrap, control_plane, capability, notify) and outcome (ok, error).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"driver", "outcome"})
	m.PoolReserved = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "warden_pool_reserved", Help: "Slots held, per pool (A1)."}, []string{"pool"})
	m.PoolQueued = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "warden_pool_queued", Help: "Jobs waiting for a slot, per pool (A4)."}, []string{"pool"})
	m.PoolLimit = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "warden_pool_limit", Help: "The pool's limit (A1)."}, []string{"pool"})
	m.EnvTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_environment_transitions_total",
		Help: "Environment state changes, by the state entered."}, []string{"state"})
	m.DriftFound = prometheus.NewCounter(prometheus.CounterOpts{Name: "warden_drift_found_total", Help: "Drift records made (E15)."})
	m.DriftResolved = prometheus.NewCounter(prometheus.CounterOpts{Name: "warden_drift_resolved_total", Help: "Drift records resolved (O2)."})
	m.HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_http_requests_total",
		Help: "HTTP requests by route pattern and status code."}, []string{"route", "code"})
	m.HTTPSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "warden_http_request_seconds",
		Help: "HTTP request durations by route pattern.", Buckets: buckets}, []string{"route"})
	m.zeroes()
	m.Registry.MustRegister(m.HTTPRequests, m.HTTPSeconds)
	m.Registry.MustRegister(m.Failures, m.Retries, m.Drivers, m.PoolReserved, m.PoolQueued, m.PoolLimit, m.EnvTransitions, m.DriftFound, m.DriftResolved)
	m.Registry.MustRegister(m.Callbacks, m.Decision, m.Forwarded, m.Malformed)
	m.Registry.MustRegister(processCollectors()...)
	m.Registry.MustRegister(m.Runtime.Collectors()...)
	return m
}

// The label values the alerting rules read (examples/prometheus), each
// made to exist at 0 from start-up: Prometheus's increase() over a series
// born at 1 is 0, so the first failure after every start would go
// unalerted.
var (
	failureRules  = []string{"M5", "M15", "M16", "M18", "M19", "M21", "M22"}
	retryKinds    = []string{"stuck", "bootstrap", "environment", "internal_write"}
	driverKinds   = []string{"dispatch", "bootstrap", "control_plane", "capability", "notify"}
	driverOutcome = []string{"ok", "error"}
)

func (m *Metrics) zeroes() {
	for _, r := range failureRules {
		m.Failures.WithLabelValues(r).Add(0)
	}
	for _, k := range retryKinds {
		m.Retries.WithLabelValues(k).Add(0)
	}
	for _, d := range driverKinds {
		for _, o := range driverOutcome {
			m.Drivers.WithLabelValues(d, o)
		}
	}
}

// RegisterStorage adds the store's health and its disk's space (S2, S9):
// read when scraped, so a failure shows at the next scrape and space is
// never stale.
func (m *Metrics) RegisterStorage(h *persistence.Health, reserve persistence.Reserve) {
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	space := func(f func(persistence.Space) float64) func() float64 {
		return func() float64 {
			sp, err := persistence.FreeSpace(reserve.Dir)
			if err != nil {
				return 0
			}
			return f(sp)
		}
	}
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "warden_storage_failed",
			Help: "1 once a write or sync failed and the store sealed; warden then stops (S1, S3)."},
			func() float64 { return flag(h.Failed() != nil) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "warden_storage_read_only",
			Help: "1 while the store is open read-only because its disk cannot be written (S4)."},
			func() float64 { return flag(h.ReadOnly() != nil) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "warden_storage_free_bytes",
			Help: "Free space of the data directory's filesystem (S9)."},
			space(func(sp persistence.Space) float64 { return float64(sp.Free) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "warden_storage_reserve_bytes",
			Help: "The space reserve: below it new work is refused with 507 storage_low (S9)."},
			space(func(sp persistence.Space) float64 { return float64(reserve.Of(sp.Total)) })),
	)
}

// processCollectors are the Go runtime's and the process's collectors,
// made once: they describe the process, not a system, and making the Go
// collector lists every runtime metric (the simulator starts a system per
// simulated restart). A collector may be registered with many registries.
var processCollectors = sync.OnceValue(func() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
})
