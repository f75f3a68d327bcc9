package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
)

// The branch actor: route generations of one branch, given out in order.

// branchNext asks a branch actor for the next route generation.
type branchNext struct{ reply chan<- any }

// branchActor gives out a branch's route generations one at a time, durably,
// so that a newer preview of a branch always has a higher generation (E8,
// I14) even when two are created at once.
type branchActor struct {
	sys    *System
	name   string
	entry  *entry
	last   uint64
	loaded bool
}

func (b *branchActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		b.name, b.entry = b.sys.entityOf(ctx.Self(), kindBranch)
		return
	case idleCheck:
		// Nothing is in flight between messages: an idle branch goes, and
		// reloads its last generation from the store when asked again.
		ctx.Send(b.sys.registry, passivate{key: key{kindBranch, b.name}, pid: ctx.Self()})
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
		g, err := b.sys.cfg.Store.BranchGeneration(b.name)
		if err != nil {
			m.reply <- fmt.Errorf("%w: branch %s: %v", ErrUnavailable, b.name, err)
			return
		}
		b.last, b.loaded = g, true
	}
	batch := b.sys.cfg.Store.NewBatch()
	batch.PutBranchGeneration(b.name, b.last+1)
	if err := batch.Commit(); err != nil {
		m.reply <- fmt.Errorf("%w: branch %s: %v", ErrUnavailable, b.name, err)
		return
	}
	b.last++
	m.reply <- b.last
}
