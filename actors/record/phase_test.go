package record

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/persistence"
)

// TestE17ARecordWrittenWithTheOldRemovalStateReadsAsRemovalRequested: the
// first removal state was stored as "expiry-requested" (an operator's
// remove read as an expiry); such a record reads as "removal-requested",
// its attempt's states too.
func TestE17ARecordWrittenWithTheOldRemovalStateReadsAsRemovalRequested(t *testing.T) {
	r := Environment{Env: environment.Env{ID: "env-1", State: environment.RemovalRequested, Desired: "removed",
		Attempt: &environment.Attempt{From: environment.RemovalRequested, To: environment.RouteDetached}}}
	raw := persistence.Encode(r)
	old := bytes.ReplaceAll(raw, []byte(`"removal-requested"`), []byte(`"expiry-requested"`))
	require.Equal(t, 2, bytes.Count(old, []byte(`"expiry-requested"`)), "the state and the attempt's from, as an older warden wrote them")
	var got Environment
	require.NoError(t, persistence.Decode([]byte("e/env-1"), old, &got))
	require.Equal(t, environment.RemovalRequested, got.Env.State)
	require.Equal(t, environment.RemovalRequested, got.Env.Attempt.From)
}
