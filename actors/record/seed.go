package record

import (
	"time"

	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// Records written straight in a store, with no System running: the
// scale benchmarks' seeding. Everything a running System writes goes
// through its actors.

// SeedMarquee stages a marquee record as a commit would: the record, its
// secrets sealed, and its wake-index entry.
func SeedMarquee(b *persistence.Batch, sealer *trust.Sealer, r Marquee) {
	PutMarquee(b, sealer, r)
	b.MoveWake(persistence.WakeMarquee, r.State.ID, time.Time{}, r.WakeAt)
}
