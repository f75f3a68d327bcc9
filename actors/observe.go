package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/persistence"
)

// Every durable transition is a log line (O11): at info when something a
// person cares about changed (a lifecycle, a serving status, a failure, an
// operator's action, drift found or resolved), at debug for routine steps
// such as an accepted progress callback. Lines carry ids, states, rules
// and operator names; never a secret (connection fields are not logged).

func (a *marqueeActor) observe(ev marquee.Event, before, next persistence.MarqueeRecord, rd marquee.Ready) {
	b, n := before.State, next.State
	m := a.sys.cfg.Metrics
	failed := n.Failure != nil && (b.Failure == nil || *b.Failure != *n.Failure)
	if failed {
		m.Failures.WithLabelValues(n.Failure.Rule).Inc()
	}
	if n.RetryCount > b.RetryCount {
		m.Retries.WithLabelValues("stuck").Inc()
	}
	bootstrapFailed := n.Bootstrap != nil && b.Bootstrap != nil && n.Bootstrap.Failures > b.Bootstrap.Failures
	if bootstrapFailed && n.Bootstrap.Failures <= a.sys.cfg.Machine.Config.BootstrapRetries {
		m.Retries.WithLabelValues("bootstrap").Inc()
	}
	var actor string
	for _, e := range rd.Records {
		if e.Source == marquee.SourceOperator && e.Actor != "" {
			actor = e.Actor
		}
	}
	changed := b.Lifecycle != n.Lifecycle || b.Serving != n.Serving || (b.Tombstone == nil) != (n.Tombstone == nil) || b.Generation != n.Generation
	level := slog.LevelDebug
	switch {
	case failed || bootstrapFailed:
		level = slog.LevelWarn
	case changed || actor != "" || (n.Downgrade != nil) != (b.Downgrade != nil) || !sameVeto(b.LastVeto, n.LastVeto):
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !a.sys.log.Enabled(ctx, level) {
		return // the webhook path's routine steps stop here, having built nothing
	}
	details := make([]string, 0, len(rd.Records))
	for _, e := range rd.Records {
		details = append(details, e.Detail)
	}
	attrs := []slog.Attr{slog.String("marquee", n.ID), slog.String("event", eventName(ev)), slog.Uint64("generation", n.Generation),
		slog.String("result", string(rd.Answer)), slog.String("detail", strings.Join(details, "; "))}
	if b.Lifecycle != n.Lifecycle {
		attrs = append(attrs, slog.String("lifecycle", fmt.Sprintf("%s -> %s", orNone(string(b.Lifecycle)), n.Lifecycle)))
	}
	if b.Serving != n.Serving {
		attrs = append(attrs, slog.String("serving", fmt.Sprintf("%s -> %s", orNone(string(b.Serving)), n.Serving)))
	}
	if actor != "" {
		attrs = append(attrs, slog.String("operator", actor))
	}
	if failed {
		attrs = append(attrs, slog.String("rule", n.Failure.Rule), slog.String("reason", n.Failure.Reason))
	}
	a.sys.log.LogAttrs(ctx, level, "marquee transition", attrs...)
}

func (a *envActor) observe(ev environment.Event, before, next persistence.EnvRecord, rd environment.Outcome) {
	b, n := before.Env, next.Env
	m := a.sys.cfg.Metrics
	ctx := context.Background()
	log := a.sys.log
	if b.State != n.State {
		m.EnvTransitions.WithLabelValues(string(n.State)).Inc()
	}
	found, resolved := driftChanges(b.Drift, n.Drift)
	for _, d := range found {
		m.DriftFound.Inc()
		log.Info("drift found", "environment", n.ID, "capability", d.Capability, "identity", d.Identity, "desired", d.Desired,
			"observed", d.Observed, "outcome", orNone(d.Outcome))
	}
	for _, d := range resolved {
		m.DriftResolved.Inc()
		log.Info("drift resolved", "environment", n.ID, "capability", d.Capability, "identity", d.Identity, "outcome", d.Outcome)
	}
	for _, au := range n.Audit[min(len(b.Audit), len(n.Audit)):] {
		log.Info("environment action", "environment", n.ID, "operator", au.Actor, "action", au.Action, "reason", au.Reason)
	}
	if f := n.LastFailure; f != nil && (b.LastFailure == nil || b.LastFailure.AttemptID != f.AttemptID || b.LastFailure.At != f.At) {
		if f.Retryable {
			m.Retries.WithLabelValues("environment").Inc()
		}
		log.Warn("environment step failed", "environment", n.ID, "transition", f.Transition, "category", f.Category, "retryable", f.Retryable,
			"needs", f.Needs, "message", f.Message)
	}
	level := slog.LevelDebug
	if _, created := ev.(environment.Create); created || b.State != n.State || (b.Tombstone == nil) != (n.Tombstone == nil) || b.Desired != n.Desired {
		level = slog.LevelInfo
	}
	if log.Enabled(ctx, level) {
		log.LogAttrs(ctx, level, "environment transition", slog.String("environment", n.ID), slog.String("event", eventName(ev)),
			slog.String("state", fmt.Sprintf("%s -> %s", orNone(string(b.State)), n.State)), slog.String("desired", n.Desired),
			slog.Uint64("generation", n.Generation), slog.String("note", rd.Answer.Note))
	}
}

// observeDriver times one driver call by driver and outcome (O12). The
// wall clock is right here: it measures real calls, and the simulator's
// runs leave the histogram unread.
func (s *System) observeDriver(driver string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s.cfg.Metrics.Drivers.WithLabelValues(driver, outcome).Observe(time.Since(start).Seconds())
}

func sameVeto(a, b *marquee.Veto) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// driftChanges are the drift records a step added and those it resolved.
func driftChanges(before, after []environment.Drift) (found, resolved []environment.Drift) {
	seen := map[string]environment.Drift{}
	for _, d := range before {
		seen[driftKey(d)] = d
	}
	for _, d := range after {
		old, ok := seen[driftKey(d)]
		switch {
		case !ok:
			found = append(found, d)
		case old.ResolvedAt.IsZero() && !d.ResolvedAt.IsZero():
			resolved = append(resolved, d)
		}
	}
	return found, resolved
}

func driftKey(d environment.Drift) string {
	return fmt.Sprintf("%s/%s/%d", d.Capability, d.Identity, d.DetectedAt.UnixNano())
}

// eventName is an event's type name without its package, for logs.
func eventName(ev any) string {
	s := fmt.Sprintf("%T", ev)
	return s[strings.LastIndex(s, ".")+1:]
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// stateCounts is the scrape-time census of stored entities (O12):
// marquees by lifecycle and serving, environments by state, open drift.
// Counting means reading every record, so it runs at most once per
// countEvery, only when something scrapes, and a scrape in between is
// answered from the last count (its age is exported beside it).
type stateCounts struct {
	sys                                *System
	marquees, envs, drift, parked, age *prometheus.Desc
	mu                                 sync.Mutex
	counting                           bool
	at                                 time.Time
	byLifecycle                        map[[2]string]float64
	byState                            map[string]float64
	openDrift                          float64
}

// countEvery bounds how often the census reads the store.
const countEvery = 30 * time.Second

func newStateCounts(s *System) *stateCounts {
	return &stateCounts{sys: s,
		marquees: prometheus.NewDesc("warden_marquees", "Stored marquees by lifecycle (tombstone for reaped ones) and serving.", []string{"lifecycle", "serving"}, nil),
		envs:     prometheus.NewDesc("warden_environments", "Stored environments by state.", []string{"state"}, nil),
		drift:    prometheus.NewDesc("warden_drift_open", "Environments with drift waiting for an outcome.", nil, nil),
		parked:   prometheus.NewDesc("warden_actors_parked", "Entity actors parked after failing too often.", nil, nil),
		age:      prometheus.NewDesc("warden_census_age_seconds", "Age of the stored-entity counts above.", nil, nil),
	}
}

func (c *stateCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.marquees
	ch <- c.envs
	ch <- c.drift
	ch <- c.parked
	ch <- c.age
}

func (c *stateCounts) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	first := c.at.IsZero()
	stale := time.Since(c.at) > countEvery && !c.counting
	if stale {
		c.counting = true
	}
	c.mu.Unlock()
	switch {
	case first && stale:
		c.count() // the first scrape waits for a count; later ones never do
	case stale:
		go c.count()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.byLifecycle {
		ch <- prometheus.MustNewConstMetric(c.marquees, prometheus.GaugeValue, v, k[0], k[1])
	}
	for k, v := range c.byState {
		ch <- prometheus.MustNewConstMetric(c.envs, prometheus.GaugeValue, v, k)
	}
	ch <- prometheus.MustNewConstMetric(c.drift, prometheus.GaugeValue, c.openDrift)
	parked := 0
	for _, a := range c.sys.reg.snapshot() {
		if a.Parked {
			parked++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(parked))
	if !c.at.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, time.Since(c.at).Seconds())
	}
}

func (c *stateCounts) count() {
	byLifecycle, byState := map[[2]string]float64{}, map[string]float64{}
	var openDrift float64
	store := c.sys.cfg.Store
	_, _, _, errM := store.ListMarquees("", 0, 0, func(st marquee.State) bool {
		byLifecycle[[2]string{lifecycleName(st), string(st.Serving)}]++
		return false
	})
	_, _, _, errE := store.ListEnvs("", 0, 0, func(e environment.Env) bool {
		byState[string(e.State)]++
		for _, d := range e.Drift {
			if d.Outcome == "" {
				openDrift++
				break
			}
		}
		return false
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting = false
	if errM != nil || errE != nil {
		c.sys.warnStore("census of stored entities failed", errors.Join(errM, errE))
		return
	}
	c.byLifecycle, c.byState, c.openDrift, c.at = byLifecycle, byState, openDrift, time.Now()
}

func lifecycleName(st marquee.State) string {
	switch {
	case st.Tombstone != nil:
		return "tombstone"
	case st.Kind == marquee.BYO:
		return "byo"
	}
	return string(st.Lifecycle)
}
