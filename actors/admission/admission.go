// Package admission is the pure state machine of an admission pool: the
// capacity limit on concurrent provisioning work as one serialized transition
// (rules A1-A10 in docs/rules/admission.md).
//
// The machine does no I/O and reads no clock: Step takes the pool, an event
// and the time, and returns the new pool and an Outcome (actors/entity): the
// answer, the records to persist and the grants to announce after. The shell (an actor per pool) makes
// Step the only code that ever reserves a slot (A2), persists its result
// before telling anyone (A3, A10), and rebuilds the pool from storage in
// sequence order after a restart (A7).
package admission

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Standing is where a job stands in a pool.
type Standing string

const (
	Reserved Standing = "reserved"
	Queued   Standing = "queued"
	// None is the answer for a job the pool does not hold.
	None Standing = "none"
	// Refused is the answer to an ask the pool cannot hold: its queue is
	// full. Nothing is recorded; the asker is told.
	Refused Standing = "refused"
)

// MaxQueue bounds how many jobs may wait in one pool. Beyond it an ask is
// refused (Refused) rather than letting memory and recovery time grow
// without limit; 10,000 waiting provisioning jobs is already an outage.
const MaxQueue = 10_000

// Job is one admission: a stable job id (for marquees, the marquee id, A6),
// its place in the pool's sequence and its status.
type Job struct {
	ID       string    `json:"job"`
	Sequence uint64    `json:"sequence"`
	Status   Standing  `json:"status"`
	Since    time.Time `json:"since"`
}

// Pool is the whole state of one pool. Reserved and Queued are kept in
// sequence order so that no map order or storage order leaks into scheduling
// (A4).
type Pool struct {
	Name string `json:"name"`
	// Limit is the number of jobs that may hold a slot at once.
	Limit int `json:"limit"`
	// NextSequence is the sequence number the next new job gets.
	NextSequence uint64 `json:"next_sequence"`
	Reserved     []Job  `json:"reserved"`
	Queued       []Job  `json:"queued"`
}

// New returns an empty pool.
func New(name string, limit int) Pool {
	return Pool{Name: name, Limit: limit, NextSequence: 1}
}

// Event is what a pool is asked to do.
type Event interface{ isEvent() }

// Ask requests a slot for a job; asking again for a held job returns its
// current admission (A6).
type Ask struct{ Job string }

// Release frees whatever the job holds, a slot or a queue place (A5). The
// release and the admission of the next queued job are one transition.
type Release struct{ Job string }

func (Ask) isEvent()     {}
func (Release) isEvent() {}

// Told is a job told its admission once the step is durable: an
// asker its decision (asking again tells it again, A6), a waiting job the
// slot it was given, an asker its refusal (a full queue).
type Told struct {
	Job      string
	Sequence uint64
	Status   Standing
}

// Outcome is what one Step produced (entity.Outcome): the asked job's
// admission after the step as its Answer (None after a release); every job
// record written or deleted as its Records (a deleted record has status
// None), persisted in one batch with the pool's next sequence; the jobs to
// tell, in order, as its Effects: the asker first, then the queued jobs
// this step admitted in sequence order.
type Outcome = entity.Outcome[Job, Told, Job]

// String prints a telling in golden files and logs.
func (t Told) String() string { return fmt.Sprintf("tell(%s#%d %s)", t.Job, t.Sequence, t.Status) }

func tell(j Job) Told { return Told{Job: j.ID, Sequence: j.Sequence, Status: j.Status} }

// String prints a job as "id#sequence status".
func (j Job) String() string { return fmt.Sprintf("%s#%d %s", j.ID, j.Sequence, j.Status) }

// Step applies one event to the pool.
func Step(p Pool, ev Event, now time.Time) (Pool, Outcome) {
	before := p
	next, out, err := step(p.clone(), ev, now)
	if err != nil {
		return before, Outcome{Err: err}
	}
	out.Changed = len(out.Records) > 0
	return next, out
}

