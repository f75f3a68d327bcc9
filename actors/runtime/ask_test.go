package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAReplyOnlyAskCarriesNoRecord: a caller that reads only the reply
// (a callback's answer) gets no copy of the record; any other ask gets
// the record as the step left it.
func TestAReplyOnlyAskCarriesNoRecord(t *testing.T) {
	_, ents, failures := startCounter(t, false)
	ctx := context.Background()
	_, err := ents.Ask(ctx, "c", Request[int]{Mode: Create, Event: 0})
	require.NoError(t, err)
	res, err := ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: 0, ReplyOnly: true})
	require.NoError(t, err)
	require.True(t, res.Exists)
	require.Zero(t, res.Record, "no copy of the record for a reply-only caller")
	res, err = ents.Ask(ctx, "c", Request[int]{Mode: Command, Event: 0})
	require.NoError(t, err)
	require.Equal(t, 3, res.Record, "the record after the third step")
	require.Empty(t, *failures)
}
