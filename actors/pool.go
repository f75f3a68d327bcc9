package actors

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

// The pool kind: the one authority over a pool's slots. Every check
// and reservation is one transition in its mailbox, persisted before
// the marquee hears of it.

type pools = runtime.Entities[record.Pool, admission.Event, admission.Outcome]
type poolHandle = runtime.Handle[record.Pool, admission.Event, admission.Outcome]

type poolKind struct {
	record.PoolWrites
	sys  *System
	step PoolStep
}

func (poolKind) Name() string { return poolKindName }

// Load rebuilds the pool from storage. A pool that cannot be read is
// a panic: the supervisor retries, then parks it, and nothing is admitted
// from a queue that was never read.
func (k poolKind) Load(name string) (record.Pool, bool, error) {
	limit, ok := k.sys.cfg.Pools[name]
	if !ok {
		k.sys.log.Warn("pool is not configured; using limit 1", "pool", name)
		limit = 1
	}
	pool, bad, err := record.RebuildPool(k.sys.cfg.Store, name, limit)
	if err != nil {
		k.sys.log.Error("pool not loaded", "pool", name, "err", err)
		panic(fmt.Sprintf("pool %s: %v", name, err))
	}
	return record.Pool{Pool: pool, Malformed: bad}, true, nil
}

// Step is the pool's machine; its outcome carries what the step decided
// for every job, each told it once the batch is durable: the asker its
// admission (A6: asked again, it is told again), the jobs admitted from
// the queue their slot (A4), a job the full queue refused its failure.
func (k poolKind) Step(rec record.Pool, ev admission.Event, now time.Time) (record.Pool, admission.Outcome) {
	p, rd := k.step(rec.Pool, ev, now)
	rec.Pool = p
	for _, t := range rd.Effects {
		ev := marquee.Event(marquee.AdmissionDecided{Status: statusOf(t.Status), Sequence: t.Sequence})
		if t.Status == admission.Refused {
			ev = queueFull
		}
		rd.Messages = append(rd.Messages, entity.Message{Kind: marqueeKindName, ID: t.Job, Event: ev})
	}
	return rec, rd
}

// A pool is stored as its jobs' records: there is always one to load.
func (poolKind) Stored(string) (bool, error)                     { return true, nil }
func (poolKind) Admit(record.Pool, admission.Event) error        { return nil }
func (poolKind) Holds(record.Pool) bool                          { return false }
func (poolKind) Idle(record.Pool, bool) bool                     { return false }
func (poolKind) Copy(rec record.Pool) record.Pool                { return rec }
func (poolKind) Run(*poolHandle, record.Pool, admission.Outcome) {}

// Woken: a pool has no deadlines; it reconciles on its own timer
// (reconcilePools).
func (poolKind) Woken(*poolHandle) {}

// Activated reports malformed records and reconciles every reserved job
// with its owner, which keeps or releases it.
func (k poolKind) Activated(h *poolHandle, _ bool) {
	rec := h.Record()
	k.gauge(h.ID(), rec.Pool)
	for _, m := range rec.Malformed {
		k.sys.log.Error("malformed admission record", "pool", h.ID(), "key", m.Key, "reason", m.Reason)
		k.sys.cfg.Metrics.Malformed.WithLabelValues("admission").Inc()
	}
	reconcileJobs(k.sys, h)
}

// reconcileJobs tells every reserved job its slot again: its marquee keeps
// it, or releases one it no longer holds. A pool does it when it
// starts and every PoolReconcileEvery after: on a cluster a release sent
// by a node that died before delivering it is otherwise lost, and the
// slot with it.
func reconcileJobs(s *System, h *poolHandle) {
	for _, j := range h.Record().Pool.Reserved {
		s.marquees.Tell(j.ID, marquee.AdmissionDecided{Status: marquee.AdmissionReserved, Sequence: j.Sequence})
	}
}

// PoolReconcileEvery is how often a pool reconciles its reserved jobs.
const PoolReconcileEvery = 5 * time.Minute

