package persistence

import "sync"

// visibility holds a read back until every commit it may have seen is
// durable (S5, I15). Pebble shows a batch to readers once it is in the
// memtable, before its WAL sync returns: a read in that window could
// answer with a state that a crash, or a failed sync, then takes back.
//
// Every commit takes a ticket before it enters Pebble and gives it back
// when its sync has returned. A read, once it has read, waits until every
// ticket taken before it finished reading is given back: any batch it saw
// entered Pebble before that, so its ticket is among them. If the store
// seals meanwhile, the read is refused instead.
type visibility struct {
	health   *Health
	mu       sync.Mutex
	cond     sync.Cond
	next     uint64
	inflight []uint64 // tickets not given back, ascending
}

func newVisibility(h *Health) *visibility {
	v := &visibility{health: h}
	v.cond.L = &v.mu
	h.OnSeal(func(*Failure) {
		v.mu.Lock()
		v.cond.Broadcast()
		v.mu.Unlock()
	})
	return v
}

func (v *visibility) begin() uint64 {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	v.next++
	t := v.next
	v.inflight = append(v.inflight, t)
	v.mu.Unlock()
	return t
}

func (v *visibility) end(t uint64) {
	if v == nil {
		return
	}
	v.mu.Lock()
	for i, x := range v.inflight {
		if x == t {
			v.inflight = append(v.inflight[:i], v.inflight[i+1:]...)
			break
		}
	}
	if len(v.inflight) == 0 || v.inflight[0] > t {
		v.cond.Broadcast()
	}
	v.mu.Unlock()
}

// wait returns once every commit begun so far has ended, or the store's
// failure if it sealed first.
func (v *visibility) wait() error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	upTo := v.next
	for len(v.inflight) > 0 && v.inflight[0] <= upTo {
		if f := v.health.Failed(); f != nil {
			return f
		}
		v.cond.Wait()
	}
	if f := v.health.Failed(); f != nil {
		return f
	}
	return nil
}
