package persistence

import (
	"errors"
	"fmt"

	"github.com/wardenhq/warden/actors/admission"
)

// Admission pools: metadata and one record per job (A3, A7, A8).

// PoolMeta is what a pool keeps besides its job records.
type PoolMeta struct {
	NextSequence uint64 `json:"next_sequence"`
}

// LoadPool reads a pool's metadata and every admission record (A7). The
// records come back in key order; admission.Rebuild orders them by
// sequence. Records that fail to decode are returned as malformed (A8).
func (s *Store) LoadPool(name string) (PoolMeta, []admission.Job, []Malformed, error) {
	var meta PoolMeta
	if err := s.get(poolKey(name), &meta); err != nil && !errors.Is(err, ErrNotFound) {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return meta, nil, nil, err
		}
		// The sequence is recovered from the records themselves.
	}
	var jobs []admission.Job
	var bad []Malformed
	err := s.scan(admissionPrefix(name), nil, func(k, v []byte) (bool, error) {
		var j admission.Job
		if err := decode(k, v, &j); err != nil {
			bad = append(bad, err.(*CorruptError).Malformed)
			return true, nil
		}
		if want := string(admissionKey(name, j.ID)); want != string(k) {
			bad = append(bad, Malformed{Key: string(k), Reason: fmt.Sprintf("record names job %q, key does not", j.ID)})
			return true, nil
		}
		jobs = append(jobs, j)
		return true, nil
	})
	return meta, jobs, bad, err
}

// PutAdmission writes a job record; a job with status None is deleted.
func (b *Batch) PutAdmission(pool string, j admission.Job) {
	if j.Status == admission.None {
		b.w.Delete(admissionKey(pool, j.ID))
		return
	}
	b.w.Set(admissionKey(pool, j.ID), encode(j))
}

// PutPoolMeta writes a pool's metadata.
func (b *Batch) PutPoolMeta(pool string, m PoolMeta) { b.w.Set(poolKey(pool), encode(m)) }
