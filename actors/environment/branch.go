package environment

import (
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Branch is a branch's route-generation counter: every preview of the
// branch gets the next one, so a newer preview always routes with a higher
// generation than an older one (E8, I14).
type Branch struct {
	Name string
	// Last is the newest generation given out (0: none yet).
	Last uint64
	// Recent are the last givings, oldest first, at most
	// RecentGivings: a preview that asks again (its actor restarted before
	// the answer came) is given the same generation, not a newer one that
	// would make it look superseded by a sibling that does not exist.
	Recent []Give
}

// RecentGivings bounds the givings a branch remembers. A preview asks
// again only while its first answer is in flight, a few messages at
// most; one that asks after RecentGivings later givings gets a new
// generation, which only spends a number.
const RecentGivings = 16

// NextGeneration asks a branch for its next route generation, for the
// environment For (a message between entities, C4).
type NextGeneration struct{ For string }

// Give is a branch step's effect: environment Env is told the generation
// it was given, once the branch's step is durable.
type Give struct {
	Env        string
	Generation uint64
}

// String prints a giving in golden files.
func (g Give) String() string { return fmt.Sprintf("give(%s %d)", g.Env, g.Generation) }

// BranchOutcome is a branch step's entity.Outcome: the generation given out as
// its Answer, the new giving as its Record (none when told again), and who
// is told it as its Effect.
type BranchOutcome = entity.Outcome[uint64, Give, Give]

// StepBranch gives out the next generation, or the one already given to
// the asker (told again, writing nothing). A generation is spent whether or
// not the preview that asked for it goes on; only the order matters, and a
// create refused as a duplicate never asks (the asking is the created
// record's own first effect).
func StepBranch(b Branch, ev NextGeneration, _ time.Time) (Branch, BranchOutcome) {
	for _, g := range b.Recent {
		if g.Env == ev.For {
			return b, BranchOutcome{Answer: g.Generation, Effects: []Give{g}}
		}
	}
	b.Last++
	give := Give{Env: ev.For, Generation: b.Last}
	b.Recent = append(b.Recent[max(0, len(b.Recent)+1-RecentGivings):len(b.Recent):len(b.Recent)], give)
	return b, BranchOutcome{Answer: b.Last, Records: []Give{give}, Effects: []Give{give}, Changed: true}
}
