package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/sim/serial"
)

// counted is a test kind's outcome: it always writes.
type counted struct{ n int }

func (counted) Refusal() error    { return nil }
func (counted) Encoded() []byte   { return nil }
func (counted) Writes() bool      { return true }
func (counted) WakeAt() time.Time { return time.Time{} }

// counter is a test kind: its record counts the events stepped; an event
// of 1 asks its Sends (or, chatty, its Observe) to message entity "other".
type counter struct {
	ents   **Entities[int, int, counted]
	chatty bool
}

func (counter) Name() string                               { return "counter" }
func (counter) Step(n, ev int, _ time.Time) (int, counted) { return n + 1, counted{n: ev} }

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

func (k counter) Sends(_ string, _ int, out counted) []Message {
	if k.chatty || out.n != 1 {
		return nil
	}
	return []Message{(*k.ents).Message("other", 2)}
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
// outcome (Sends), delivered by the runtime after the commit and the
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
