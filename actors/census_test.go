package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
)

// TestO12TheCensusReadsTheStoreAtMostOncePerPeriod: the marquees' counts
// are one census of the store, counted again only once a reader finds the
// last one censusEvery old, and then in the background: a marquee created
// meanwhile is not counted before, and a reader is told the count it was
// answered from (its time, whose age /metrics shows).
func TestO12TheCensusReadsTheStoreAtMostOncePerPeriod(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.pool = 2 })
	create := func(id string) {
		_, err := h.sys.Create(context.Background(), marquee.Create{ID: id, Kind: marquee.Tutorial})
		require.NoError(t, err)
	}
	create("m-1")
	first := h.sys.Census()
	require.Equal(t, 1, first.Live, "the first reader waits for a count")

	create("m-2")
	h.clock.Advance(censusEvery - time.Second)
	again := h.sys.Census()
	require.Equal(t, 1, again.Live)
	require.True(t, again.At.Equal(first.At), "a reader within the period is answered from the last count")
	settled := h.settledCensus()
	require.Equal(t, 1, settled.Live, "the store was counted again within the census period")
	require.True(t, settled.At.Equal(first.At), "the store was counted again within the census period")

	h.clock.Advance(time.Second)
	h.eventually("the census counts again once its period is over", func() bool { return h.sys.Census().Live == 2 })
	require.True(t, h.sys.Census().At.Equal(h.clock.Now()), "the new count is of its own time")
}

// settledCensus is the last count once no count runs in the background.
func (h *harness) settledCensus() Counts {
	c := h.sys.census
	var last Counts
	h.eventually("no census running", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		last = c.last
		return !c.counting
	})
	return last
}

// TestO12EnvironmentsAreCountedAtMostEveryTwoSecondsWhileTheReaderWaits:
// the environments are counted apart from the marquees, again only once
// the last count is envCensusEvery old, and then before the reader is
// answered (P13: a preview that left ready must not stay ready for a
// census period).
func TestO12EnvironmentsAreCountedAtMostEveryTwoSecondsWhileTheReaderWaits(t *testing.T) {
	h := newHarness(t)
	seed := func(e environment.Env) {
		b := h.store.NewBatch()
		seedEnvironment(b, record.Environment{Env: e})
		require.NoError(t, b.Commit())
	}
	stored := func() (n int) {
		for _, v := range h.sys.Census().Environments {
			n += v
		}
		return n
	}
	seed(previewEnv("env-a", "main", 1, start))
	require.Equal(t, 1, stored())

	seed(previewEnv("env-b", "main", 2, start))
	h.clock.Advance(envCensusEvery - time.Second)
	require.Equal(t, 1, stored(), "the environments were counted again within their period")

	h.clock.Advance(time.Second)
	require.Equal(t, 2, stored(), "a reader after the period waits for a new count")
}