func step(p Pool, ev Event, now time.Time) (Pool, Outcome, error) {
	switch e := ev.(type) {
	case Ask:
		if j, ok := p.find(e.Job); ok {
			return p, Outcome{Answer: j, Effects: []Told{tell(j)}}, nil // A6: never a second slot or place
		}
		if p.NextSequence == 0 {
			p.NextSequence = 1
		}
		j := Job{ID: e.Job, Sequence: p.NextSequence, Since: now}
		if len(p.Reserved) < p.Limit && len(p.Queued) == 0 {
			// A4: a free slot goes to a newcomer only when nobody waits
			// before it; otherwise waiting jobs would be overtaken.
			j.Status = Reserved
			p.Reserved = append(p.Reserved, j)
		} else {
			if len(p.Queued) >= MaxQueue {
				refused := Job{ID: e.Job, Status: Refused}
				return p, Outcome{Answer: refused, Effects: []Told{tell(refused)}}, nil
			}
			j.Status = Queued
			p.Queued = append(p.Queued, j)
		}
		p.NextSequence++
		return p, Outcome{Answer: j, Records: []Job{j}, Effects: []Told{tell(j)}}, nil
	case Release:
		out := Outcome{Answer: Job{ID: e.Job, Status: None}}
		j, ok := p.find(e.Job)
		if !ok {
			return p, out, nil
		}
		p.remove(e.Job)
		out.Records = append(out.Records, Job{ID: j.ID, Sequence: j.Sequence, Status: None})
		p, granted := p.fill(now)
		out.Records = append(out.Records, granted...)
		for _, g := range granted {
			out.Effects = append(out.Effects, tell(g))
		}
		return p, out, nil
	default:
		return p, Outcome{}, fmt.Errorf("admission: unknown event %T", ev)
	}
}

// fill admits queued jobs in sequence order while slots are free.
func (p Pool) fill(now time.Time) (Pool, []Job) {
	var granted []Job
	for len(p.Reserved) < p.Limit && len(p.Queued) > 0 {
		j := p.Queued[0]
		p.Queued = p.Queued[1:]
		j.Status = Reserved
		j.Since = now
		p.Reserved = append(p.Reserved, j)
		granted = append(granted, j)
	}
	return p, granted
}

// Lookup returns the job's admission, or a job with status None.
func (p Pool) Lookup(job string) Job {
	if j, ok := p.find(job); ok {
		return j
	}
	return Job{ID: job, Status: None}
}

func (p Pool) find(job string) (Job, bool) {
	for _, j := range p.Reserved {
		if j.ID == job {
			return j, true
		}
	}
	for _, j := range p.Queued {
		if j.ID == job {
			return j, true
		}
	}
	return Job{}, false
}

func (p *Pool) remove(job string) {
	p.Reserved = without(p.Reserved, job)
	p.Queued = without(p.Queued, job)
}

func without(js []Job, id string) []Job {
	out := js[:0:0]
	for _, j := range js {
		if j.ID != id {
			out = append(out, j)
		}
	}
	return out
}

func (p Pool) clone() Pool {
	p.Reserved = append([]Job(nil), p.Reserved...)
	p.Queued = append([]Job(nil), p.Queued...)
	return p
}

// Rebuild makes a pool from recovered job records. Records are sorted by
// sequence, never taken in storage order. A job found twice, or a record
// with an impossible status, is returned as malformed instead of being
// admitted (A8, I9). Reserved jobs beyond the limit (a limit lowered between
// runs) keep their slots; new admissions wait until the pool is under its
// limit again, so no job that was told "reserved" is silently demoted.
func Rebuild(name string, limit int, nextSequence uint64, records []Job) (Pool, []Malformed) {
	p := New(name, limit)
	sorted := append([]Job(nil), records...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Sequence < sorted[j].Sequence })
	seen := map[string]bool{}
	var bad []Malformed
	maxSeq := uint64(0)
	for _, j := range sorted {
		if err := j.Validate(); err != nil {
			bad = append(bad, Malformed{Job: j.ID, Reason: err.Error()})
			continue
		}
		if seen[j.ID] {
			bad = append(bad, Malformed{Job: j.ID, Reason: fmt.Sprintf("job holds a second place (sequence %d)", j.Sequence)})
			continue
		}
		seen[j.ID] = true
		if j.Sequence > maxSeq {
			maxSeq = j.Sequence
		}
		if j.Status == Reserved {
			p.Reserved = append(p.Reserved, j)
		} else {
			p.Queued = append(p.Queued, j)
		}
	}
	p.NextSequence = max(nextSequence, maxSeq+1)
	return p, bad
}

// Malformed is a record that could not be admitted on recovery.
type Malformed struct {
	Job    string
	Reason string
}

// Validate checks a recovered record before any field of it is used (A9).
func (j Job) Validate() error {
	if !ValidJobID(j.ID) {
		return fmt.Errorf("job id %q is not a valid id", j.ID)
	}
	if j.Sequence == 0 {
		return errors.New("sequence is zero")
	}
	if j.Status != Reserved && j.Status != Queued {
		return fmt.Errorf("status %q is neither reserved nor queued", j.Status)
	}
	return nil
}

// ValidJobID accepts the marquee and environment id alphabet.
func ValidJobID(id string) bool { return entity.ValidID(id) }
