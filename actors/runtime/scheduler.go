package runtime

import (
	"context"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/clock"
)

// Scheduler is every source of concurrency the runtime has: where actors'
// mailboxes run, how an effect runs outside them, and what a caller
// waiting for an answer does meanwhile. Goroutines is production's; the
// simulator supplies its own (sim/sched.go: one run queue it drains one
// message per turn, sim/serial), and the runtime does not know which it
// has. protoactor stays the mailbox and the supervisor.
type Scheduler interface {
	// Mailboxes are every actor's mailbox and the dispatcher its runs go
	// to.
	Mailboxes() (actor.MailboxProducer, actor.Dispatcher)
	// Go runs an effect outside every mailbox, its heartbeat with it
	// (Heartbeats).
	Go(e Effect)
	// Wait is called by a caller about to wait for an answer: true means
	// block (the actors run on their own); false means the scheduler ran
	// the actors until answered() or nothing was left to run.
	Wait(answered func() bool) (block bool)
}

// Effect is one call to the outside world.
type Effect struct {
	// Labels describe it to a scheduler that decides how it runs (the
	// simulator pauses environment driver calls past their lease).
	Labels map[string]string
	Run    func(ctx context.Context)
	// Heartbeat, if set, runs every Every while Run runs: an environment's
	// lease renewal, which a worker paused stops with it.
	Heartbeat func()
	Every     time.Duration
}

// Heartbeats arms e's heartbeat on c until the returned stop is called (at
// the end of Run): each scheduler runs an effect's heartbeat the way it
// runs the effect.
func Heartbeats(c clock.Clock, e Effect) (stop func()) {
	if e.Heartbeat == nil || e.Every <= 0 {
		return func() {}
	}
	var done atomic.Bool
	var beat func()
	beat = func() {
		c.AfterFunc(e.Every, func() {
			if !done.Load() {
				e.Heartbeat()
				beat()
			}
		})
	}
	beat()
	return func() { done.Store(true) }
}

// Goroutines is production's Scheduler: unbounded mailboxes run on
// long-lived workers (workerPool) or by the caller whose ask found the
// actor idle (askMailbox), each effect on its own goroutine bounded by
// timeout with its heartbeat on c, callers blocking.
func Goroutines(timeout time.Duration, c clock.Clock) Scheduler {
	return goroutines{timeout: timeout, clock: c}
}

type goroutines struct {
	timeout time.Duration
	clock   clock.Clock
}

// Mailboxes: unbounded mailboxes that an asker may run (askMailbox), on
// the process's shared workers. The mailbox holds no preallocated ring,
// which matters at a million marquees.
func (goroutines) Mailboxes() (actor.MailboxProducer, actor.Dispatcher) {
	return newAskMailbox, sharedWorkers()
}

func (g goroutines) Go(e Effect) {
	stop := Heartbeats(g.clock, e)
	go func() {
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		defer cancel()
		e.Run(ctx)
	}()
}

func (goroutines) Wait(func() bool) bool { return true }

// actorOptions are every actor's mailbox and dispatcher under s.
func actorOptions(s Scheduler) []actor.PropsOption {
	mailbox, dispatcher := s.Mailboxes()
	return []actor.PropsOption{actor.WithMailbox(mailbox), actor.WithDispatcher(dispatcher)}
}

// sharedWorkers is the process's one pool: every runtime in it shares the
// same workers rather than leaving its own behind, however many tests start.
var sharedWorkers = sync.OnceValue(func() *workerPool { return newWorkerPool(mailboxWorkers) })

// mailboxWorkers is how many mailbox runs go on workers at once; more run
// on fresh goroutines. A run blocked on a commit's fsync holds its worker,
// so there are many more than cores: an idle worker costs its stack only.
const mailboxWorkers = 256

// workerPool is protoactor's dispatcher on long-lived goroutines. Its
// default starts a goroutine per mailbox run, whose stack then grows from
// 8 KiB through a step's frames every time (runtime.newstack was an eighth
// of the durable path's CPU). A run goes to the worker idle the shortest
// time: its stack is the likeliest to be in the cache and still grown (the
// collector shrinks the stacks of goroutines that wait), and under light
// load a few workers do all the work while the rest stay cold. A run is
// handed only to a worker waiting for one, never queued, so a run can never
// wait for a worker that waits for it: with none free and all started it
// gets a goroutine, as before.
type workerPool struct {
	mu sync.Mutex
	// idle are the waiting workers' inboxes, the most recently idle last;
	// an inbox holds one run, and is empty while its worker is listed.
	idle    []chan func()
	started int
	max     int
}

func newWorkerPool(max int) *workerPool { return &workerPool{max: max} }

func (p *workerPool) Schedule(fn func()) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		inbox := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		inbox <- fn
		return
	}
	if p.started < p.max {
		p.started++
		p.mu.Unlock()
		go p.loop(make(chan func(), 1), fn)
		return
	}
	p.mu.Unlock()
	go fn()
}

func (p *workerPool) loop(inbox chan func(), fn func()) {
	for {
		fn()
		p.mu.Lock()
		p.idle = append(p.idle, inbox)
		p.mu.Unlock()
		fn = <-inbox
	}
}

// Throughput is protoactor's default: messages per run before a mailbox
// yields its worker.
func (p *workerPool) Throughput() int { return 300 }

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
