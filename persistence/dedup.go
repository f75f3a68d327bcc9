package persistence

import (
	"fmt"
	"time"
)

// DedupRecord is one delivery's first answer in the layout before an
// entity's deliveries were one record (deliveries.go): still read, while
// its retention lasts, and pruned then.
type DedupRecord struct {
	DeliveryID string    `json:"delivery_id"`
	At         time.Time `json:"at"`
	// Entity is the id of the entity the delivery was for (stored under
	// the name it had when only marquees took deliveries).
	Entity     string `json:"marquee_id"`
	HTTPStatus int    `json:"status"` // the answer's HTTP status code
	Body       []byte `json:"body"`
	// BodySHA256 is the hash of the request body that got this answer: a
	// repeat with another body is a different message under a reused id.
	BodySHA256 []byte `json:"body_sha256,omitempty"`
}

// PruneDedup deletes the d/ records older than cutoff (docs/rules/http-api.md keeps
// them at least 72 hours) and returns how many went. An entity's r/ record
// drops its old entries itself, when it is next written.
func (s *Store) PruneDedup(cutoff time.Time) (int, error) {
	var stale [][]byte
	kept := false
	err := s.Scan([]byte(DedupFamily), nil, func(k, v []byte) (bool, error) {
		var r DedupRecord
		if err := Decode(k, v, &r); err != nil || r.At.Before(cutoff) {
			// A record that does not decode can never answer a duplicate.
			stale = append(stale, append([]byte(nil), k...))
		} else {
			kept = true
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	// Deleted in batches of at most maxBulkWrites (etcd bounds the
	// operations of one transaction); an expired record is nobody's
	// decision, so the deletes need no fence.
	pruned := len(stale)
	for len(stale) > 0 {
		n := min(len(stale), maxBulkWrites)
		b := s.NewBatch()
		for _, k := range stale[:n] {
			b.w.Delete(k)
		}
		if err := b.Commit(); err != nil {
			return 0, fmt.Errorf("prune deliveries: %w", err)
		}
		stale = stale[n:]
	}
	s.noteLegacy(kept)
	return pruned, nil
}
