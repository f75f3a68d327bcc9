package persistence

import (
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/environment"
)

// Preview environments and the route generations of their branches
// (E1, E8).

// EnvRecord is an environment's durable record with the store's
// bookkeeping.
type EnvRecord struct {
	Env    environment.Env `json:"env"`
	WakeAt time.Time       `json:"wake_at,omitzero"`
}

// LoadEnv reads one environment record; ErrNotFound or a *CorruptError.
func (s *Store) LoadEnv(id string) (EnvRecord, error) {
	var r EnvRecord
	key := envKey(id)
	if err := s.get(key, &r); err != nil {
		return EnvRecord{}, err
	}
	if !environment.ValidID(r.Env.ID) || r.Env.ID != id {
		return EnvRecord{}, &CorruptError{Malformed{Key: string(key), Reason: fmt.Sprintf("record names environment %q", r.Env.ID)}}
	}
	return r, nil
}

// ListEnvs returns up to limit environments that keep accepts (nil: all;
// tombstones included, they are kept for leak audits, E12) with ids after
// `after`, in id order, the id to continue after ("" at the end), and the
// malformed records met on the way; it reads at most maxScan records (0:
// no bound), as ListMarquees does.
func (s *Store) ListEnvs(after string, limit, maxScan int, keep func(environment.Env) bool) ([]environment.Env, string, []Malformed, error) {
	return listPage(s, "e/", after, limit, maxScan, func(k, v []byte) (environment.Env, error) {
		var r EnvRecord
		err := decode(k, v, &r)
		return r.Env, err
	}, keep)
}

// ListEnvIDs lists every stored environment's id, in key order, without
// decoding the records (the reconciler's sweep; each actor reads its own).
func (s *Store) ListEnvIDs() ([]string, error) {
	var out []string
	err := s.scan([]byte("e/"), nil, func(k, _ []byte) (bool, error) {
		out = append(out, string(k[len("e/"):]))
		return true, nil
	})
	return out, err
}

// BranchGeneration reads the last route generation given out for a branch.
func (s *Store) BranchGeneration(branch string) (uint64, error) {
	var g uint64
	err := s.get(branchKey(branch), &g)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return g, err
}

// PutEnv writes an environment record and moves its wake-index entry from
// oldWake to r.WakeAt.
func (b *Batch) PutEnv(r EnvRecord, oldWake time.Time) {
	id := r.Env.ID
	if !oldWake.IsZero() && !oldWake.Equal(r.WakeAt) {
		b.w.Delete(wakeKeyOf(oldWake, KindEnvironment, id))
	}
	if !r.WakeAt.IsZero() {
		b.w.Set(wakeKeyOf(r.WakeAt, KindEnvironment, id), nil)
	}
	b.w.Set(envKey(id), encode(r))
}

// PutBranchGeneration records the last route generation of a branch.
func (b *Batch) PutBranchGeneration(branch string, g uint64) {
	b.w.Set(branchKey(branch), encode(g))
}
