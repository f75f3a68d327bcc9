// Package sim is warden's deterministic simulator (docs/rules/simulation.md):
// the real actors, state machines, HTTP handlers and Pebble store, driven on
// one goroutine from one seed on a virtual clock, against a simulated
// workflow runner, cloud, control plane and operators, with faults at every
// boundary and the invariants checked after every step.
//
// Determinism comes from owning every source of concurrency: protoactor's
// dispatcher is a run queue this package drains one message at a time
// (stepMailbox), a caller waiting for an actor's answer pumps that queue,
// driver calls are events on the virtual timeline, time is a manual clock,
// and every random draw comes from a generator seeded by the run's seed.
// Pebble runs for real on an in-memory filesystem; its background work
// cannot change what a read returns, so it cannot change the trace.
package sim

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/runtime"
)

// runQueue is the simulation's protoactor dispatcher: Schedule appends, the
// simulator runs one function per step, in order.
type runQueue struct {
	fns  []func()
	head int
}

func (q *runQueue) Schedule(fn func()) { q.fns = append(q.fns, fn) }

// Throughput is how many messages a mailbox may handle per turn: one, so
// that actors interleave at message granularity.
func (q *runQueue) Throughput() int { return 1 }

// step runs the next scheduled function; false when there is none.
func (q *runQueue) step() bool {
	if q.head == len(q.fns) {
		return false
	}
	fn := q.fns[q.head]
	q.fns[q.head] = nil
	q.head++
	if q.head > 1024 && q.head*2 > len(q.fns) {
		q.fns = append(q.fns[:0], q.fns[q.head:]...)
		q.head = 0
	}
	fn()
	return true
}

// processCrash is the panic value that kills the whole simulated process
// (not just one actor): mailboxes let it through instead of turning it
// into an actor failure.
type processCrash struct{ point string }

// stepMailbox handles one message per turn and reschedules itself while it
// holds more. Single-threaded by construction, so it needs no atomics.
type stepMailbox struct {
	user, system []any
	invoker      actor.MessageInvoker
	dispatcher   actor.Dispatcher
	scheduled    bool
	suspended    bool
}

func newStepMailbox() actor.Mailbox { return &stepMailbox{} }

func (m *stepMailbox) PostUserMessage(msg any) {
	m.user = append(m.user, msg)
	m.schedule()
}

func (m *stepMailbox) PostSystemMessage(msg any) {
	m.system = append(m.system, msg)
	m.schedule()
}

func (m *stepMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

func (m *stepMailbox) Start() {}

func (m *stepMailbox) UserMessageCount() int { return len(m.user) }

func (m *stepMailbox) schedule() {
	if !m.scheduled {
		m.scheduled = true
		m.dispatcher.Schedule(m.run)
	}
}

func (m *stepMailbox) more() bool {
	return len(m.system) > 0 || (!m.suspended && len(m.user) > 0)
}

func (m *stepMailbox) run() {
	m.scheduled = false
	var msg any
	defer func() {
		if r := recover(); r != nil {
			if _, crash := r.(processCrash); crash {
				panic(r)
			}
			m.invoker.EscalateFailure(r, msg)
		}
		if m.more() {
			m.schedule()
		}
	}()
	if len(m.system) > 0 {
		msg = m.system[0]
		m.system = m.system[1:]
		switch msg.(type) {
		case *actor.SuspendMailbox:
			m.suspended = true
		case *actor.ResumeMailbox:
			m.suspended = false
		default:
			m.invoker.InvokeSystemMessage(msg)
		}
		return
	}
	if m.suspended || len(m.user) == 0 {
		return
	}
	msg = m.user[0]
	m.user = m.user[1:]
	m.invoker.InvokeUserMessage(msg)
}

// scheduler is the simulation's runtime.Scheduler for one incarnation:
// every mailbox on its run queue, every effect an event on the virtual
// timeline, and a caller waiting for an answer runs the queue itself.
type scheduler struct {
	w   *world
	inc int
	q   *runQueue
}

func (s *scheduler) ActorOptions() []actor.PropsOption {
	return []actor.PropsOption{actor.WithDispatcher(s.q), actor.WithMailbox(newStepMailbox)}
}

// Go schedules the effect after a drawn latency; an environment driver
// call may instead pause its whole worker past its lease (envEffect).
func (s *scheduler) Go(e runtime.Effect) bool {
	if req, ok := e.Detail.(driver.CapabilityRequest); ok {
		return s.w.envEffect(s.inc, req, e.Run)
	}
	s.w.effectAfter(s.inc, s.w.uniform(0, 3*time.Second), e.Run)
	return true
}

// Wait runs queued actor steps until the answer is in or nothing is left
// to run (or this incarnation has died meanwhile): never blocks.
func (s *scheduler) Wait(answered func() bool) bool {
	for !answered() && s.w.inc == s.inc && s.q.step() {
		s.w.messages++
	}
	return false
}

// hooks hands the runtime's commits and failures to the oracles.
type hooks struct{ w *world }

func (h hooks) Committed(c runtime.Commit)      { h.w.onCommit(c) }
func (h hooks) Failed(actor string, reason any) { h.w.actorFailed(actor, reason) }
