package runtime

import (
	"bytes"
	"context"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/faultfs"
)

// goid is the calling goroutine's id, read from its stack's header: for
// tests only, to tell whose goroutine ran a turn.
func goid() int64 {
	buf := make([]byte, 64)
	buf = buf[:goruntime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseInt(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// turnWatch is a counter kind that records, in each turn, the goroutine
// running it and whether another turn of the same entity overlapped it.
// Its events name their entity: event 10+e goes to entity e.
type turnWatch struct {
	counter
	in      *[entitiesWatched]atomic.Int32
	overlap *atomic.Bool
	ranOn   *atomic.Int64
}

const entitiesWatched = 4

// panicEvent makes a turnWatch step panic.
const panicEvent = 99

func (k turnWatch) Step(n, ev int, now time.Time) (int, counted) {
	if ev == panicEvent {
		k.ranOn.Store(goid())
		panic("turnWatch: the step failed")
	}
	in := &k.in[ev%10]
	if in.Add(1) != 1 {
		k.overlap.Store(true)
	}
	k.ranOn.Store(goid())
	goruntime.Gosched() // room for a second turn to start, were it able to
	in.Add(-1)
	return k.counter.Step(n, ev, now)
}

// askUntilRunHere asks id until a turn runs on the asking goroutine and
// returns the record then. An actor is idle, and its asker runs the turn,
// only once the worker that ran the turn before has let the mailbox go,
// which may come after that turn's answer: the caller waits for it
// rather than assume it.
func askUntilRunHere(t *testing.T, ents *Entities[int, int, counted], k turnWatch, id string) int {
	t.Helper()
	var record int
	require.Eventually(t, func() bool {
		res, err := ents.Ask(context.Background(), id, Request[int]{Mode: Command, Event: 10})
		if err != nil {
			return false
		}
		record = res.Record
		return k.ranOn.Load() == goid()
	}, 5*time.Second, time.Millisecond, "an ask to the idle actor runs on its asker's goroutine")
	return record
}

// startOnWorkers starts the kind on production's scheduler: mailboxes on
// the shared workers, callers that block.
func startOnWorkers(t *testing.T) (*Entities[int, int, counted], turnWatch) {
	t.Helper()
	st, err := persistence.Open(t.TempDir(), persistence.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return startOnWorkersWith(t, st)
}

func startOnWorkersWith(t *testing.T, st *persistence.Store) (*Entities[int, int, counted], turnWatch) {
	t.Helper()
	rt, err := New(Config{Store: st, Clock: clock.Real{}, Scheduler: Goroutines(time.Minute, clock.Real{}),
		Cluster: SingleNode(), RestartLimit: 1, RestartWindow: time.Hour, IdleAfter: -1, AskTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(rt.Shutdown)
	k := turnWatch{in: new([entitiesWatched]atomic.Int32), overlap: new(atomic.Bool), ranOn: new(atomic.Int64)}
	var ents *Entities[int, int, counted]
	k.counter = counter{ents: &ents}
	ents = Register(rt, Kind[int, int, counted](k))
	return ents, k
}

// TestC13AnAskToAnIdleActorRunsOnTheCallersGoroutine: once the actor is
// live and idle, the caller's goroutine runs its turn; while a worker
// holds the actor, a caller's request waits its turn in the mailbox and a
// worker runs it, after the turn ahead of it.
func TestC13AnAskToAnIdleActorRunsOnTheCallersGoroutine(t *testing.T) {
	ents, k := startOnWorkers(t)
	ctx := context.Background()
	_, err := ents.Ask(ctx, "c", Request[int]{Mode: Create, Event: 10})
	require.NoError(t, err)

	record := askUntilRunHere(t, ents, k, "c")

	held, release := make(chan struct{}), make(chan struct{})
	ents.InTurn("c", func(*Handle[int, int, counted]) { close(held); <-release })
	<-held
	asked := make(chan int64, 1)
	answered := make(chan Response[int, counted], 1)
	go func() {
		asked <- goid()
		res, err := ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: 10})
		require.NoError(t, err)
		answered <- res
	}()
	asker := <-asked
	select {
	case <-answered:
		t.Fatal("answered while the turn ahead of it still held the actor")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.Equal(t, record+1, (<-answered).Record)
	require.NotEqual(t, asker, k.ranOn.Load(), "a busy actor's request is run by a worker, not its asker")
	require.False(t, k.overlap.Load())
}

// TestC13TurnsNeverOverlapAndKeepEachSendersOrder: callers asking, events
// told and turns run for the kind, all at once on a few entities, all
// live: no two turns of an entity overlap, every step is counted
// once, and each caller sees its own steps in the order it asked.
func TestC13TurnsNeverOverlapAndKeepEachSendersOrder(t *testing.T) {
	ents, k := startOnWorkers(t)
	ctx := context.Background()
	const entities, callers, asks = entitiesWatched, 8, 150
	for e := range entities {
		_, err := ents.Ask(ctx, fmt.Sprint("e", e), Request[int]{Mode: Create, Event: 10 + e})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	var told atomic.Int64
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := map[string]int{}
			for i := range asks {
				e := (c + i) % entities
				id := fmt.Sprint("e", e)
				if i%5 == 0 {
					ents.Tell(id, 10+e)
					told.Add(1)
					continue
				}
				res, err := ents.Ask(ctx, id, Request[int]{Mode: Command, Event: 10 + e})
				if !assert.NoError(t, err) {
					return
				}
				if res.Record <= last[id] {
					t.Errorf("caller %d saw %s at %d after %d: out of its order", c, id, res.Record, last[id])
				}
				last[id] = res.Record
			}
		}()
	}
	wg.Wait()
	total := 0
	require.Eventually(t, func() bool {
		total = 0
		for e := range entities {
			res, err := ents.Ask(ctx, fmt.Sprint("e", e), Request[int]{Mode: Read})
			require.NoError(t, err)
			total += res.Record
		}
		return total == entities+callers*asks
	}, 5*time.Second, time.Millisecond, "every create, ask and told event stepped once")
	require.False(t, k.overlap.Load(), "two turns of one entity overlapped")
	require.Positive(t, told.Load())
}

// The mailbox's queue reuses its array once empty and lets a grown one go.
func TestMailboxQueueIsFIFOAndKeepsNoBurst(t *testing.T) {
	var q fifo[posted]
	for i := range 40 {
		q.push(i)
	}
	for i := range 40 {
		v, ok := q.pop()
		require.True(t, ok)
		require.Equal(t, i, v)
	}
	v, ok := q.pop()
	require.False(t, ok)
	require.Nil(t, v)
	require.Nil(t, q.items, "a burst's array is not kept by an idle mailbox")
	q.push(1)
	v, _ = q.pop()
	require.Equal(t, 1, v)
	require.NotNil(t, q.items, "a small array is kept for the next message")
	require.Zero(t, len(q.items))
}

// TestC13ATurnThatPanicsOnTheCallersGoroutineGoesToTheSupervisor: a
// panic in a turn the caller ran is the actor's failure, as on a worker:
// the caller is not crashed and is answered (by the ask's timeout, as a
// caller whose turn failed on a worker is), and the restarted actor goes
// on.
func TestC13ATurnThatPanicsOnTheCallersGoroutineGoesToTheSupervisor(t *testing.T) {
	ents, k := startOnWorkers(t)
	ctx := context.Background()
	_, err := ents.Ask(ctx, "c", Request[int]{Mode: Create, Event: 10})
	require.NoError(t, err)
	record := askUntilRunHere(t, ents, k, "c")

	k.ranOn.Store(0)
	_, err = ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: panicEvent})
	require.ErrorIs(t, err, errs.Unavailable, "answered with the failure")
	require.Equal(t, goid(), k.ranOn.Load(), "the turn that panicked ran on this goroutine")
	require.Eventually(t, func() bool {
		res, err := ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: 10})
		return err == nil && res.Record == record+1
	}, 5*time.Second, 10*time.Millisecond, "the restarted actor reloads its record and steps again")
}

