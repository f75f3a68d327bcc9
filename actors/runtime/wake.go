package runtime

import (
	"fmt"
	"sync"
	"time"
)

// wakeTimers holds at most one armed timer per entity: the in-memory twin
// of the wake index. The runtime owns them, not the actors, so a
// passivated entity's deadline still fires and reactivates it; the wake
// index covers the same deadline across a restart (M23). Firing only
// routes a wake: the actor checks against its record what is really due,
// so an early, late or repeated wake never fires a deadline twice.
type wakeTimers struct {
	mu       sync.Mutex
	timers   map[Key]armed
	periodic []func() bool
}

// armed is an entity's timer. A wake moved later keeps the timer already
// set, which goes off at fires and sets itself again for at: a steady
// callback moves its marquee's deadline later with every step, and
// stopping and starting a runtime timer each time was the largest cost
// of arming (docs/decisions, "The durable path's CPU").
type armed struct {
	at    time.Time // the wake the entity asked for
	fires time.Time // when the timer set goes off: at, or before it
	stop  func() bool
}

// wakeMsg: a deadline of the entity may be due.
type wakeMsg struct{}

func (wakeMsg) fail(error)      {}
func (wakeMsg) activates() bool { return false }

// armWake sets the entity's timer to at, replacing an earlier one; a zero
// at disarms.
func (rt *Runtime) armWake(k Key, at time.Time) {
	t := &rt.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timers == nil {
		t.timers = map[Key]armed{}
	}
	if old, ok := t.timers[k]; ok {
		if old.at.Equal(at) {
			return
		}
		if !at.IsZero() && !old.fires.After(at) {
			old.at = at
			t.timers[k] = old
			return
		}
		old.stop()
		delete(t.timers, k)
	}
	if at.IsZero() {
		return
	}
	rt.startTimer(k, at)
}

// startTimer sets k's timer to go off at at; t.mu is held.
func (rt *Runtime) startTimer(k Key, at time.Time) {
	t := &rt.timers
	d := max(at.Sub(rt.cfg.Clock.Now()), 0)
	stop := rt.cfg.Clock.AfterFunc(d, func() { rt.timerFired(k, at) })
	t.timers[k] = armed{at: at, fires: at, stop: stop}
}

// timerFired routes a wake to k, unless its wake was moved later while
// the timer ran: then the timer is set again for the wake asked for. A
// timer whose entry was replaced (its stop came too late) still routes
// its wake, which the actor finds early and harmless.
func (rt *Runtime) timerFired(k Key, fired time.Time) {
	t := &rt.timers
	t.mu.Lock()
	if cur, ok := t.timers[k]; ok && cur.fires.Equal(fired) {
		if cur.at.After(fired) {
			rt.startTimer(k, cur.at)
			t.mu.Unlock()
			return
		}
		delete(t.timers, k)
	}
	t.mu.Unlock()
	rt.route(k, wakeMsg{})
}

func (t *wakeTimers) addPeriodic(stop func() bool) {
	t.mu.Lock()
	t.periodic = append(t.periodic, stop)
	t.mu.Unlock()
}

func (t *wakeTimers) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, a := range t.timers {
		a.stop()
		delete(t.timers, k)
	}
	for _, stop := range t.periodic {
		stop()
	}
	t.periodic = nil
}

// ArmWakes arms a timer for every wake-index entry of an entity keep
// accepts, and says how many: due ones fire now, the others stay on disk
// until their time. Start-up and a shard's recovery run it.
func (rt *Runtime) ArmWakes(keep func(Key) bool) (int, error) {
	wakes, err := rt.cfg.Store.Wakes(time.Unix(0, 1<<62))
	if err != nil {
		return 0, fmt.Errorf("read wake index: %w", err)
	}
	byLetter := map[string]string{}
	for name, k := range rt.kinds {
		if l := k.wakeLetter(); l != "" {
			byLetter[l] = name
		}
	}
	n := 0
	for _, w := range wakes {
		kind, ok := byLetter[w.Letter]
		if !ok {
			continue
		}
		k := Key{Kind: kind, ID: w.ID}
		if keep(k) {
			rt.armWake(k, w.At)
			n++
		}
	}
	return n, nil
}
