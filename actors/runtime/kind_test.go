package runtime

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/sim/serial"
)

// counted is a test kind's outcome: it writes unless refused.
type counted struct {
	n       int
	msgs    []entity.Message
	effects int
	refused error
}

func (c counted) Refusal() error           { return c.refused }
func (counted) Encoded() []byte            { return nil }
func (counted) Writes() bool               { return true }
func (counted) WakeAt() time.Time          { return time.Time{} }
func (c counted) ToSend() []entity.Message { return c.msgs }

// counter is a test kind: its record counts the events stepped; an event
// of 1 has its outcome carry a message to entity "other" (or, chatty, its
// Observe send one).
type counter struct {
	ents   **Entities[int, int, counted]
	chatty bool
}

func (counter) Name() string { return "counter" }

func (k counter) Step(n, ev int, _ time.Time) (int, counted) {
	out := counted{n: ev}
	if ev == 1 && !k.chatty {
		out.msgs = []entity.Message{{Kind: "counter", ID: "other", Event: 2}}
	}
	return n + 1, out
}

// The rest of a counter: always stored, no admission, never held or
// idle, no deadlines, no deliveries in its record.
func (counter) Stored(string) (bool, error)               { return true, nil }
func (counter) Admit(int, int) error                      { return nil }
func (counter) Holds(int) bool                            { return false }
func (counter) Idle(int, bool) bool                       { return false }
func (counter) Copy(n int) int                            { return n }
func (counter) WakeLetter() string                        { return "" }
func (counter) WakeOf(int) time.Time                      { return time.Time{} }
func (counter) RecentDeliveries(int) persistence.InRecord { return persistence.InRecord{} }
func (counter) WithRecentDeliveries(n int, _ []byte) int  { return n }

func (k counter) Load(id string) (int, bool, error) {
	var n int
	err := (*k.ents).Runtime().Store().Get([]byte("x/counter/"+id), &n)
	if errors.Is(err, persistence.ErrNotFound) {
		return 0, false, nil
	}
	return n, err == nil, err
}
func (counter) Stage(b persistence.Writer, id string, _, next int, _ counted) {
	b.Put([]byte("x/counter/"+id), next)
}

func (k counter) Observe(_ View[int], _ int, _, _ int, out counted) {
	if k.chatty && out.n == 1 {
		(*k.ents).Tell("other", 2)
	}
}

// serialScheduler runs every mailbox on one queue, drained by the waiting
// caller: the simulator's way (sim/serial), here without the simulator.
type serialScheduler struct{ q *serial.RunQueue }

func (s serialScheduler) Mailboxes() (actor.MailboxProducer, actor.Dispatcher) {
	return serial.NewMailbox, s.q
}
func (s serialScheduler) Go(e Effect) { e.Run(context.Background()) }
func (s serialScheduler) Wait(answered func() bool) bool {
	for !answered() && s.q.Step() {
	}
	return false
}

func startCounter(t *testing.T, chatty bool) (*Runtime, *Entities[int, int, counted], *[]string) {
	t.Helper()
	return startKind(t, func(ents **Entities[int, int, counted]) Kind[int, int, counted] {
		return counter{ents: ents, chatty: chatty}
	})
}

// startKind starts a runtime on a serial scheduler and a manual clock with
// the kind of(ents) registered, given where its Entities will be.
func startKind(t *testing.T, of func(ents **Entities[int, int, counted]) Kind[int, int, counted]) (*Runtime, *Entities[int, int, counted], *[]string) {
	t.Helper()
	return startKindOn(t, clock.NewManual(time.Unix(0, 0)), of)
}

// startKindOn is startKind on the clock given.
func startKindOn(t *testing.T, clk clock.Clock, of func(ents **Entities[int, int, counted]) Kind[int, int, counted]) (*Runtime, *Entities[int, int, counted], *[]string) {
	t.Helper()
	st, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var failures []string
	rt, err := New(Config{Store: st, Clock: clk, Scheduler: serialScheduler{q: &serial.RunQueue{}},
		Cluster: SingleNode(), RestartLimit: 1, RestartWindow: time.Hour, IdleAfter: -1,
		Failed: func(actor string, err error) { failures = append(failures, err.Error()) }})
	require.NoError(t, err)
	t.Cleanup(rt.Shutdown)
	var ents *Entities[int, int, counted]
	ents = Register(rt, of(&ents))
	return rt, ents, &failures
}

// TestC12MessagesAreTheStepsOutcome: what a step sends is data in its
// outcome (entity.Outcome.Messages), delivered by the runtime after the commit and the
// ownership check: the other entity steps it.
func TestC12MessagesAreTheStepsOutcome(t *testing.T) {
	rt, ents, failures := startCounter(t, false)
	_, err := ents.Ask(context.Background(), "other", Request[int]{Mode: Create, Event: 0})
	require.NoError(t, err)
	_, err = ents.Ask(context.Background(), "one", Request[int]{Mode: Create, Event: 1})
	require.NoError(t, err)
	drain(rt)
	require.Empty(t, *failures)
	res, err := ents.Ask(context.Background(), "other", Request[int]{Mode: Read})
	require.NoError(t, err)
	require.Equal(t, 2, res.Record, "the message was delivered and stepped")
}

