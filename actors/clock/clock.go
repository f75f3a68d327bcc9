// Package clock is the one place warden reads time from. Shells hold a Clock;
// pure machines take time as an argument. Tests and the simulator use Manual,
// which only moves when told to.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and arms timers. Every decision that depends on time
// goes through one, so that a test or the simulator can own time.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or from Advance (Manual)
	// once d has passed. The returned stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now().UTC() }

func (Real) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Manual is a clock that moves only when Advance or Set is called. Timers fire
// synchronously inside Advance, in due order (ties in arming order), so a run
// driven by a Manual clock is repeatable.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	seq     uint64
	f       func()
	stopped bool
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start.UTC()} }

func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *Manual) AfterFunc(d time.Duration, f func()) func() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	t := &manualTimer{at: m.now.Add(d), seq: m.seq, f: f}
	m.timers = append(m.timers, t)
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock forward by d, firing every timer that falls due on
// the way, each at its own due time.
func (m *Manual) Advance(d time.Duration) { m.Set(m.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing due timers in order.
func (m *Manual) Set(t time.Time) {
	for {
		m.mu.Lock()
		if t.Before(m.now) {
			m.mu.Unlock()
			return
		}
		next := m.nextDueLocked(t)
		if next == nil {
			m.now = t.UTC()
			m.mu.Unlock()
			return
		}
		next.stopped = true
		if next.at.After(m.now) {
			m.now = next.at
		}
		m.mu.Unlock()
		next.f()
	}
}

// Next returns the due time of the earliest armed timer.
func (m *Manual) Next() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	found := false
	for _, t := range m.timers {
		if !t.stopped && (!found || t.at.Before(next)) {
			next, found = t.at, true
		}
	}
	return next, found
}

// Pending is the number of armed timers that have not fired or been stopped.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

func (m *Manual) nextDueLocked(limit time.Time) *manualTimer {
	live := m.timers[:0]
	for _, t := range m.timers {
		if !t.stopped {
			live = append(live, t)
		}
	}
	m.timers = live
	sort.Slice(live, func(i, j int) bool {
		if !live[i].at.Equal(live[j].at) {
			return live[i].at.Before(live[j].at)
		}
		return live[i].seq < live[j].seq
	})
	if len(live) > 0 && !live[0].at.After(limit) {
		return live[0]
	}
	return nil
}
