package actors

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/internal/benchfloor"
	"github.com/wardenhq/warden/persistence"
)

// TestRecordsFloorHasACallbacksShape holds make bench's records floor
// (internal/benchfloor) to what a durable callback really writes: the
// records of a marquee that has taken make bench's step callbacks, with
// delivery ids as long as the bench's, are within a fifth of the floor's
// sizes, and its history window is the records'. A record that grows or
// shrinks fails here, before the floor stops measuring what it says.
func TestRecordsFloorHasACallbacksShape(t *testing.T) {
	require.Equal(t, record.HistoryLimit, benchfloor.HistoryWindow)
	require.Equal(t, record.HistoryTrimEvery, benchfloor.HistoryTrimEvery)
	h := newHarness(t)
	ctx := context.Background()
	const id = "m-042"
	h.dispatched(id)
	// A callback's record keeps the newest chunk of its deliveries (1 to
	// ChunkLen of them): the floor's record is their mean over a chunk's
	// cycle, and its chunk key is written once a cycle, when it fills.
	chunks := func() map[string]string {
		values := map[string]string{}
		require.NoError(t, h.store.Scan(persistence.DeliveriesChunkPrefix(id), nil, func(k, v []byte) (bool, error) {
			values[string(k)] = string(v)
			return true, nil
		}))
		return values
	}
	size := func(prefix []byte) (n int) {
		require.NoError(t, h.store.Scan(prefix, nil, func(_, v []byte) (bool, error) {
			n = len(v) // the last: the newest history entry
			return true, nil
		}))
		require.NotZero(t, n, "nothing under %q", prefix)
		return n
	}
	var records, chunkBytes, chunkWrites int
	for n := range persistence.MaxDeliveries + 10 + persistence.ChunkLen {
		before := chunks()
		// make bench's ids: "bench-", twelve hex digits of its run, a count.
		delivery := fmt.Sprintf("bench-%012x-%d", 0xa1b2c3d4e5f6, 100000+n)
		_, err := h.sys.Callback(ctx, cbReq(id, delivery, marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.VMStarting}))
		require.NoError(t, err)
		if n < persistence.MaxDeliveries+10 {
			continue
		}
		records += size(persistence.MarqueeKey(id))
		for k, v := range chunks() {
			if before[k] != v {
				chunkBytes, chunkWrites = chunkBytes+len(v), chunkWrites+1
			}
		}
	}
	require.Equal(t, 1, chunkWrites, "a chunk's key is written once in %d callbacks", persistence.ChunkLen)
	require.Equal(t, persistence.ChunkLen, benchfloor.ChunkEvery)
	near := func(what string, got, floor int) {
		t.Logf("%s: %d bytes, the floor writes %d", what, got, floor)
		require.InEpsilon(t, floor, got, 0.2, "%s: %d bytes, the floor writes %d", what, got, floor)
	}
	near("marquee record, the mean over a chunk's cycle", records/persistence.ChunkLen, benchfloor.MarqueeBytes)
	near("history entry", size(persistence.HistoryPrefix(id)), benchfloor.HistoryBytes)
	near("deliveries chunk, full", chunkBytes, benchfloor.DeliveriesBytes)
}
