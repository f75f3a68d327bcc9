package sim

import (
	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
)

// Planted bugs: each disables one guard, to prove the simulator sees it.
// Planted names the guard and the invariant expected to catch it.
var Planted = []struct {
	Name      string
	Invariant string
}{
	{marquee.PlantGenerationCheck, "I1"},    // M10 off: a superseded run's deployed is trusted
	{marquee.PlantSecondNull, "I4"},         // M16 off: one null tears a live host down
	{marquee.PlantVeto, "I3"},               // M18 off: live chats do not preserve a host
	{admission.PlantNoLimitCheck, "I7"},     // A3 off: a slot is reserved without the check
	{actors.PlantAnswerBeforePersist, "I5"}, // A10/I5 off: "applied" answered before the commit
	{environment.PlantLeaseFencing, "I13"},  // E7 off: a stale lease generation commits
	{environment.PlantRouteCAS, "I14"},      // E8 off: activation over a newer route generation
}

// FindPlanted runs seeds from 1 until one catches the planted bug, and
// returns that seed's result; limit bounds the search.
func FindPlanted(name string, limit uint64) (Result, uint64) {
	for seed := uint64(1); seed <= limit; seed++ {
		r := Check(Options{Seed: seed, Plant: name})
		if r.Violation != nil {
			return r, seed
		}
	}
	return Result{}, 0
}
