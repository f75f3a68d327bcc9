package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/errs"
)

// FuzzDecodeEnvelope: a message from another node is bounded and strict;
// decoding never panics, and what decodes names an entity within bounds
// carries an event.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(`{"kind":"pool","id":"default","event":{"type":"ask","job":"m-1"}}`))
	f.Add([]byte(`{"kind":"branch","id":"main","event":{"For":"env-1"}}`))
	f.Add([]byte(`{"kind":"pool","id":"default","event":{},"ask":{}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeEnvelope(b)
		if err != nil {
			require.ErrorIs(t, err, errs.Invalid)
			return
		}
		require.NotEmpty(t, m.ID)
		require.NotEmpty(t, m.Kind)
		require.LessOrEqual(t, len(b), maxEnvelope)
		require.NotEmpty(t, m.Event)
	})
}

// TestC3AMessagesRoutedAsAShardIsReleasedReachAFreshActor: a node that
// releases a shard and holds it again at once (a lease renewed after its
// local deadline: the shards are recovered again in the same tick) routes
// the recovery's messages while the old actors are still stopping. None
// may reach an actor past its stop, where the actor library drops it: each
// waits, and a fresh actor handles it.
func TestC3AMessagesRoutedAsAShardIsReleasedReachAFreshActor(t *testing.T) {
	rt, ents, _ := startCounter(t, false)
	ctx := context.Background()
	_, err := ents.Ask(ctx, "c", Request[int]{Mode: Create, Event: 0})
	require.NoError(t, err)
	for i := 1; i <= 100; i++ {
		rt.ReleaseShard(rt.Shard(ents.Key("c")))
		res, err := ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: 0})
		require.NoError(t, err, "message %d, routed as its actor stopped", i)
		require.Equal(t, i+1, res.Record)
	}
}
