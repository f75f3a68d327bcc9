package persistence

import (
	"bytes"
	"fmt"
	"time"
)

// Deliveries: the first answer to each (entity, delivery id), kept for
// --dedup-retention (M20, T5). Marquees are the entities that take them.

// DedupRecord is the first answer to a delivery (M20), keyed by entity and
// delivery id (T5).
type DedupRecord struct {
	DeliveryID string    `json:"delivery_id"`
	At         time.Time `json:"at"`
	// Entity is the id of the entity the delivery was for (stored under
	// the name it had when only marquees took deliveries).
	Entity string `json:"marquee_id"`
	Status int    `json:"status"`
	Body   []byte `json:"body"`
	// BodySHA256 is the hash of the request body that got this answer: a
	// repeat with another body is a different message under a reused id.
	BodySHA256 []byte `json:"body_sha256,omitempty"`
}

// SameBody reports whether a delivery's body is the one this record
// answered. A record written before bodies were hashed answers as before.
func (r DedupRecord) SameBody(h [32]byte) bool {
	return len(r.BodySHA256) == 0 || bytes.Equal(r.BodySHA256, h[:])
}

// Dedup returns the first answer to an entity's delivery id, or
// ErrNotFound. The same delivery id of another entity is another delivery
// (T5).
func (s *Store) Dedup(entity, deliveryID string) (DedupRecord, error) {
	var r DedupRecord
	err := s.Get(DedupKey(entity, deliveryID), &r)
	if err == nil && r.Entity != entity {
		// A record of the layout before T5 ("d/<delivery>") whose id
		// happens to read as this marquee's: not this delivery.
		return DedupRecord{}, ErrNotFound
	}
	return r, err
}

// DedupIDs lists the delivery ids stored for an entity, reading keys only,
// up to max; complete is false when there were more. The entity's actor
// keeps them so that a new delivery (almost every one) is known to be new
// without a point read.
func (s *Store) DedupIDs(entity string, max int) (ids []string, complete bool, err error) {
	prefix := DedupPrefix(entity)
	complete = true
	err = s.Scan(prefix, nil, func(k, _ []byte) (bool, error) {
		if len(ids) == max {
			complete = false
			return false, nil
		}
		ids = append(ids, string(k[len(prefix):]))
		return true, nil
	})
	return ids, complete, err
}

// PruneDedup deletes delivery records older than cutoff (docs/rules/http-api.md keeps
// them at least 72 hours) and returns how many went.
func (s *Store) PruneDedup(cutoff time.Time) (int, error) {
	var stale [][]byte
	err := s.Scan([]byte(DedupFamily), nil, func(k, v []byte) (bool, error) {
		var r DedupRecord
		if err := Decode(k, v, &r); err != nil || r.At.Before(cutoff) {
			// A record that does not decode can never answer a duplicate.
			stale = append(stale, append([]byte(nil), k...))
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
	return pruned, nil
}

// PutDedup records the first answer to a delivery.
func (b *Batch) PutDedup(r DedupRecord) {
	b.Put(DedupKey(r.Entity, r.DeliveryID), r)
}
