// Package serial is the simulator's mailbox and dispatcher for protoactor:
// every mailbox run goes on one run queue, which whoever drives it (the
// simulator, or a test of the runtime) drains one message per turn on its
// own goroutine, so that actors interleave at message granularity and in
// an order the seed decides. It imports nothing of warden, so the
// runtime's own tests can use it too.
package serial

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
)

// RunQueue is the dispatcher: every mailbox run is appended and run, in
// order, one per Step.
type RunQueue struct {
	fns  []func()
	head int
}

// Schedule appends a mailbox run.
func (q *RunQueue) Schedule(fn func()) { q.fns = append(q.fns, fn) }

// Throughput is how many messages a mailbox may handle per turn: one, so
// that actors interleave at message granularity.
func (q *RunQueue) Throughput() int { return 1 }

// Step runs the next scheduled function; false when there is none.
func (q *RunQueue) Step() bool {
	if q.head == len(q.fns) {
		q.fns, q.head = q.fns[:0], 0
		return false
	}
	fn := q.fns[q.head]
	q.fns[q.head] = nil
	q.head++
	if q.head > 1024 && q.head*2 > len(q.fns) { // a queue that never empties is compacted
		q.fns, q.head = append(q.fns[:0], q.fns[q.head:]...), 0
	}
	fn()
	return true
}

// ProcessCrash is the panic value that kills a whole simulated process,
// not just one actor: the mailbox lets it through instead of turning it
// into an actor failure.
type ProcessCrash struct{ Point string }

// NewMailbox is an actor's mailbox on a RunQueue (actor.MailboxProducer).
func NewMailbox() actor.Mailbox { return &mailbox{} }

// mailbox handles one message per turn and reschedules itself while it
// holds more. Single-threaded by construction, so it needs no atomics.
type mailbox struct {
	user, system []any
	invoker      actor.MessageInvoker
	dispatcher   actor.Dispatcher
	scheduled    bool
	suspended    bool
}

func (m *mailbox) PostUserMessage(msg any) {
	m.user = append(m.user, msg)
	m.schedule()
}

func (m *mailbox) PostSystemMessage(msg any) {
	m.system = append(m.system, msg)
	m.schedule()
}

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

func (m *mailbox) Start() {}

func (m *mailbox) UserMessageCount() int { return len(m.user) }

func (m *mailbox) schedule() {
	if !m.scheduled {
		m.scheduled = true
		m.dispatcher.Schedule(m.run)
	}
}

func (m *mailbox) more() bool {
	return len(m.system) > 0 || (!m.suspended && len(m.user) > 0)
}

func (m *mailbox) run() {
	m.scheduled = false
	var msg any
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