// reconcilePools gives each pool this node holds its turn of
// reconcileJobs, in its mailbox.
func (s *System) reconcilePools() {
	for _, name := range s.poolNames() {
		if s.rt.Owns(s.pools.Key(name)) {
			s.pools.InTurn(name, func(h *poolHandle) { reconcileJobs(s, h) })
		}
	}
}

// Observe counts the pool's occupancy and logs a refusal.
func (k poolKind) Observe(v runtime.View[record.Pool], _ admission.Event, _, next record.Pool, rd admission.Outcome) {
	if rd.Answer.Status == admission.Refused {
		k.sys.log.Warn("admission refused: the pool's queue is full", "pool", v.ID, "job", rd.Answer.ID)
	}
	k.gauge(v.ID, next.Pool)
}

// gauge publishes the pool's occupancy.
func (k poolKind) gauge(name string, pool admission.Pool) {
	m := k.sys.cfg.Metrics
	m.PoolReserved.WithLabelValues(name).Set(float64(len(pool.Reserved)))
	m.PoolQueued.WithLabelValues(name).Set(float64(len(pool.Queued)))
	m.PoolLimit.WithLabelValues(name).Set(float64(pool.Limit))
}

func statusOf(s admission.Standing) marquee.AdmissionStatus {
	if s == admission.Reserved {
		return marquee.AdmissionReserved
	}
	return marquee.AdmissionQueued
}

func admissionAsk(job string) admission.Event     { return admission.Ask{Job: job} }
func admissionRelease(job string) admission.Event { return admission.Release{Job: job} }

// The events a marquee on another node sends a pool.
type poolWire struct {
	Type string `json:"type"`
	Job  string `json:"job"`
}

func (poolKind) EncodeEvent(ev admission.Event) ([]byte, bool) {
	var w poolWire
	switch v := ev.(type) {
	case admission.Ask:
		w = poolWire{Type: "ask", Job: v.Job}
	case admission.Release:
		w = poolWire{Type: "release", Job: v.Job}
	default:
		return nil, false
	}
	b, _ := json.Marshal(w)
	return b, true
}

func (poolKind) DecodeEvent(b []byte) (admission.Event, error) {
	var w poolWire
	if err := strictJSON(b, &w); err != nil {
		return nil, err
	}
	if w.Job == "" || len(w.Job) > 200 {
		return nil, fmt.Errorf("pool event: job id of 1..200 bytes")
	}
	switch w.Type {
	case "ask":
		return admission.Ask{Job: w.Job}, nil
	case "release":
		return admission.Release{Job: w.Job}, nil
	}
	return nil, fmt.Errorf("pool event %q", w.Type)
}

// PoolView is GET /v1/pools/{name}.
type PoolView struct {
	Name      string                  `json:"name"`
	Limit     int                     `json:"limit"`
	Reserved  []PoolJob               `json:"reserved"`
	Queued    []PoolJob               `json:"queued"`
	Malformed []persistence.Malformed `json:"malformed"`
	// state is the pool as read, for Awaiting.
	state admission.Pool
}

// Awaiting is what would move the pool now and what each input would do,
// its machine's own answer (admission.Awaiting, O17).
func (v PoolView) Awaiting(now time.Time) []admission.Input { return admission.Awaiting(v.state, now) }

// PoolJob is one admission in a PoolView.
type PoolJob struct {
	Job      string    `json:"job"`
	Sequence uint64    `json:"sequence"`
	Since    time.Time `json:"since"`
}

// poolView is what GET /v1/pools/{name} shows of a pool.
func poolView(name string, pool admission.Pool, malformed []persistence.Malformed) PoolView {
	v := PoolView{Name: name, Limit: pool.Limit, Reserved: []PoolJob{}, Queued: []PoolJob{}, Malformed: malformed, state: pool}
	if v.Malformed == nil {
		v.Malformed = []persistence.Malformed{}
	}
	for _, j := range pool.Reserved {
		v.Reserved = append(v.Reserved, PoolJob{Job: j.ID, Sequence: j.Sequence, Since: j.Since})
	}
	for _, j := range pool.Queued {
		v.Queued = append(v.Queued, PoolJob{Job: j.ID, Sequence: j.Sequence, Since: j.Since})
	}
	return v
}
