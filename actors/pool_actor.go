package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/persistence"
)

// Messages to a pool actor.
type (
	poolAsk     struct{ job string }
	poolRelease struct{ job string }
	poolGet     struct{ reply chan<- any }
	poolPing    struct{ reply chan<- any }
)

// PoolView is GET /v1/pools/{name}.
type PoolView struct {
	Name      string                  `json:"name"`
	Limit     int                     `json:"limit"`
	Reserved  []PoolJob               `json:"reserved"`
	Queued    []PoolJob               `json:"queued"`
	Malformed []persistence.Malformed `json:"malformed"`
}

// PoolJob is one admission in a PoolView.
type PoolJob struct {
	Job      string    `json:"job"`
	Sequence uint64    `json:"sequence"`
	Since    time.Time `json:"since"`
}

// poolActor is the one authority over a pool's slots (A2): every check and
// reservation is one transition in its mailbox (A3), persisted before the
// marquee hears of it (A10).
type poolActor struct {
	sys       *System
	name      string
	entry     *entry
	run       runner[admission.Pool, admission.Event, admission.Job, admission.Granted, admission.Job]
	malformed []persistence.Malformed
	loaded    bool
}

func (p *poolActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		p.name, p.entry = p.sys.entityOf(ctx.Self(), kindPool)
		p.run = runner[admission.Pool, admission.Event, admission.Job, admission.Granted, admission.Job]{
			sys: p.sys, entry: p.entry, key: key{kindPool, p.name}, step: p.stepPool, stage: p.stage, start: p.start}
		p.load()
		return
	case actor.SystemMessage, actor.AutoReceiveMessage, *actor.Restarting, *actor.Stopping:
		return
	}
	defer p.entry.handled(p.sys.cfg.Metrics)
	switch m := ctx.Message().(type) {
	case poolAsk:
		p.step(admission.Ask{Job: m.job}, 0)
	case poolRelease:
		p.step(admission.Release{Job: m.job}, 0)
	case retryEvent:
		p.sys.retries.Add(-1)
		p.step(m.ev.(admission.Event), m.attempt)
	case poolGet:
		m.reply <- p.view()
	case poolPing:
		if !p.loaded {
			m.reply <- fmt.Errorf("%w: pool %s did not load", ErrUnavailable, p.name)
			return
		}
		m.reply <- true
	}
}

// rebuildPool is a pool as its stored records say (A7): queued jobs in
// sequence order, and every record that could not be used, with why (A8).
// The pool's actor loads itself with it; another node shows the pool with
// it (C4).
func rebuildPool(store *persistence.Store, name string, limit int) (admission.Pool, []persistence.Malformed, error) {
	meta, jobs, bad, err := store.LoadPool(name)
	if err != nil {
		return admission.Pool{}, nil, err
	}
	pool, invalid := admission.Rebuild(name, limit, meta.NextSequence, jobs)
	for _, m := range invalid {
		bad = append(bad, persistence.Malformed{Key: "a/" + name + "/" + m.Job, Reason: m.Reason})
	}
	return pool, bad, nil
}

// load rebuilds the pool from storage (A7): queued jobs in sequence order,
// malformed records reported (A8), and every reserved job reconciled with
// its owner, which keeps or releases it, before it counts as resumed.
func (p *poolActor) load() {
	limit, ok := p.sys.cfg.Pools[p.name]
	if !ok {
		p.sys.log.Warn("pool is not configured; using limit 1", "pool", p.name)
		limit = 1
	}
	pool, bad, err := rebuildPool(p.sys.cfg.Store, p.name, limit)
	if err != nil {
		p.sys.log.Error("pool not loaded", "pool", p.name, "err", err)
		panic(fmt.Sprintf("pool %s: %v", p.name, err)) // the supervisor retries, then parks
	}
	p.run.rec, p.malformed, p.loaded = pool, bad, true
	p.gauge()
	for _, m := range bad {
		p.sys.log.Error("malformed admission record", "pool", p.name, "key", m.Key, "reason", m.Reason)
		p.sys.cfg.Metrics.Malformed.WithLabelValues("admission").Inc()
	}
	for _, j := range pool.Reserved {
		p.sys.route(kindMarquee, j.ID, marquee.AdmissionDecided{Status: marquee.AdmissionReserved, Sequence: j.Sequence})
	}
}

// The pool's part of the runner.

func (p *poolActor) stepPool(pool admission.Pool, ev admission.Event, now time.Time) (admission.Pool, admission.Ready) {
	pool.Plant = p.sys.cfg.Plant
	return admission.Step(pool, ev, now)
}

func (p *poolActor) stage(b *persistence.Batch, _, next admission.Pool, rd admission.Ready) {
	for _, j := range rd.Records {
		b.PutAdmission(p.name, j)
	}
	b.PutPoolMeta(p.name, persistence.PoolMeta{NextSequence: next.NextSequence})
}

// start tells every job this step admitted from the queue (A4), once the
// batch is durable (A10).
func (p *poolActor) start(_ admission.Pool, grants []admission.Granted) {
	for _, g := range grants {
		p.sys.route(kindMarquee, g.Job, marquee.AdmissionDecided{Status: marquee.AdmissionReserved, Sequence: g.Sequence})
	}
}

// step applies one ask or release; a failed write is asked again after a
// back-off (A6 makes that safe), and nobody hears what is not durable
// (A10).
func (p *poolActor) step(ev admission.Event, attempt int) {
	rd, err := p.run.apply(ev)
	if err != nil {
		p.sys.retryLater(kindPool, p.name, ev, attempt, err)
		return
	}
	a, asked := ev.(admission.Ask)
	if rd.Err != nil {
		p.sys.log.Warn("admission refused", "pool", p.name, "err", rd.Err)
		if errors.Is(rd.Err, admission.ErrQueueFull) && asked {
			// The marquee cannot wait forever for a place it will not
			// get: it fails like a dispatch that cannot be made.
			p.sys.route(kindMarquee, a.Job, effectDone{ev: marquee.DispatchFinished{Outcome: marquee.DispatchConfiguration}})
		}
		return
	}
	if asked {
		p.sys.route(kindMarquee, a.Job, marquee.AdmissionDecided{Status: statusOf(rd.Answer.Status), Sequence: rd.Answer.Sequence})
	}
	p.gauge()
}

// gauge publishes the pool's occupancy (O12).
func (p *poolActor) gauge() {
	m, pool := p.sys.cfg.Metrics, p.run.rec
	m.PoolReserved.WithLabelValues(p.name).Set(float64(len(pool.Reserved)))
	m.PoolQueued.WithLabelValues(p.name).Set(float64(len(pool.Queued)))
	m.PoolLimit.WithLabelValues(p.name).Set(float64(pool.Limit))
}

func statusOf(s admission.Status) marquee.AdmissionStatus {
	if s == admission.Reserved {
		return marquee.AdmissionReserved
	}
	return marquee.AdmissionQueued
}

func (p *poolActor) view() PoolView { return poolView(p.name, p.run.rec, p.malformed) }

// poolView is what GET /v1/pools/{name} shows of a pool.
func poolView(name string, pool admission.Pool, malformed []persistence.Malformed) PoolView {
	v := PoolView{Name: name, Limit: pool.Limit, Reserved: []PoolJob{}, Queued: []PoolJob{}, Malformed: malformed}
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
