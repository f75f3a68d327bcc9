package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/persistence"
)

// Pool is a pool as its records say, with the records that could not
// be used (A8).
type Pool struct {
	Pool      admission.Pool
	Malformed []persistence.Malformed
}

// PoolMeta is what a pool keeps besides its job records.
type PoolMeta struct {
	NextSequence uint64 `json:"next_sequence"`
}

// PoolWrites is what a pool's step writes: each job record it decided
// (a released job's deleted) and the pool's next sequence.
type PoolWrites struct{}

// A pool has no deadline in the wake index and keeps no deliveries.
func (PoolWrites) WakeLetter() string                         { return "" }
func (PoolWrites) WakeOf(Pool) time.Time                      { return time.Time{} }
func (PoolWrites) RecentDeliveries(Pool) persistence.InRecord { return persistence.InRecord{} }
func (PoolWrites) WithRecentDeliveries(r Pool, _ []byte) Pool { return r }

func (PoolWrites) Stage(b persistence.Writer, name string, _, next Pool, rd admission.Outcome) {
	for _, j := range rd.Records {
		if j.Status == admission.None {
			b.Delete(persistence.AdmissionKey(name, j.ID))
			continue
		}
		b.Put(persistence.AdmissionKey(name, j.ID), j)
	}
	b.Put(persistence.PoolKey(name), PoolMeta{NextSequence: next.Pool.NextSequence})
}

// RebuildPool is a pool as its stored records say (A7): queued jobs in
// sequence order, and every record that could not be used, with why.
// The pool's actor loads itself with it; another node shows the pool with
// it (C4).
func RebuildPool(st *persistence.Store, name string, limit int) (admission.Pool, []persistence.Malformed, error) {
	var meta PoolMeta
	if err := st.Get(persistence.PoolKey(name), &meta); err != nil && !errors.Is(err, persistence.ErrNotFound) {
		var ce *persistence.CorruptError
		if !errors.As(err, &ce) {
			return admission.Pool{}, nil, err
		}
		// The sequence is recovered from the records themselves.
	}
	var jobs []admission.Job
	var bad []persistence.Malformed
	prefix := persistence.AdmissionPrefix(name)
	err := st.Scan(prefix, nil, func(k, v []byte) (bool, error) {
		var j admission.Job
		if err := persistence.Decode(k, v, &j); err != nil {
			var ce *persistence.CorruptError
			errors.As(err, &ce)
			bad = append(bad, ce.Malformed)
			return true, nil
		}
		if want := string(persistence.AdmissionKey(name, j.ID)); want != string(k) {
			bad = append(bad, persistence.Malformed{Key: string(k), Reason: fmt.Sprintf("record names job %q, key does not", j.ID)})
			return true, nil
		}
		jobs = append(jobs, j)
		return true, nil
	})
	if err != nil {
		return admission.Pool{}, nil, err
	}
	pool, invalid := admission.Rebuild(name, limit, meta.NextSequence, jobs)
	for _, m := range invalid {
		bad = append(bad, persistence.Malformed{Key: string(persistence.AdmissionKey(name, m.Job)), Reason: m.Reason})
	}
	return pool, bad, nil
}
