package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/persistence"
)

// The branch actor: route generations of one branch, given out in order.

// branchNext asks a branch actor for the next route generation.
type branchNext struct{ reply chan<- any }

// branchActor gives out a branch's route generations one at a time, durably,
// so that a newer preview of a branch always has a higher generation (E8,
// I14) even when two are created at once.
type branchActor struct {
	sys    *System
	entry  *entry
	run    runner[environment.Branch, environment.NextGeneration, uint64, entity.None, entity.None]
	loaded bool
}

func (b *branchActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		var name string
		name, b.entry = b.sys.entityOf(ctx.Self(), kindBranch)
		b.run = runner[environment.Branch, environment.NextGeneration, uint64, entity.None, entity.None]{
			sys: b.sys, entry: b.entry, key: key{kindBranch, name}, rec: environment.Branch{Name: name}, step: environment.StepBranch,
			stage: func(batch *persistence.Batch, _, next environment.Branch, _ environment.BranchReady) {
				batch.PutBranchGeneration(next.Name, next.Last)
			},
			start: func(environment.Branch, []entity.None) {}}
		return
	case idleCheck:
		// Nothing is in flight between messages: an idle branch goes, and
		// reloads its last generation from the store when asked again.
		ctx.Send(b.sys.registry, passivate{key: b.run.key, pid: ctx.Self()})
		return
	case actor.SystemMessage, actor.AutoReceiveMessage, *actor.Restarting, *actor.Stopping:
		return
	}
	defer b.entry.handled(b.sys.cfg.Metrics)
	m, ok := ctx.Message().(branchNext)
	if !ok {
		return
	}
	if !b.loaded {
		g, err := b.sys.cfg.Store.BranchGeneration(b.run.rec.Name)
		if err != nil {
			m.reply <- fmt.Errorf("%w: branch %s: %v", ErrUnavailable, b.run.rec.Name, err)
			return
		}
		b.run.rec.Last, b.loaded = g, true
	}
	rd, err := b.run.apply(environment.NextGeneration{})
	if err != nil {
		m.reply <- err
		return
	}
	m.reply <- rd.Answer
}
