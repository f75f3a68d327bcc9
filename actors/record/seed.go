package record

import (
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// Records written straight in a store, with no System running: the
// scale benchmarks' seeding. Everything a running System writes goes
// through its actors.

// SeedMarquee stages a marquee record as a commit would: the record, its
// secrets sealed, and its wake-index entry.
func SeedMarquee(b *persistence.Batch, sealer *trust.Sealer, r Marquee) {
	runtime.Stage(MarqueeWrites{Sealer: sealer}, b, r.State.ID, Marquee{}, r, marquee.Outcome{})
}
