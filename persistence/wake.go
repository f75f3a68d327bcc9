package persistence

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// The wake index: entities with a deadline or unsettled effects, by time.

// Wake is one entry of the wake index.
type Wake struct {
	At     time.Time
	Letter string // KindMarquee or KindEnvironment
	ID     string
}

// Wakes returns every wake-index entry due at or before until, earliest
// first. Only entities with work due are listed, so start-up cost follows the
// work, not the number of stored marquees.
func (s *Store) Wakes(until time.Time) ([]Wake, error) {
	var out []Wake
	end := WakeKey(until, WakeMarquee, "\xff")
	err := s.Scan([]byte(WakePrefix), nil, func(k, _ []byte) (bool, error) {
		if bytes.Compare(k, end) > 0 {
			return false, nil
		}
		var nanos uint64
		parts := strings.SplitN(string(k), "/", 4)
		if len(parts) != 4 || (parts[2] != WakeMarquee && parts[2] != WakeEnvironment) {
			return true, nil // not ours; never written by this version
		}
		if _, err := fmt.Sscanf(parts[1], "%016x", &nanos); err != nil {
			return true, nil
		}
		out = append(out, Wake{At: time.Unix(0, int64(nanos)).UTC(), Letter: parts[2], ID: parts[3]})
		return true, nil
	})
	return out, err
}

// MoveWake moves an entity's wake-index entry from old to at (either may
// be zero: none), in the same batch as the record that owns it (M23).
func (b *Batch) MoveWake(kind, id string, old, at time.Time) { moveWake(b, kind, id, old, at) }

// An entry that stays where it is is not written again: only MoveWake
// writes the index, so it is there already.
func moveWake(w Writer, kind, id string, old, at time.Time) {
	if old.Equal(at) {
		return
	}
	if !old.IsZero() {
		w.Delete(WakeKey(old, kind, id))
	}
	if !at.IsZero() {
		w.Set(WakeKey(at, kind, id), nil)
	}
}
