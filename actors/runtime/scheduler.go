package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Scheduler is every source of concurrency the runtime has: how actors'
// mailboxes are run, how an effect runs outside them, and what a caller
// waiting for an answer does meanwhile. Goroutines is production's; the
// simulator gives its own one-thread queue (sim/sched.go), so production
// code needs no branch of its own for it.
type Scheduler interface {
	// ActorOptions are every actor's mailbox and dispatcher.
	ActorOptions() []actor.PropsOption
	// Go runs an effect outside every mailbox. live reports whether the
	// worker running it stays alive meanwhile (renews its leases, E7);
	// only a simulated pause says no.
	Go(e Effect) (live bool)
	// Wait is called by a caller about to wait for an answer: true means
	// block (the actors run on their own); false means the scheduler ran
	// the actors until answered() or nothing was left to run.
	Wait(answered func() bool) (block bool)
}

// Effect is one call to the outside world.
type Effect struct {
	// Detail describes it to a scheduler that decides how it runs (the
	// simulator pauses environment driver calls past their lease).
	Detail any
	Run    func(ctx context.Context)
}

// Goroutines is production's Scheduler: lock-free unbounded mailboxes run
// on long-lived workers (workerPool), each effect on its own goroutine
// bounded by timeout, callers blocking.
func Goroutines(timeout time.Duration) Scheduler {
	return goroutines{timeout: timeout, workers: sharedWorkers()}
}

// sharedWorkers is the process's one pool: every runtime in it (tests
// start many) shares the same workers rather than leaving its own behind.
var sharedWorkers = sync.OnceValue(func() *workerPool { return newWorkerPool(mailboxWorkers) })

type goroutines struct {
	timeout time.Duration
	workers *workerPool
}

// ActorOptions: a lock-free mailbox holds no preallocated ring, which
// matters at a million marquees.
func (g goroutines) ActorOptions() []actor.PropsOption {
	return []actor.PropsOption{actor.WithMailbox(actor.UnboundedLockfree()), actor.WithDispatcher(g.workers)}
}

// mailboxWorkers is how many mailbox runs go on workers at once; more run
// on fresh goroutines. A run blocked on a commit's fsync holds its worker,
// so there are many more than cores: an idle worker costs its stack only.
const mailboxWorkers = 256

// workerPool is protoactor's dispatcher on long-lived goroutines. Its
// default starts a goroutine per mailbox run, whose stack then grows from
// 8 KiB through a step's frames every time (runtime.newstack was an eighth
// of the durable path's CPU); a worker's stack stays grown. A run is handed
// only to a worker waiting for one, never queued, so a run can never wait
// for a worker that waits for it: with none free it gets a goroutine, as
// before.
type workerPool struct{ work chan func() }

func newWorkerPool(n int) *workerPool {
	p := &workerPool{work: make(chan func())}
	for range n {
		go p.loop()
	}
	return p
}

func (p *workerPool) loop() {
	for fn := range p.work {
		fn()
	}
}

func (p *workerPool) Schedule(fn func()) {
	select {
	case p.work <- fn:
	default:
		go fn()
	}
}

// Throughput is protoactor's default: messages per run before a mailbox
// yields its worker.
func (p *workerPool) Throughput() int { return 300 }

func (g goroutines) Go(e Effect) bool {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		defer cancel()
		e.Run(ctx)
	}()
	return true
}

func (goroutines) Wait(func() bool) bool { return true }