// heldFlushes holds every write to an sstable while hold is open: Pebble
// cannot flush, so its memtables fill and commits stall.
type heldFlushes struct{ hold chan struct{} }

func (h heldFlushes) String() string { return "held flushes" }

func (h heldFlushes) MaybeError(op errorfs.Op) error {
	if strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpFileWrite {
		<-h.hold
	}
	return nil
}

// TestC13AWriteStallSendsAsksToWorkers: while Pebble stalls writes, an
// ask to an idle actor is not run on the caller's goroutine, whose commit
// would wait out the stall inside the turn: it goes to a worker, and the
// caller is answered within AskTimeout. Once the stall ends, asks commit
// again.
func TestC13AWriteStallSendsAsksToWorkers(t *testing.T) {
	flushes := heldFlushes{hold: make(chan struct{})}
	release := sync.OnceFunc(func() { close(flushes.hold) })
	st, err := persistence.Open("db", persistence.Options{FS: faultfs.Wrap(vfs.NewMem(), flushes), NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ents, _ := startOnWorkersWith(t, st)
	t.Cleanup(release) // first: the runtime's stop waits for turns the stall holds
	ctx := context.Background()
	_, err = ents.Ask(ctx, "c", Request[int]{Mode: Create, Event: 10})
	require.NoError(t, err)

	go func() { // fills the memtables until a commit stalls, and waits there
		big := bytes.Repeat([]byte("x"), 256<<10)
		for i := 0; i < 1000 && !st.Health().WriteStalled(); i++ {
			b := st.NewBatch()
			b.Put(fmt.Appendf(nil, "x/fill/%04d", i), big)
			_ = b.Commit()
		}
	}()
	require.Eventually(t, st.Health().WriteStalled, 10*time.Second, time.Millisecond, "Pebble stalled writes")

	asked := make(chan error, 1)
	go func() {
		_, err := ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: 10})
		asked <- err
	}()
	select {
	case err := <-asked:
		require.ErrorIs(t, err, errs.Unavailable, "answered within AskTimeout, as not done")
	case <-time.After(5 * time.Second):
		t.Fatal("the caller was not answered within AskTimeout: it waits inside the stall")
	}
	require.True(t, st.Health().WriteStalled(), "the stall still held when the caller was answered")

	release()
	require.Eventually(t, func() bool { return !st.Health().WriteStalled() }, 10*time.Second, time.Millisecond, "the stall ended")
	res, err := ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: 10})
	require.NoError(t, err)
	require.Equal(t, 3, res.Record, "the step held by the stall, then this one")
}
