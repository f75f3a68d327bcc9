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

type armed struct {
	at   time.Time
	stop func() bool
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
		old.stop()
		delete(t.timers, k)
	}
	if at.IsZero() {
		return
	}
	d := max(at.Sub(rt.cfg.Clock.Now()), 0)
	stop := rt.cfg.Clock.AfterFunc(d, func() {
		t.mu.Lock()
		if cur, ok := t.timers[k]; ok && cur.at.Equal(at) {
			delete(t.timers, k)
		}
		t.mu.Unlock()
		rt.route(k, wakeMsg{})
	})
	t.timers[k] = armed{at: at, stop: stop}
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
// until their time (M23). Start-up and a shard's recovery run it.
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
