package runtime

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/persistence"
)

// TestRuntimesShareAHostOneAfterAnother: a process started again on its
// Host (the simulator's, after a crash) runs on the same actor system
// beside its abandoned predecessor's actors, reads what that one
// committed, and a runtime that stops leaves the Host to the next.
func TestRuntimesShareAHostOneAfterAnother(t *testing.T) {
	st, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	host := NewHost()
	start := func() (*Runtime, *Entities[int, int, counted]) {
		rt, err := New(Config{Store: st, Clock: clock.NewManual(time.Unix(0, 0)), Cluster: SingleNode(), IdleAfter: -1, Host: host})
		require.NoError(t, err)
		var ents *Entities[int, int, counted]
		ents = Register(rt, Kind[int, int, counted](counter{ents: &ents}))
		return rt, ents
	}
	_, first := start() // abandoned, as a crash leaves it
	_, err = first.Ask(context.Background(), "c", Request[int]{Mode: Create, Event: 0})
	require.NoError(t, err)

	second, ents := start()
	res, err := ents.Ask(context.Background(), "c", Request[int]{Mode: Read})
	require.NoError(t, err, "the same entity, named again on the same actor system")
	require.Equal(t, 1, res.Record)
	second.Stop(context.Background())

	_, ents = start()
	_, err = ents.Ask(context.Background(), "c", Request[int]{Mode: Command, Event: 0})
	require.NoError(t, err, "the Host outlives a runtime that stopped")
}

// TestHostResetLeavesNoActorBehind: after Reset, no actor an abandoned
// runtime left is registered, and the next runtime starts under the
// names a new Host would give, so a run on a reset Host cannot tell it
// from a new one.
func TestHostResetLeavesNoActorBehind(t *testing.T) {
	st, err := persistence.Open(t.TempDir(), persistence.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	host := NewHost()
	registered := func() []string {
		var ids []string
		for _, m := range host.as.ProcessRegistry.LocalPIDs.LocalPIDs {
			m.IterCb(func(id string, _ any) { ids = append(ids, id) })
		}
		slices.Sort(ids)
		return ids
	}
	before := registered()
	start := func(ids ...string) *Runtime {
		rt, err := New(Config{Store: st, Clock: clock.NewManual(time.Unix(0, 0)), Cluster: SingleNode(), IdleAfter: -1, Host: host})
		require.NoError(t, err)
		var ents *Entities[int, int, counted]
		ents = Register(rt, Kind[int, int, counted](counter{ents: &ents}))
		for _, id := range ids {
			_, err = ents.Ask(context.Background(), id, Request[int]{Mode: Create, Event: 0})
			require.NoError(t, err)
		}
		return rt
	}
	first := start("a", "b", "c") // abandoned, as a crash leaves it
	require.Len(t, registered(), len(before)+4, "the registry and its three entities")
	host.Reset()
	require.Equal(t, before, registered())

	second := start("d")
	require.Equal(t, first.registry.Id, second.registry.Id, "names start again as on a new Host")
	second.Stop(context.Background())
	host.Reset()
	require.Equal(t, before, registered())
}
