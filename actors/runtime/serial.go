package runtime

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
)

// RunQueue is a serial scheduler's dispatcher: every mailbox run is
// appended, and whoever drives the queue (the simulator) runs one per Step,
// in order, on its own goroutine.
type RunQueue struct{ fns fifo[func()] }

// Schedule appends a mailbox run.
func (q *RunQueue) Schedule(fn func()) { q.fns.push(fn) }

// Throughput is how many messages a mailbox may handle per turn: one, so
// that actors interleave at message granularity.
func (q *RunQueue) Throughput() int { return 1 }

// Step runs the next scheduled function; false when there is none.
func (q *RunQueue) Step() bool {
	fn, ok := q.fns.pop()
	if ok {
		fn()
	}
	return ok
}

// ProcessCrash is the panic value that kills a whole simulated process,
// not just one actor: a serial mailbox lets it through instead of turning
// it into an actor failure.
type ProcessCrash struct{ Point string }

// posted is whatever protoactor posts to a mailbox: its Mailbox interface
// takes any value, and stepMailbox only queues it.
type posted = any

// stepMailbox handles one message per turn and reschedules itself while it
// holds more. Single-threaded by construction, so it needs no atomics.
type stepMailbox struct {
	user, system []posted
	invoker      actor.MessageInvoker
	dispatcher   actor.Dispatcher
	scheduled    bool
	suspended    bool
}

func newStepMailbox() actor.Mailbox { return &stepMailbox{} }

func (m *stepMailbox) PostUserMessage(msg posted) {
	m.user = append(m.user, msg)
	m.schedule()
}

func (m *stepMailbox) PostSystemMessage(msg posted) {
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
	var msg posted
	defer func() {
		if r := recover(); r != nil {
			if _, crash := r.(ProcessCrash); crash {
				panic(r)
			}
			if os.Getenv("SIMDEBUG") != "" {
				fmt.Fprintln(os.Stderr, r, string(debug.Stack()))
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
		if suspend, set := systemMessage(m.invoker, msg); set {
			m.suspended = suspend
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
