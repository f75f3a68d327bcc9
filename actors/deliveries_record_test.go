package actors

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/persistence"
)

// TestM20ARecordsChunkOfDeliveriesSurvivesStepsRestartsAndRewrites: the
// newest chunk of a marquee's deliveries lives in its record (store
// format 4). A callback writes no deliveries key until its chunk fills; a
// step with no delivery carries the chunk on (the machine does not see
// it); and after a restart, and after the record is decoded and written
// again as a reseal writes it, a repeat of each delivery gets its first
// answer.
func TestM20ARecordsChunkOfDeliveriesSurvivesStepsRestartsAndRewrites(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const id = "m-1"
	h.dispatched(id)
	slots := func() int { return h.keysUnder(persistence.DeliveriesChunkPrefix(id)) }
	step := func(delivery string, p marquee.Progress) []byte {
		ans, err := h.sys.Callback(ctx, cbReq(id, delivery, marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: p}))
		require.NoError(t, err)
		return ans.Body
	}
	first := step("d-1", marquee.VMStarting)
	require.Zero(t, slots(), "the delivery is in the record, with no key of its own")
	step("", marquee.SSHConfiguring)
	rec, err := record.LoadMarquee(h.store, nil, id)
	require.NoError(t, err)
	require.Equal(t, marquee.SSHConfiguring, rec.State.Progress, "the step without a delivery wrote the record")
	got, err := record.MarqueeDeliveries(h.store, id)
	require.NoError(t, err)
	_, kept := got.Find("d-1")
	require.True(t, kept, "and carried the chunk on")

	repeat := func(delivery string, want []byte) {
		t.Helper()
		ans, err := h.sys.Callback(ctx, cbReq(id, delivery, marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.VMStarting}))
		require.NoError(t, err)
		require.Equal(t, string(want), string(ans.Body), "M20: %s gets its first answer, byte for byte", delivery)
	}
	// The check can fail: the same callback under a new delivery id is
	// answered as what it is now, not as it was first.
	fresh, err := h.sys.Callback(ctx, cbReq(id, "fresh", marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.VMStarting}))
	require.NoError(t, err)
	require.NotEqual(t, string(first), string(fresh.Body))
	h.restart()
	repeat("d-1", first)

	answers := map[string][]byte{"d-1": first}
	for n := 2; n <= persistence.ChunkLen+1; n++ {
		d := "d-" + string(rune('0'+n))
		answers[d] = step(d, marquee.TLSProvisioning)
	}
	require.Equal(t, 1, slots(), "the first chunk was written to its slot when it filled")

	h.stop()
	st, err := persistence.Open(h.dir, persistence.Options{})
	require.NoError(t, err)
	rec, err = record.LoadMarquee(st, nil, id)
	require.NoError(t, err)
	require.NotEmpty(t, rec.Deliveries)
	b := st.NewBatch()
	record.PutMarquee(b, nil, rec)
	require.NoError(t, b.Commit())
	require.NoError(t, st.Close())
	h.start()
	for d, want := range answers {
		repeat(d, want)
	}
}

// TestHistoryWindowTrimmedThroughTheSystemVerifies: a marquee whose
// callbacks take it past several trims of its history window (one range
// delete every record.HistoryTrimEvery entries) keeps between
// HistoryLimit and HistoryLimit+HistoryTrimEvery-1 entries in the store,
// shows the newest HistoryLimit, and the store passes verify (its
// entries contiguous, ending at the record's), before and after a
// restart.
func TestHistoryWindowTrimmedThroughTheSystemVerifies(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const id = "m-1"
	h.dispatched(id)
	stored := func() int { return h.keysUnder(persistence.HistoryPrefix(id)) }
	steps := []marquee.Progress{marquee.VMStarting, marquee.SSHConfiguring}
	most := 0
	for n := 0; ; n++ {
		_, err := h.sys.Callback(ctx, cbReq(id, fmt.Sprint("d-", n), marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: steps[n%2]}))
		require.NoError(t, err)
		most = max(most, stored())
		rec, err := record.LoadMarquee(h.store, nil, id)
		require.NoError(t, err)
		if rec.HistorySeq >= record.HistoryLimit+3*record.HistoryTrimEvery+5 {
			break
		}
	}
	require.LessOrEqual(t, most, record.HistoryLimit+record.HistoryTrimEvery-1, "the window is trimmed")
	require.Greater(t, most, record.HistoryLimit, "entries past the window wait for the next trim")
	hist, err := record.History(h.store, id, 1000)
	require.NoError(t, err)
	require.Len(t, hist, record.HistoryLimit)

	o := VerifyOptions{Machine: marquee.Machine{Config: marquee.DefaultConfig()}, Pools: map[string]int{"default": 1}}
	h.stop()
	rep := verifyDir(t, h.dir, o)
	require.True(t, rep.OK(), rep.Text())
	h.start()
	_, err = h.sys.Callback(ctx, cbReq(id, "after-restart", marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.TLSProvisioning}))
	require.NoError(t, err)
	h.stop()
	rep = verifyDir(t, h.dir, o)
	require.True(t, rep.OK(), rep.Text())
	h.start()
}

// dispatched creates a tutorial marquee and waits for its first dispatch.
func (h *harness) dispatched(id string) {
	h.t.Helper()
	_, err := h.sys.Create(context.Background(), marquee.Create{ID: id, Kind: marquee.Tutorial})
	require.NoError(h.t, err)
	h.eventually("dispatched", func() bool { return len(h.disp.gens(id)) == 1 })
}

// keysUnder counts the store's keys under prefix.
func (h *harness) keysUnder(prefix []byte) (n int) {
	h.t.Helper()
	require.NoError(h.t, h.store.Scan(prefix, nil, func(_, _ []byte) (bool, error) { n++; return true, nil }))
	return n
}
