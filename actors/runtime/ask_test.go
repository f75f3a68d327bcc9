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

// blocking is a serial scheduler whose callers block, as production's
// do: await takes its timer and select path.
type blocking struct{ serialScheduler }

func (blocking) Wait(func() bool) bool { return true }

// TestAnAnswerNotTakenKeepsItsChannelOutOfReuse: an ask that stops
// waiting (its context ended, its time ran out, the store sealed) leaves
// its reply channel to the actor, which may still answer into it: it is
// never handed to a later ask, which would read the stale answer or, its
// room taken, block the actor.
func TestAnAnswerNotTakenKeepsItsChannelOutOfReuse(t *testing.T) {
	for _, s := range []struct {
		name  string
		sched Scheduler
	}{{"serial", serialScheduler{q: &RunQueue{}}}, {"blocking", blocking{serialScheduler{q: &RunQueue{}}}}} {
		t.Run(s.name, func(t *testing.T) {
			_, ents, _ := startCounter(t, false)
			ents.rt.cfg.Scheduler = s.sched
			gone, cancel := context.WithCancel(context.Background())
			cancel()
			unanswered := ents.reply()
			_, err := ents.await(gone, ents.Key("c"), unanswered)
			require.Error(t, err, "nobody answered")
			for range 8 {
				require.NotEqual(t, unanswered, ents.reply(), "a channel the actor may still answer into was reused")
			}
		})
	}
}
