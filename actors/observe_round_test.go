package actors

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestE14OneObservationRoundAtATime: an environment's at-rest round does
// not start while the one before still observes (rounds piled up behind
// slow driver calls until warden starved); one asked for meanwhile runs
// once the round in flight ends, once however often it was asked.
func TestE14OneObservationRoundAtATime(t *testing.T) {
	var r observeRound
	require.True(t, r.begin(3))
	require.False(t, r.begin(3), "a round is in flight")
	require.False(t, r.begin(3), "asked twice, still one to come")
	require.False(t, r.done())
	require.False(t, r.done())
	require.True(t, r.done(), "the round ended and another was asked for")
	require.True(t, r.begin(3), "the next round starts")
	for range 3 {
		require.False(t, r.done(), "nobody asked meanwhile")
	}
	require.True(t, r.begin(1))
}
