package actors

import (
	"time"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// Records read or written straight in a store, with no System running:
// the simulator's oracles between two incarnations, the benchmark's
// seeding. Everything a running System does goes through its actors.

// LoadMarquee reads a marquee's stored record, its secrets opened with
// sealer (nil: stored in clear): persistence.ErrNotFound, a
// *persistence.CorruptError, or the record.
func LoadMarquee(st *persistence.Store, sealer *trust.Sealer, id string) (MarqueeRecord, error) {
	return loadMarquee(st, sealer, id)
}

// LoadEnvironment reads an environment's stored record.
func LoadEnvironment(st *persistence.Store, id string) (EnvRecord, error) { return loadEnv(st, id) }

// StoredHistory is up to limit entries of a marquee's stored history,
// newest first.
func StoredHistory(st *persistence.Store, id string, limit int) ([]marquee.Entry, error) {
	return history(st, id, limit)
}

// SeedMarquee stages a marquee record as a commit would: the record, its
// secrets sealed, and its wake-index entry.
func SeedMarquee(b *persistence.Batch, sealer *trust.Sealer, r MarqueeRecord) {
	putMarquee(b, sealer, r)
	b.MoveWake(persistence.WakeMarquee, r.State.ID, time.Time{}, r.WakeAt)
}

// SeedEnvironment stages an environment record as its create would: the
// record, its branch's route generation and its wake-index entry.
func SeedEnvironment(b *persistence.Batch, r EnvRecord) {
	envKind{sys: &System{}}.Stage(b, r.Env.ID, EnvRecord{}, r, environment.Outcome{})
	b.MoveWake(persistence.WakeEnvironment, r.Env.ID, time.Time{}, r.WakeAt)
	// Its route generation, as the branch gave it out before the create.
	b.Set(persistence.BranchGenerationKey(r.Env.Branch, r.Env.Generation), []byte(r.Env.ID))
}
