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
	pool      admission.Pool
	malformed []persistence.Malformed
	loaded    bool
}

func (p *poolActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		p.name, p.entry = p.sys.entityOf(ctx.Self(), kindPool)
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

// load rebuilds the pool from storage (A7): queued jobs in sequence order,
// malformed records reported (A8), and every reserved job reconciled with
// its owner, which keeps or releases it, before it counts as resumed.
func (p *poolActor) load() {
	limit, ok := p.sys.cfg.Pools[p.name]
	if !ok {
		p.sys.log.Warn("pool is not configured; using limit 1", "pool", p.name)
		limit = 1
	}
	meta, jobs, bad, err := p.sys.cfg.Store.LoadPool(p.name)
	if err != nil {
		p.sys.log.Error("pool not loaded", "pool", p.name, "err", err)
		panic(fmt.Sprintf("pool %s: %v", p.name, err)) // the supervisor retries, then parks
	}
	pool, invalid := admission.Rebuild(p.name, limit, meta.NextSequence, jobs)
	for _, m := range invalid {
		bad = append(bad, persistence.Malformed{Key: "a/" + p.name + "/" + m.Job, Reason: m.Reason})
	}
	p.pool, p.malformed, p.loaded = pool, bad, true
	for _, m := range bad {
		p.sys.log.Error("malformed admission record", "pool", p.name, "key", m.Key, "reason", m.Reason)
		p.sys.cfg.Metrics.Malformed.WithLabelValues("admission").Inc()
	}
	for _, j := range pool.Reserved {
		p.sys.route(kindMarquee, j.ID, marquee.AdmissionDecided{Status: marquee.AdmissionReserved, Sequence: j.Sequence})
	}
}

func (p *poolActor) step(ev admission.Event, attempt int) {
	now := p.sys.cfg.Clock.Now()
	p.pool.Plant = p.sys.cfg.Plant
	next, out, err := admission.Step(p.pool, ev, now)
	if err != nil {
		p.sys.log.Warn("admission refused", "pool", p.name, "err", err)
		if errors.Is(err, admission.ErrQueueFull) {
			if a, ok := ev.(admission.Ask); ok {
				// The marquee cannot wait forever for a place it will not
				// get: it fails like a dispatch that cannot be made.
				p.sys.route(kindMarquee, a.Job, effectDone{ev: marquee.DispatchFinished{Outcome: marquee.DispatchConfiguration}})
			}
		}
		return
	}
	if len(out.Changed) > 0 {
		b := p.sys.cfg.Store.NewBatch()
		for _, j := range out.Changed {
			b.PutAdmission(p.name, j)
		}
		b.PutPoolMeta(p.name, persistence.PoolMeta{NextSequence: next.NextSequence})
		start := time.Now()
		err := b.Commit()
		p.sys.cfg.Metrics.Persist.Observe(time.Since(start).Seconds())
		if err != nil {
			// Nobody is told anything that is not durable (A10); the same
			// question is put again after a back-off (A6 makes it safe).
			p.sys.retryLater(kindPool, p.name, ev, attempt, err)
			return
		}
	}
	before := p.pool
	p.pool = next
	p.sys.committed(kindPool, p.name, ev, before, next, out)
	if a, ok := ev.(admission.Ask); ok {
		p.sys.route(kindMarquee, a.Job, marquee.AdmissionDecided{Status: statusOf(out.Answer.Status), Sequence: out.Answer.Sequence})
	}
	for _, g := range out.Granted {
		p.sys.route(kindMarquee, g.Job, marquee.AdmissionDecided{Status: marquee.AdmissionReserved, Sequence: g.Sequence})
	}
}

func statusOf(s admission.Status) marquee.AdmissionStatus {
	if s == admission.Reserved {
		return marquee.AdmissionReserved
	}
	return marquee.AdmissionQueued
}

func (p *poolActor) view() PoolView {
	v := PoolView{Name: p.name, Limit: p.pool.Limit, Reserved: []PoolJob{}, Queued: []PoolJob{}, Malformed: p.malformed}
	if v.Malformed == nil {
		v.Malformed = []persistence.Malformed{}
	}
	for _, j := range p.pool.Reserved {
		v.Reserved = append(v.Reserved, PoolJob{Job: j.ID, Sequence: j.Sequence, Since: j.Since})
	}
	for _, j := range p.pool.Queued {
		v.Queued = append(v.Queued, PoolJob{Job: j.ID, Sequence: j.Sequence, Since: j.Since})
	}
	return v
}
