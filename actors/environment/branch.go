package environment

import (
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
}

// NextGeneration asks a branch for its next route generation.
type NextGeneration struct{}

// BranchReady is a branch step's entity.Ready: the generation given out as
// its Answer, durable before anyone hears it.
type BranchReady = entity.Ready[uint64, entity.None, entity.None]

// StepBranch gives out the next generation. The generation is spent
// whether or not the preview that asked for it is created, which is why a
// create claims its id before it asks (issue 10).
func StepBranch(b Branch, _ NextGeneration, _ time.Time) (Branch, BranchReady) {
	b.Last++
	return b, BranchReady{Answer: b.Last, Changed: true}
}
