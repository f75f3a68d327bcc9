package actors

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

// TestO18DryRunIsTheRealStep: over many (state, input, time) cases that a
// running system reaches, a dry run answers what the real input then does
// (result, reason, changes, effects, messages), and leaves the store's
// bytes as they were (hashed before and after): 10,000 cases (1,000
// under -short: make check's race detector run).
func TestO18DryRunIsTheRealStep(t *testing.T) {
	cases := 10_000
	if testing.Short() {
		cases = 1000
	}
	var mu sync.Mutex
	var real *runtime.Committed[record.Marquee, marquee.Event, marquee.Outcome]
	var want string // the marquee whose callback's commit is awaited
	clk := clock.NewManual(start)
	store, err := persistence.Open(t.TempDir(), persistence.Options{NoSync: true})
	require.NoError(t, err)
	sys, err := Start(Config{Store: store, Clock: clk, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 2}, Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{},
		AskTimeout: 5 * time.Second, IdleAfter: -1,
		Hooks: Hooks{Marquee: func(c runtime.Committed[record.Marquee, marquee.Event, marquee.Outcome]) {
			// Only the callback's own commit: another marquee's, or a later
			// one of its effects, may land meanwhile (the race detector's
			// slower run showed one).
			if _, isCallback := c.Event.(marquee.Callback); !isCallback {
				return
			}
			mu.Lock()
			if real == nil && c.ID == want {
				real = &c
			}
			mu.Unlock()
		}}})
	require.NoError(t, err)
	t.Cleanup(func() { sys.Stop(context.Background()); store.Close() })
	ctx := context.Background()
	ids := []string{"m-1", "m-2", "m-3"}
	for _, id := range ids {
		_, err := sys.Create(ctx, marquee.Create{ID: id, Kind: marquee.Tutorial, Pool: "default"})
		require.NoError(t, err)
	}
	rnd := rand.New(rand.NewPCG(18, 1))
	verbs := []marquee.Verb{marquee.VerbStep, marquee.VerbDeployed, marquee.VerbDestroyed, marquee.VerbFailed, marquee.VerbNull, marquee.VerbRebooted}
	compared := 0
	for i := range cases {
		require.Eventually(t, atRest(sys), 5*time.Second, time.Millisecond)
		clk.Advance(time.Duration(rnd.IntN(90)) * time.Second)
		require.Eventually(t, atRest(sys), 5*time.Second, time.Millisecond)
		id := ids[rnd.IntN(len(ids))]
		st, err := sys.Marquee(id)
		require.NoError(t, err)
		g := st.Generation
		cb := marquee.Callback{Verb: verbs[rnd.IntN(len(verbs))], Generation: []uint64{g, g, g, 0, g + 1, max(g, 1) - 1}[rnd.IntN(6)],
			Step: marquee.Progress(rnd.IntN(5)), Reason: "r"}
		if cb.Verb == marquee.VerbDeployed {
			cb.Connection = &marquee.Connection{Host: fmt.Sprintf("203.0.113.%d", rnd.IntN(3)), Port: 22, User: "root", SSHPrivateKey: "k"}
		}
		delivery := runtime.Delivery{ID: fmt.Sprintf("d-%d", i), BodyHash: sha256.Sum256([]byte(fmt.Sprint(i)))}
		if rnd.IntN(20) == 0 && i > 0 { // now and then a repeat of the last delivery
			delivery.ID = fmt.Sprintf("d-%d", i-1)
		}

		before := storeHash(t, store)
		dry, dryErr := sys.DryRun(ctx, id, cb, delivery)
		require.Equal(t, before, storeHash(t, store), "case %d: a dry run wrote", i)

		mu.Lock()
		real, want = nil, id
		mu.Unlock()
		ans, realErr := sys.Callback(ctx, CallbackRequest{MarqueeID: id, DeliveryID: delivery.ID, BodyHash: delivery.BodyHash, Callback: cb})
		if dryErr != nil || realErr != nil {
			require.Equal(t, fmt.Sprint(realErr), fmt.Sprint(dryErr), "case %d: the same refusal", i)
			continue
		}
		require.JSONEq(t, string(ans.Body), string(dry.Reply), "case %d: %s %+v", i, id, cb)
		mu.Lock()
		c := real
		mu.Unlock()
		if dry.Duplicate {
			require.Nil(t, c, "case %d: a repeat steps nothing", i)
			continue
		}
		require.NotNil(t, c, "case %d: the real callback stepped", i)
		require.Equal(t, marquee.Changes(c.Before.State, c.After.State), marquee.Changes(dry.Before, dry.After), "case %d", i)
		require.Equal(t, fmt.Sprint(c.Outcome.Effects), fmt.Sprint(dry.Outcome.Effects), "case %d", i)
		require.Equal(t, messageTexts(c.Outcome.Messages), dry.Messages, "case %d", i)
		compared++
	}
	require.Greater(t, compared, cases/2, "most cases stepped")
}

func storeHash(t *testing.T, st *persistence.Store) [32]byte {
	t.Helper()
	h := sha256.New()
	require.NoError(t, st.ForEach(func(k, v []byte) error {
		h.Write(k)
		h.Write([]byte{0})
		h.Write(v)
		h.Write([]byte{0})
		return nil
	}))
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
