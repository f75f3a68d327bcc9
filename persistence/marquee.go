package persistence

import (
	"time"

	"github.com/wardenhq/warden/actors/marquee"
)

// Marquee snapshots and their bounded history.

// HistoryLimit bounds the history kept per marquee: enough to reconstruct a
// stale-callback story over a day of retries, small enough that a noisy
// workflow cannot grow a row without bound.
const HistoryLimit = 200

// MarqueeRecord is a marquee snapshot with the store's bookkeeping.
type MarqueeRecord struct {
	State marquee.State `json:"state"`
	// HistorySeq is the sequence of the newest history entry.
	HistorySeq uint64 `json:"history_seq"`
	// WakeAt is the wake-index entry this snapshot owns (zero: none).
	WakeAt time.Time `json:"wake_at,omitzero"`
}

// LoadMarquee reads one marquee snapshot. ErrNotFound if there is none; a
// *CorruptError if it does not decode or validate.
func (s *Store) LoadMarquee(id string) (MarqueeRecord, error) {
	var r MarqueeRecord
	key := marqueeKey(id)
	if err := s.get(key, &r); err != nil {
		return MarqueeRecord{}, err
	}
	if err := s.openMarquee(key, &r); err != nil {
		return MarqueeRecord{}, err
	}
	return r, nil
}

// ListMarquees returns up to limit marquees that keep accepts (tombstones
// included: keep decides) with ids after `after`, in id order, the id to
// continue after ("" at the end), and the malformed records met on the way.
// It reads at most maxScan records (0: no bound): a page whose filter
// matches little stops there and returns the last id read as its cursor,
// fuller or not, so one page never reads the whole store. Sealed secrets
// stay sealed: a list shows summaries, never connections.
func (s *Store) ListMarquees(after string, limit, maxScan int, keep func(marquee.State) bool) ([]marquee.State, string, []Malformed, error) {
	return listPage(s, "m/", after, limit, maxScan, func(k, v []byte) (marquee.State, error) {
		var r MarqueeRecord
		err := decode(k, v, &r)
		return r.State, err
	}, keep)
}

// History returns up to limit entries of a marquee's history, newest first.
func (s *Store) History(id string, limit int) ([]marquee.Entry, error) {
	var all []marquee.Entry
	err := s.scan([]byte("h/"+id+"/"), nil, func(k, v []byte) (bool, error) {
		var e marquee.Entry
		if err := decode(k, v, &e); err != nil {
			return false, err
		}
		all = append(all, e)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]marquee.Entry, 0, min(limit, len(all)))
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, all[i])
	}
	return out, nil
}

// PutMarquee writes the snapshot and moves its wake-index entry from
// oldWake to r.WakeAt.
func (b *Batch) PutMarquee(r MarqueeRecord, oldWake time.Time) {
	id := r.State.ID
	if !oldWake.IsZero() && !oldWake.Equal(r.WakeAt) {
		b.w.Delete(wakeKey(oldWake, id))
	}
	if !r.WakeAt.IsZero() {
		b.w.Set(wakeKey(r.WakeAt, id), nil)
	}
	b.w.Set(marqueeKey(id), encode(b.s.sealMarquee(r)))
}

// AppendHistory writes entry number seq and drops the one that falls out of
// the window, so a marquee never holds more than HistoryLimit entries.
func (b *Batch) AppendHistory(id string, seq uint64, e marquee.Entry) {
	b.w.Set(historyKey(id, seq), encode(e))
	if seq > HistoryLimit {
		b.w.Delete(historyKey(id, seq-HistoryLimit))
	}
}
