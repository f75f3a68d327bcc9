package runtime

import (
	"context"
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
