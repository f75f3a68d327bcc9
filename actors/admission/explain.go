package admission

import (
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Input is one input that would move the pool now, found by stepping it
// on a copy (O17); a pool's have no time (At is zero).
type Input = entity.Input

// Awaiting is what would move the pool now: each holder's release, in
// sequence order, then a new job's ask.
func Awaiting(p Pool, now time.Time) []Input {
	var out []Input
	for _, j := range p.Reserved {
		next, o := Step(p, Release{Job: j.ID}, now)
		out = append(out, Input{Event: "release by " + j.ID, Effect: releaseEffect(j, next, o)})
	}
	_, o := Step(p, Ask{Job: "a new job"}, now)
	out = append(out, Input{Event: "ask by a new job", Effect: askEffect(o.Answer, len(p.Queued))})
	return out
}

func releaseEffect(j Job, next Pool, o Outcome) string {
	var admitted []string
	for _, t := range o.Effects {
		admitted = append(admitted, fmt.Sprintf("%s (sequence %d)", t.Job, t.Sequence))
	}
	if len(admitted) == 0 {
		return fmt.Sprintf("frees %s's slot; %d of %d held after it, nobody waiting (A5)", j.ID, len(next.Reserved), next.Limit)
	}
	return fmt.Sprintf("frees %s's slot and admits %s (A4, A5)", j.ID, strings.Join(admitted, ", "))
}

func askEffect(j Job, waiting int) string {
	switch j.Status {
	case Reserved:
		return fmt.Sprintf("reserved at once, sequence %d (A3)", j.Sequence)
	case Queued:
		return fmt.Sprintf("queued at sequence %d, behind %d waiting (A3, A4)", j.Sequence, waiting)
	default:
		return fmt.Sprintf("refused: the queue holds %d, its bound (A3)", MaxQueue)
	}
}
