package runtime

import (
	"context"
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