// carrying is the counter kind whose step's outcome carries, for an
// event n below sinkEvent, n%3 messages (to "sink-0", "sink-1") and n%4
// effects; a negative event is refused. Its executor counts the effects
// it is handed.
type carrying struct {
	counter
	started *int
	runs    *int
}

const sinkEvent = 1000

func (carrying) Step(n, ev int, _ time.Time) (int, counted) {
	out := counted{n: ev}
	switch {
	case ev < 0:
		out.refused = errors.New("refused")
	case ev < sinkEvent:
		for i := range ev % 3 {
			out.msgs = append(out.msgs, entity.Message{Kind: "counter", ID: fmt.Sprintf("sink-%d", i), Event: sinkEvent + i})
		}
		out.effects = ev % 4
	}
	return n + 1, out
}

func (k carrying) Run(_ *Handle[int, int, counted], _ int, out counted) {
	if out.n >= sinkEvent {
		return // a sink's step (or a create): not the source's
	}
	*k.started += out.effects
	*k.runs++
}
func (carrying) Activated(*Handle[int, int, counted], bool) {}
func (carrying) Woken(*Handle[int, int, counted])           {}

// TestC12ATurnSendsAndStartsExactlyWhatItsOutcomeCarries: per step, the
// messages sent and the effects started are the ones its outcome carries,
// counted on both sides: every message an outcome of a committed step
// carries is stepped once by its entity, every such outcome is handed to
// the executor once, and a refused step or a dry run sends and starts
// nothing.
func TestC12ATurnSendsAndStartsExactlyWhatItsOutcomeCarries(t *testing.T) {
	var started, runs int
	rt, ents, failures := startKind(t, func(ents **Entities[int, int, counted]) Kind[int, int, counted] {
		return carrying{counter: counter{ents: ents}, started: &started, runs: &runs}
	})
	carried := map[string]int{} // messages carried, by the entity they go to
	var effects, commits int
	received := map[string]int{}
	ents.OnCommit(func(c Committed[int, int, counted]) {
		if c.Event >= sinkEvent {
			received[c.ID]++
			return
		}
		commits++
		effects += c.Outcome.effects
		for _, m := range c.Outcome.msgs {
			carried[m.ID]++
		}
	})
	ctx := context.Background()
	for _, id := range []string{"sink-0", "sink-1", "src"} {
		_, err := ents.Ask(ctx, id, Request[int]{Mode: Create, Event: sinkEvent})
		require.NoError(t, err)
	}
	received = map[string]int{}
	for ev := 1; ev <= 40; ev++ {
		_, err := ents.Ask(ctx, "src", Request[int]{Mode: Command, Event: ev})
		require.NoError(t, err)
		_, err = ents.Ask(ctx, "src", Request[int]{Mode: Command, Event: -ev})
		require.Error(t, err, "refused")
		_, err = ents.Ask(ctx, "src", Request[int]{Mode: DryRun, Event: ev})
		require.NoError(t, err)
	}
	drain(rt)
	require.Empty(t, *failures)
	require.Equal(t, 40, commits, "one commit per command; refusals and dry runs commit nothing")
	require.Equal(t, carried, received, "each message an outcome carried was stepped once by its entity, and no other")
	require.Equal(t, 40, runs, "each committed outcome went to the executor once")
	require.Equal(t, effects, started, "the effects started are the ones the outcomes carried")
	require.Positive(t, effects)
	require.Equal(t, map[string]int{"sink-0": 27, "sink-1": 13}, carried, "the load meant: 40 messages from 40 steps")
}

// TestC12ObserveThatSendsIsCounted: Observe is for logs and metrics; a
// message routed while a step is observed is counted, which on one thread
// (the simulator's, which fails the run on it) is exactly an Observe that
// sent, so that no kind can send around the ownership check unseen.
func TestC12ObserveThatSendsIsCounted(t *testing.T) {
	rt, ents, failures := startCounter(t, true)
	_, err := ents.Ask(context.Background(), "other", Request[int]{Mode: Create, Event: 0})
	require.NoError(t, err)
	require.Zero(t, rt.SentWhileObserving(), "a step observed without sending")
	_, err = ents.Ask(context.Background(), "one", Request[int]{Mode: Create, Event: 1})
	require.NoError(t, err)
	drain(rt)
	require.Empty(t, *failures)
	require.Equal(t, int64(1), rt.SentWhileObserving(), "the Observe that sent was counted")
}

// drain runs the serial scheduler's queue until nothing is left to run.
func drain(rt *Runtime) {
	for rt.cfg.Scheduler.(serialScheduler).q.Step() {
	}
}

// TestTheKindsContractIsSixInterfaces: what a kind implements is kind.go's
// interfaces, and they stay few: Outcome, Kind, Stager, Executor,
// Observes, Wire.
func TestTheKindsContractIsSixInterfaces(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "kind.go", nil, 0)
	require.NoError(t, err)
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if _, ok := ts.Type.(*ast.InterfaceType); ok {
				names = append(names, ts.Name.Name)
			}
		}
		return true
	})
	require.Equal(t, []string{"Outcome", "Kind", "Stager", "Executor", "Observes", "Wire"}, names)
}
