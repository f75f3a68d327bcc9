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
// there, and one driven by the removal's answers reaches its tombstone,
// which once its news is sent waits only for a leak to be found.
// Explaining changes nothing.
func TestO17FollowingTheExplanationProvisionsAndRemoves(t *testing.T) {
	m := Machine{Config: DefaultConfig()}
	e, out := m.Create(Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1, TTL: 72 * time.Hour}, explainEpoch)
	require.NoError(t, out.Err)
	now := explainEpoch
	follow := func(until func(Env) bool, want ...string) {
		for step := 0; !until(e); step++ {
			require.Less(t, step, 40, "stuck at %s", e.State)
			before := e.Clone()
			awaiting := m.Awaiting(e, now)
			require.True(t, before.equal(e), "explaining changes nothing")
			require.NotEmpty(t, awaiting, "something moves %s", e.State)
			var next *Input
			for i, in := range awaiting {
				_, o := m.Step(e, m.inputEvent(e, in, now), later(now, in.At))
				require.True(t, o.Changed || len(o.Effects) > 0, "%s moves %s", in.Event, e.State)
				for _, w := range want {
					if next == nil && strings.HasSuffix(in.Event, w) {
						next = &awaiting[i]
					}
				}
			}
			require.NotNil(t, next, "at %s, one of %v is listed: %v", e.State, want, awaiting)
			e, out = m.Step(e, m.inputEvent(e, *next, now), later(now, next.At))
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
	leak := "reconciler finds something of it left"
	for _, in := range m.Awaiting(e, now) {
		require.True(t, strings.HasPrefix(in.Event, "notification ") || in.Event == leak, "a tombstone waits only for its news to be sent and a leak to be found: %v", in)
	}
	for _, n := range e.Outbox {
		e, out = m.Step(e, Delivered{Key: n.Key, OK: true}, now)
		require.NoError(t, out.Err)
	}
	left := m.Awaiting(e, now)
	require.Len(t, left, 1, "a tombstone whose news is sent waits only for a leak to be found (I12)")
	require.Equal(t, leak, left[0].Event)
}

// inputEvent is the event an explanation's input names, as Awaiting chose
// it: the first candidate of that name that moves the environment.
func (m Machine) inputEvent(e Env, in Input, now time.Time) Event {
	for _, c := range m.candidates(e) {
		if InputName(e, c.ev) == in.Event {
			if _, _, moves := m.Moves(e, c.ev, later(now, c.at)); moves {
				return c.ev
			}
		}
	}
	return nil
}

var explainEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
