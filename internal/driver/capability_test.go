package driver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecCapabilityContract: E13. The request arrives as one JSON object
// with explicit identity and attempt; the result is machine-readable; a
// non-zero exit is one scoped failure that may still name its category; a
// timeout is an unknown outcome, never a failure or a success.
func TestExecCapabilityContract(t *testing.T) {
	ctx := context.Background()
	req := CapabilityRequest{Capability: "database", Op: "observe", EnvID: "env-271", Identity: "db-env-271",
		AttemptID: "att-env-271-3", LeaseGeneration: 3, Generation: 1, Branch: "feature-search", Revision: "3f2c9e1"}

	observe := &ExecCapability{Exec{Command: script(t, `read line
case "$line" in
  *'"identity":"db-env-271"'*'"lease_generation":3'*) echo '{"ok":true,"observation":{"exists":true,"owner":"env-271","matches":true,"provider_id":"pg-42"}}';;
  *) echo '{"ok":false,"category":"configuration","message":"unexpected request"}';;
esac`)}}
	res, rec, err := Call(ctx, observe, req)
	require.NoError(t, err)
	require.True(t, res.OK)
	require.Equal(t, &CapabilityObservation{Exists: true, Owner: "env-271", Matches: true, ProviderID: "pg-42"}, res.Observation)
	require.Equal(t, req, rec.Request, "the receipt keeps the input verbatim")
	require.Equal(t, res, rec.Result, "and the output")

	denied := &ExecCapability{Exec{Command: script(t, `cat >/dev/null; echo '{"ok":false,"category":"permission","message":"role cannot create databases"}'; echo 'GRANT missing' >&2; exit 2`)}}
	res, err = denied.Do(ctx, req)
	require.NoError(t, err)
	require.False(t, res.OK)
	require.Equal(t, "permission", res.Category, "a failing script names its category on stdout")
	require.Equal(t, "role cannot create databases", res.Message)

	crashed := &ExecCapability{Exec{Command: script(t, `cat >/dev/null; echo 'segfault' >&2; exit 139`)}}
	res, err = crashed.Do(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "unknown", res.Category, "a failure that says nothing is unknown")
	require.Contains(t, res.Message, "segfault")

	hung := &ExecCapability{Exec{Command: script(t, `sleep 30`), Timeout: 200 * time.Millisecond}}
	_, err = hung.Do(ctx, req)
	require.ErrorIs(t, err, ErrTimeout)

	vague := &ExecCapability{Exec{Command: script(t, `cat >/dev/null; echo '{"ok":false}'`)}}
	_, err = vague.Do(ctx, req)
	require.Error(t, err, "a failure must carry a category")
}
