package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// TestD9ResealOwnedRewritesThroughTheActors: an online reseal rewrites
// every record still under an older key through its actor (the runtime's
// Rewrite), leaves its state and wake entry as they were, and a second
// pass has nothing to do.
func TestD9ResealOwnedRewritesThroughTheActors(t *testing.T) {
	dir := t.TempDir()
	oldKey := trust.Key{ID: "old", Secret: [trust.KeySize]byte{1}}
	st, err := persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	b := st.NewBatch()
	for _, id := range []string{"m-1", "m-2"} {
		record.SeedMarquee(b, trust.NewSealer(&trust.Keyring{Keys: []trust.Key{oldKey}}), record.Marquee{State: marquee.State{ID: id, Kind: marquee.BYO,
			Serving: marquee.Active, Connection: &marquee.Connection{Host: "h", SSHPrivateKey: "secret-" + id}}, WakeAt: start.Add(time.Hour)})
	}
	record.SeedMarquee(b, nil, record.Marquee{State: marquee.State{ID: "m-3", Kind: marquee.BYO, Serving: marquee.Active}})
	require.NoError(t, b.Commit())

	ring := &trust.Keyring{Keys: []trust.Key{{ID: "new", Secret: [trust.KeySize]byte{2}}, oldKey}}
	sys, err := Start(Config{Store: st, Sealer: trust.NewSealer(ring), Clock: clock.NewManual(start), Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Dispatcher: &recordingDispatcher{}, Bootstrapper: okBootstrap{}, ControlPlane: noChats{}, AskTimeout: time.Second})
	require.NoError(t, err)
	defer func() { sys.Stop(context.Background()); require.NoError(t, st.Close()) }()
	res, err := sys.ResealOwned(context.Background())
	require.NoError(t, err)
	require.Equal(t, ResealResult{Rewritten: 2, Active: "new"}, res)
	for _, id := range []string{"m-1", "m-2"} {
		var raw record.Marquee
		require.NoError(t, st.Get(persistence.MarqueeKey(id), &raw))
		require.Equal(t, []string{"new"}, record.SealedUnder(raw), "D9: %s is sealed under the active key", id)
		r, err := record.LoadMarquee(st, trust.NewSealer(&trust.Keyring{Keys: ring.Keys[:1]}), id)
		require.NoError(t, err, "opens with the new key alone")
		require.Equal(t, "secret-"+id, r.State.Connection.SSHPrivateKey)
		require.Equal(t, start.Add(time.Hour), r.WakeAt.UTC(), "the wake entry is where it was")
	}
	rep, err := Verify(st, VerifyOptions{Sealer: trust.NewSealer(ring), Machine: marquee.Machine{Config: marquee.DefaultConfig()}})
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.Text())
	require.Equal(t, []string{"new"}, rep.KeyIDs)
	again, err := sys.ResealOwned(context.Background())
	require.NoError(t, err)
	require.Zero(t, again.Rewritten, "nothing left under the old key")
}
