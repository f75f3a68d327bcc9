// Package sim is warden's deterministic simulator (docs/rules/simulation.md):
// the real actors, state machines, HTTP handlers and Pebble store, driven on
// one goroutine from one seed on a virtual clock, against a simulated
// workflow runner, cloud, control plane and operators, with faults at every
// boundary and the invariants checked after every step.
//
// Determinism comes from owning every source of concurrency: protoactor's
// dispatcher is a run queue this package drains one message at a time
// (sim/serial), a caller waiting for an actor's answer pumps that queue,
// driver calls are events on the virtual timeline, time is a manual clock,
// and every random draw comes from a generator seeded by the run's seed.
// Pebble runs for real on an in-memory filesystem; its background work
// cannot change what a read returns, so it cannot change the trace.
package sim

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/sim/serial"
)

// scheduler is the simulation's runtime.Scheduler for one incarnation:
// every mailbox on its run queue, every effect an event on the virtual
// timeline, and a caller waiting for an answer runs the queue itself.
type scheduler struct {
	w   *world
	p   *proc
	inc int
}

// Mailboxes: every mailbox on the process's run queue, one message a turn.
func (s *scheduler) Mailboxes() (actor.MailboxProducer, actor.Dispatcher) {
	return serial.NewMailbox, s.p.q
}

// Go schedules the effect after a drawn latency, its heartbeat on the
// virtual clock meanwhile; an environment driver call may instead pause
// its whole worker past its lease, heartbeat and all (envEffect).
func (s *scheduler) Go(e runtime.Effect) {
	delay, beats := s.w.uniform(0, 3*time.Second), true
	if e.Labels["kind"] == "environment" {
		delay, beats = s.w.envEffect(s.p, s.inc, e.Labels)
	}
	stop := func() {}
	if beats {
		stop = runtime.Heartbeats(procClock{w: s.w, p: s.p, inc: s.inc}, e)
	}
	s.w.effectAfter(s.p, s.inc, delay, func(ctx context.Context) {
		stop()
		e.Run(ctx)
	})
}

// Wait runs queued actor steps of this process until the answer is in or
// nothing is left to run (or this incarnation has died, or its node been
// paused, meanwhile): never blocks.
func (s *scheduler) Wait(answered func() bool) bool {
	p := s.p
	for !answered() && p.inc == s.inc && (p.node == nil || !p.node.paused) && p.q.Step() {
		s.w.messages++
	}
	return false
}
