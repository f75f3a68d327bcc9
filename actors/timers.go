package actors

import (
	"sync"
	"time"
)

// wakeTimers holds at most one armed timer per entity: the in-memory twin
// of the wake index in Pebble. The System owns them, not the actors, so a
// passivated entity's deadline still fires and reactivates it; the wake
// index covers the same deadline across a restart (M23). Firing only routes
// a wake message: the actor checks against its snapshot what is really due,
// so an early, late or repeated wake never fires a deadline twice.
type wakeTimers struct {
	mu            sync.Mutex
	timers        map[key]armed
	sweepStop     func() bool
	reconcileStop func() bool
}

type armed struct {
	at   time.Time
	stop func() bool
}

// arm sets key's timer to at, replacing an earlier one; a zero at disarms.
func (s *System) armWake(k key, at time.Time) {
	t := &s.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timers == nil {
		t.timers = map[key]armed{}
	}
	if old, ok := t.timers[k]; ok {
		if old.at.Equal(at) {
			return
		}
		old.stop()
		delete(t.timers, k)
	}
	if at.IsZero() {
		return
	}
	d := max(at.Sub(s.cfg.Clock.Now()), 0)
	stop := s.cfg.Clock.AfterFunc(d, func() {
		t.mu.Lock()
		if cur, ok := t.timers[k]; ok && cur.at.Equal(at) {
			delete(t.timers, k)
		}
		t.mu.Unlock()
		s.route(k.kind, k.id, wake{})
	})
	t.timers[k] = armed{at: at, stop: stop}
}

func (s *System) stopWakes() {
	t := &s.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, a := range t.timers {
		a.stop()
		delete(t.timers, k)
	}
}
