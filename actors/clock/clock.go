// Package clock is the one place warden reads time from. Shells hold a Clock;
// pure machines take time as an argument. Tests and the simulator use Manual,
// which only moves when told to.
package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Clock tells the time and arms timers. Every reader of time in the shell
// goes through one (decisions, deadlines, durations in metrics, the
// cluster's heartbeats, the console's sessions), so that a test or the
// simulator can own time.
type Clock interface {
	Now() time.Time
	// Since is the time elapsed since t: Now().Sub(t).
	Since(t time.Time) time.Duration
	// AfterFunc calls f in its own goroutine (Real) or from Advance (Manual)
	// once d has passed. The returned stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
	// NewTicker delivers the time on its channel every d (dropping ticks
	// a slow reader missed, as time.Ticker does) until stopped.
	NewTicker(d time.Duration) Ticker
}

// Ticker is a Clock's time.Ticker.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the wall clock.
type Real struct{}

// Now keeps the monotonic reading, which Since and the timers use. A
// deadline read back from the store has none: comparing with it uses the
// wall clock, so a step of the wall clock moves stored deadlines as it
// would across a restart. warden's processes set time.Local to UTC at
// start, so its times print in UTC all the same.
func (Real) Now() time.Time { return time.Now() }

// Since uses the monotonic reading of t where it has one.
func (Real) Since(t time.Time) time.Duration { return time.Since(t) }

func (Real) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Manual is a clock that moves only when Advance or Set is called. Timers fire
// synchronously inside Advance, in due order (ties in arming order), so a run
// driven by a Manual clock is repeatable.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap // armed timers; a stopped one leaves when it reaches the top
	live   int       // armed timers not stopped
}

type manualTimer struct {
	at      time.Time
	seq     uint64
	f       func()
	stopped bool
}

// timerHeap orders timers by due time, ties in arming order: a simulated
// world arms thousands, and sorting them all for every one that fired was
// most of the simulator's clock time.
type timerHeap []*manualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(*manualTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
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
	heap.Push(&m.timers, t)
	m.live++
	if len(m.timers) > 2*m.live+1024 {
		m.compactLocked() // timers stopped long before they are due
	}
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.stopLocked(t)
	}
}

func (m *Manual) Since(t time.Time) time.Duration { return m.Now().Sub(t) }

// NewTicker ticks from Advance: each period passed puts the time on the
// channel if it has room (one tick is kept, as time.Ticker keeps one).
func (m *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive ticker period")
	}
	t := &manualTicker{c: make(chan time.Time, 1)}
	var arm func()
	arm = func() {
		stop := m.AfterFunc(d, func() {
			select {
			case t.c <- m.Now():
			default:
			}
			t.mu.Lock()
			done := t.stopped
			t.mu.Unlock()
			if !done {
				arm()
			}
		})
		t.mu.Lock()
		t.stop = stop
		t.mu.Unlock()
	}
	arm()
	return t
}

type manualTicker struct {
	c       chan time.Time
	mu      sync.Mutex
	stop    func() bool
	stopped bool
}

func (t *manualTicker) C() <-chan time.Time { return t.c }

func (t *manualTicker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.stop != nil {
		t.stop()
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
		next := m.topLocked()
		if next == nil || next.at.After(t) {
			m.now = t.UTC()
			m.mu.Unlock()
			return
		}
		m.stopLocked(next)
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
	if next := m.topLocked(); next != nil {
		return next.at, true
	}
	return time.Time{}, false
}

// Pending is the number of armed timers that have not fired or been stopped.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live
}

// topLocked is the earliest armed timer, stopped ones on top dropped.
func (m *Manual) topLocked() *manualTimer {
	for len(m.timers) > 0 && m.timers[0].stopped {
		heap.Pop(&m.timers)
	}
	if len(m.timers) == 0 {
		return nil
	}
	return m.timers[0]
}

// compactLocked drops the stopped timers.
func (m *Manual) compactLocked() {
	live := m.timers[:0]
	for _, t := range m.timers {
		if !t.stopped {
			live = append(live, t)
		}
	}
	clear(m.timers[len(live):])
	m.timers = live
	heap.Init(&m.timers)
}

// stopLocked stops t, reporting whether it was armed.
func (m *Manual) stopLocked(t *manualTimer) bool {
	if t.stopped {
		return false
	}
	t.stopped = true
	m.live--
	return true
}

// Sleeper is a clock that says how its callers wait: the simulator's,
// whose one thread cannot block for time to pass, refuses.
type Sleeper interface {
	Sleep(ctx context.Context, d time.Duration) error
}

// Sleep waits d on c, or until ctx ends (its error). A Sleeper decides
// for itself.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if s, ok := c.(Sleeper); ok {
		return s.Sleep(ctx, d)
	}
	done := make(chan struct{})
	stop := c.AfterFunc(d, func() { close(done) })
	defer stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
