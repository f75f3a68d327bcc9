package environment

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestO17FollowingTheExplanationProvisionsAndRemoves: an environment's
// awaiting lists, at each step, inputs that each move it when stepped; an
// environment driven only by the "done" and "observed present" answers it
// lists reaches ready, its TTL and the operator's removal are listed
// there, and one driven by the removal's answers reaches its tombstone.
// Explaining changes nothing.
func TestO17FollowingTheExplanationProvisionsAndRemoves(t *testing.T) {
	m := Machine{Config: DefaultConfig()}
	e, out := m.Create(Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1, TTL: 72 * time.Hour}, explainEpoch)
	require.NoError(t, out.Err)
	now := explainEpoch
	follow := func(until func(Env) bool, want ...string) {
		for step := 0; !until(e); step++ {
			require.Less(t, step, 40, "stuck at %s", e.State)
			before := e.clone()
			awaiting := m.Awaiting(e, now)
			require.True(t, before.equal(e), "explaining changes nothing")
			require.NotEmpty(t, awaiting, "something moves %s", e.State)
			var next *Input
			for i, in := range awaiting {
				_, o := m.Step(e, m.inputEvent(e, in), later(now, in.At))
				require.True(t, o.Changed || len(o.Effects) > 0, "%s moves %s", in.Event, e.State)
				for _, w := range want {
					if next == nil && strings.HasSuffix(in.Event, w) {
						next = &awaiting[i]
					}
				}
			}
			require.NotNil(t, next, "at %s, one of %v is listed: %v", e.State, want, awaiting)
			e, out = m.Step(e, m.inputEvent(e, *next), later(now, next.At))
			require.NoError(t, out.Err)
			now = now.Add(time.Second)
		}
	}
	follow(func(e Env) bool { return e.State == Ready }, " done", " observed present and matching", "next step")
	var names []string
	for _, in := range m.Awaiting(e, now) {
		names = append(names, in.Event)
	}
	require.Contains(t, names, "timer ttl")
	require.Contains(t, names, "operator remove")
	for _, in := range m.Awaiting(e, now) {
		if in.Event == "timer ttl" {
			require.Equal(t, e.ExpiresAt, in.At)
			require.Contains(t, in.Effect, "ready -> removal-requested")
		}
	}
	e, out = m.Step(e, RemoveEnv{Reason: "done", By: "ana"}, now)
	require.NoError(t, out.Err)
	follow(func(e Env) bool { return e.Tombstone != nil }, " done", " observed absent", "next step")
	require.Empty(t, m.Awaiting(e, now), "a tombstone waits for nothing")
}

// inputEvent is the event an explanation's input names, as Awaiting built
// it (the test steps what was listed).
func (m Machine) inputEvent(e Env, in Input) Event {
	for _, c := range m.candidates(e, in.At) {
		if c.name == in.Event {
			return c.ev
		}
	}
	return nil
}

var explainEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
