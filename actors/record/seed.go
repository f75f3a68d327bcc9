package record

import (
	"time"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// Records written straight in a store, with no System running: the
// benchmarks' and the tests' seeding. Everything a running System writes
// goes through its actors.

// SeedMarquee stages a marquee record as a commit would: the record, its
// secrets sealed, and its wake-index entry.
func SeedMarquee(b *persistence.Batch, sealer *trust.Sealer, r Marquee) {
	PutMarquee(b, sealer, r)
	b.MoveWake(persistence.WakeMarquee, r.State.ID, time.Time{}, r.WakeAt)
}

// SeedEnvironment stages an environment record as its create would: the
// record, its branch's route generation and its wake-index entry.
func SeedEnvironment(b *persistence.Batch, r Environment) {
	EnvironmentWrites{}.Stage(b, r.Env.ID, Environment{}, r, environment.Outcome{})
	b.MoveWake(persistence.WakeEnvironment, r.Env.ID, time.Time{}, r.WakeAt)
	// Its route generation, as the branch gave it out before the create.
	b.Set(persistence.BranchGenerationKey(r.Env.Branch, r.Env.Generation), []byte(r.Env.ID))
}
