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
// sequence order, each waiting job's release (it leaves the queue), then a
// new job's ask. Each is stepped on a copy and kept where it changes the
// pool: asking again changes nothing, nor does an ask the full queue
// refuses.
func Awaiting(p Pool, now time.Time) []Input {
	var out []Input
	for _, j := range p.Reserved {
		if next, o, ok := Moves(p, Release{Job: j.ID}, now); ok {
			out = append(out, Input{Event: "release by " + j.ID, Effect: releaseEffect(j, next, o)})
		}
	}
	for i, j := range p.Queued {
		if _, _, ok := Moves(p, Release{Job: j.ID}, now); ok {
			out = append(out, Input{Event: "release by " + j.ID,
				Effect: fmt.Sprintf("%s leaves the queue (place %d of %d); nobody is admitted (A5)", j.ID, i+1, len(p.Queued))})
		}
	}
	if _, o, ok := Moves(p, Ask{Job: newJob}, now); ok {
		out = append(out, Input{Event: InputName(p, Ask{Job: newJob}), Effect: askEffect(o.Answer, len(p.Queued))})
	}
	return out
}

// newJob stands for a job the pool does not know, in explain's ask.
const newJob = "a new job"

// Moves steps ev on a copy of p and says whether it changes the pool.
func Moves(p Pool, ev Event, now time.Time) (Pool, Outcome, bool) {
	next, o := Step(p, ev, now)
	return next, o, o.Err == nil && o.Changed
}

// InputName names an input as explain lists it: a release by its job, an
// ask by its job when the pool knows it, else as a new job's.
func InputName(p Pool, ev Event) string {
	switch e := ev.(type) {
	case Release:
		return "release by " + e.Job
	case Ask:
		if _, known := p.find(e.Job); known {
			return "ask by " + e.Job
		}
		return "ask by " + newJob
	}
	return fmt.Sprintf("%T", ev)
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
