package actors

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
)

// The census of stored entities: marquees by lifecycle and serving and by
// status class, environments by state, open drift. One count serves the
// metrics and the console's counts. Counting reads every
// record, so it runs at most once per censusEvery, only when asked, in the
// background: a reader is answered from the last count (only the very
// first waits for one), and its age is said beside it.

// censusEvery bounds how often the census reads the store. Environments
// are counted apart, at most every envCensusEvery and while the reader
// waits: they are few beside the marquees, and a preview that left ready
// must not stay ready on /metrics for a census period.
const (
	censusEvery    = 10 * time.Second
	envCensusEvery = 2 * time.Second
)

// Counts is one census.
type Counts struct {
	At time.Time
	// Live is the number of marquees that are not tombstones.
	Live int
	// Classes counts live marquees per status class, parked included.
	Classes map[string]int
	// Marquees counts every marquee by lifecycle ("tombstone", "byo") and
	// serving.
	Marquees map[[2]string]int
	// Environments counts environments by state; OpenDrift those with a
	// drift waiting for an outcome.
	Environments map[string]int
	OpenDrift    int
}

type census struct {
	sys                                *System
	marquees, envs, drift, parked, age *prometheus.Desc
	mu                                 sync.Mutex
	counting                           bool
	last                               Counts
	// The environments' count: its own lock, time and numbers.
	envMu     sync.Mutex
	envAt     time.Time
	envStates map[string]int
	openDrift int
}

func newCensus(s *System) *census {
	return &census{sys: s,
		marquees: prometheus.NewDesc("warden_marquees", "Stored marquees by lifecycle (tombstone for reaped ones) and serving.", []string{"lifecycle", "serving"}, nil),
		envs:     prometheus.NewDesc("warden_environments", "Stored environments by state.", []string{"state"}, nil),
		drift:    prometheus.NewDesc("warden_drift_open", "Environments with drift waiting for an outcome.", nil, nil),
		parked:   prometheus.NewDesc("warden_actors_parked", "Entity actors parked after failing too often.", nil, nil),
		age:      prometheus.NewDesc("warden_census_age_seconds", "Age of the stored-entity counts above.", nil, nil),
	}
}

// Census is the last count of stored entities, counted again in the
// background when it is older than censusEvery (the first call waits).
func (s *System) Census() Counts { return s.census.current() }

func (c *census) current() Counts {
	clk := c.sys.cfg.Clock
	c.mu.Lock()
	first := c.last.At.IsZero()
	stale := (first || clk.Since(c.last.At) >= censusEvery) && !c.counting
	if stale {
		c.counting = true
	}
	c.mu.Unlock()
	switch {
	case first && stale:
		c.count()
	case stale:
		go c.count()
	}
	c.mu.Lock()
	n := c.last
	c.mu.Unlock()
	n.Environments, n.OpenDrift = c.environments()
	return n
}

// environments counts the stored environments by state, and those with
// drift waiting for an outcome, when the last count is older than
// envCensusEvery; a failed count keeps the last one.
func (c *census) environments() (map[string]int, int) {
	clk := c.sys.cfg.Clock
	c.envMu.Lock()
	defer c.envMu.Unlock()
	if c.envStates == nil || clk.Since(c.envAt) >= envCensusEvery {
		states, open := map[string]int{}, 0
		_, _, _, err := record.ListEnvironments(c.sys.cfg.Store, "", 0, 0, func(e environment.Env) bool {
			states[string(e.State)]++
			if slices.ContainsFunc(e.Drift, func(d environment.Drift) bool { return d.Outcome == "" }) {
				open++
			}
			return false
		})
		if err != nil {
			c.sys.warnStore("census of stored environments failed", err)
		} else {
			c.envStates, c.openDrift, c.envAt = states, open, clk.Now()
		}
	}
	out := make(map[string]int, len(c.envStates))
	for k, v := range c.envStates {
		out[k] = v
	}
	return out, c.openDrift
}

func (c *census) count() {
	s := c.sys
	m, now := s.cfg.Machine, s.cfg.Clock.Now()
	n := Counts{Classes: map[string]int{}, Marquees: map[[2]string]int{}}
	parked := map[string]bool{}
	for _, a := range s.rt.Actors() {
		if a.Kind == "marquee" && a.Parked {
			parked[a.ID] = true
		}
	}
	_, _, _, errM := record.ListMarquees(s.cfg.Store, "", 0, 0, func(st marquee.State) bool {
		n.Marquees[[2]string{lifecycleName(st), string(st.Serving)}]++
		if st.Tombstone != nil {
			return false
		}
		n.Live++
		for _, cl := range m.Status(st, now).Classes {
			n.Classes[cl]++
		}
		if parked[st.ID] {
			n.Classes["parked"]++
		}
		return false
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting = false
	if errM != nil {
		s.warnStore("census of stored marquees failed", errM)
		return
	}
	n.At = now
	c.last = n
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

func (c *census) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.marquees
	ch <- c.envs
	ch <- c.drift
	ch <- c.parked
	ch <- c.age
}

func (c *census) Collect(ch chan<- prometheus.Metric) {
	n := c.current()
	for k, v := range n.Marquees {
		ch <- prometheus.MustNewConstMetric(c.marquees, prometheus.GaugeValue, float64(v), k[0], k[1])
	}
	for k, v := range n.Environments {
		ch <- prometheus.MustNewConstMetric(c.envs, prometheus.GaugeValue, float64(v), k)
	}
	ch <- prometheus.MustNewConstMetric(c.drift, prometheus.GaugeValue, float64(n.OpenDrift))
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(c.sys.rt.Parked()))
	if !n.At.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, c.sys.cfg.Clock.Since(n.At).Seconds())
	}
}
