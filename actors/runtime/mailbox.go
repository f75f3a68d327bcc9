package runtime

import (
	goruntime "runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// askMailbox is production's mailbox: protoactor's unbounded one, with one
// difference. A caller's ask that finds its actor idle runs the actor's
// turn on the caller's own goroutine (inlineClaim), instead of handing it
// to a worker and sleeping until the worker wakes it with the answer: two
// goroutine hand-offs a request, each a wake-up of another thread when
// a core is idle, a cost the durable path's profile shows (BENCHMARKS.md).
// Turns still never overlap and messages keep
// their order: whoever runs the mailbox holds it (status), as a worker
// does.
type askMailbox struct {
	mu           sync.Mutex
	user, system fifo[posted]
	userN, sysN  atomic.Int32 // counted outside mu, for the idle check
	status       atomic.Int32 // mailboxIdle or mailboxRunning
	suspended    atomic.Bool  // by the supervisor while it decides
	invoker      actor.MessageInvoker
	dispatcher   actor.Dispatcher
	run          func() // processMessages, made once
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

func newAskMailbox() actor.Mailbox {
	return &askMailbox{}
}

func (m *askMailbox) PostUserMessage(msg posted) {
	m.push(&m.user, msg)
	m.userN.Add(1)
	if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		return
	}
	if c, ok := msg.(claimer); ok && c.claim(m) {
		return // the asker runs it (Entities.Ask)
	}
	m.dispatcher.Schedule(m.run)
}

func (m *askMailbox) PostSystemMessage(msg posted) {
	m.push(&m.system, msg)
	m.sysN.Add(1)
	if m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		m.dispatcher.Schedule(m.run)
	}
}

func (m *askMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
	m.run = m.processMessages
}

func (m *askMailbox) Start() {}

func (m *askMailbox) UserMessageCount() int { return int(m.userN.Load()) }

// processMessages is a worker's run: until the mailbox is empty.
func (m *askMailbox) processMessages() { m.process(nil) }

// process runs the mailbox it holds until it is empty or, for an asker,
// until answered says its answer is there; then it lets go, and what came
// meanwhile goes to a worker, so that an asker does the messages ahead of
// its own and its own, never a busy actor's whole queue.
func (m *askMailbox) process(answered func() bool) {
	for {
		m.drain(answered)
		m.status.Store(mailboxIdle)
		if m.sysN.Load() == 0 && (m.suspended.Load() || m.userN.Load() == 0) {
			return
		}
		if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return // a poster took it
		}
		if answered != nil {
			m.dispatcher.Schedule(m.run)
			return
		}
	}
}

// drain is protoactor's message loop: system messages first, user ones
// unless suspended, a yield every Throughput messages; a panic goes to the
// supervisor.
func (m *askMailbox) drain(answered func() bool) {
	var msg posted
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for i, t := 0, m.dispatcher.Throughput(); ; i++ {
		if i > t {
			i = 0
			goruntime.Gosched()
		}
		if msg = m.pop(&m.system); msg != nil {
			m.sysN.Add(-1)
			if suspend, set := systemMessage(m.invoker, msg); set {
				m.suspended.Store(suspend)
			}
			continue
		}
		if m.suspended.Load() || answered != nil && answered() {
			return
		}
		if msg = m.pop(&m.user); msg == nil {
			return
		}
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

func (m *askMailbox) push(q *fifo[posted], msg posted) {
	m.mu.Lock()
	q.push(msg)
	m.mu.Unlock()
}

func (m *askMailbox) pop(q *fifo[posted]) posted {
	m.mu.Lock()
	msg, _ := q.pop()
	m.mu.Unlock()
	return msg
}

// fifo is a mailbox's queue, on one array, as the simulator's serial
// run queue: a popped slot is cleared, the array is reused once the queue
// empties, and a long-lived queue that never empties is compacted. An
// empty queue holds on to at most mailboxKeeps of capacity, so that an
// idle actor does not keep a burst's array.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }

func (q *fifo[T]) pop() (T, bool) {
	var zero T
	if q.head == len(q.items) {
		return zero, false
	}
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		q.head = 0
		if cap(q.items) > mailboxKeeps {
			q.items = nil
		} else {
			q.items = q.items[:0]
		}
	case q.head > 1024 && q.head*2 > len(q.items):
		q.items = append(q.items[:0], q.items[q.head:]...)
		q.head = 0
	}
	return v, true
}

// mailboxKeeps is the most an empty mailbox queue keeps.
const mailboxKeeps = 16

// posted is whatever protoactor posts to a mailbox: its Mailbox interface
// takes any value.
type posted = any

// systemMessage carries out a system message: suspending and resuming
// are the mailbox's own, returned as suspend with set; any other goes to
// the actor.
func systemMessage(inv actor.MessageInvoker, msg posted) (suspend, set bool) {
	switch msg.(type) {
	case *actor.SuspendMailbox:
		return true, true
	case *actor.ResumeMailbox:
		return false, true
	}
	inv.InvokeSystemMessage(msg)
	return false, false
}

// claimer is a message whose sender may run the turn it starts.
type claimer interface{ claim(m *askMailbox) bool }

// inlineClaim lets an asker run the turn its request starts. The mailbox
// claims the request for the asker when it finds the actor idle, unless
// the asker closed the claim first: a request the registry delivers later
// (an actor not live yet) reaches a mailbox after Ask stopped looking,
// and goes to a worker like any message.
type inlineClaim struct {
	state atomic.Int32 // claimOpen, claimTaken or claimClosed
	mb    *askMailbox  // set before the state says claimTaken
}

const (
	claimOpen int32 = iota
	claimTaken
	claimClosed
)

func (c *inlineClaim) take(m *askMailbox) bool {
	if c == nil {
		return false // the asker runs nothing itself (Ask)
	}
	c.mb = m
	return c.state.CompareAndSwap(claimOpen, claimTaken)
}

// close ends the claim: the mailbox the asker now holds, or nil.
func (c *inlineClaim) close() *askMailbox {
	if c == nil || c.state.CompareAndSwap(claimOpen, claimClosed) {
		return nil
	}
	return c.mb
}
