package actors

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
)

// The census of stored entities: marquees by lifecycle and serving and by
// status class, environments by state, open drift. One count serves the
// metrics (O12) and the console's counts (O7). Counting reads every
// record, so it runs at most once per censusEvery, only when asked, in the
// background: a reader is answered from the last count (only the very
// first waits for one), and its age is said beside it.

// censusEvery bounds how often the census reads the store.
const censusEvery = 10 * time.Second

// Counts is one census.
type Counts struct {
	At time.Time
	// Live is the number of marquees that are not tombstones.
	Live int
	// Classes counts live marquees per status class (O4), parked included.
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
	clk := c.sys.clock()
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
	defer c.mu.Unlock()
	return c.last
}

func (c *census) count() {
	s := c.sys
	m, now := s.cfg.Machine, s.clock().Now()
	n := Counts{Classes: map[string]int{}, Marquees: map[[2]string]int{}, Environments: map[string]int{}}
	parked := map[string]bool{}
	for _, a := range s.rt.Actors() {
		if a.Kind == "marquee" && a.Parked {
			parked[a.ID] = true
		}
	}
	_, _, _, errM := listMarquees(s.cfg.Store, "", 0, 0, func(st marquee.State) bool {
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
	_, _, _, errE := listEnvs(s.cfg.Store, "", 0, 0, func(e environment.Env) bool {
		n.Environments[string(e.State)]++
		for _, d := range e.Drift {
			if d.Outcome == "" {
				n.OpenDrift++
				break
			}
		}
		return false
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counting = false
	if errM != nil || errE != nil {
		s.warnStore("census of stored entities failed", errors.Join(errM, errE))
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
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, c.sys.clock().Since(n.At).Seconds())
	}
}
