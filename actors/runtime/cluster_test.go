package runtime

import (
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
