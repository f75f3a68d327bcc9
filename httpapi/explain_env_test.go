package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
)

// TestO17AnEnvironmentExplainsTheResultsItRefused: a worker's result
// under a lease generation that has moved on is refused and kept in the
// audit (E7, I13), and explain lists it under refused with its reason,
// newest first; the audit's other entries (who created or removed it)
// are not refusals.
func TestO17AnEnvironmentExplainsTheResultsItRefused(t *testing.T) {
	m := environment.Machine{Config: environment.DefaultConfig()}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e, err := m.New(environment.Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1, By: "ana"}, now)
	require.NoError(t, err)
	e, out := m.Step(e, environment.Advance{Owner: "worker-a"}, now)
	require.NoError(t, out.Err)
	var do environment.Do
	for _, eff := range out.Effects {
		if d, ok := eff.(environment.Do); ok {
			do = d
		}
	}
	require.NotEmpty(t, do.AttemptID, "an attempt under a lease: %v", out.Effects)
	require.Empty(t, envRefusedOf(e.Audit), "nothing refused yet")
	for i := range 2 {
		stale := environment.DriverAnswer{AttemptID: do.AttemptID, LeaseGeneration: do.LeaseGeneration + 1 + uint64(i), OK: true}
		e, out = m.Step(e, stale, now.Add(time.Duration(i+1)*time.Second))
		require.True(t, out.Answer.Rejected)
	}
	refused := envRefusedOf(e.Audit)
	require.Len(t, refused, 2)
	require.True(t, refused[0].At.After(refused[1].At), "newest first")
	require.Equal(t, "driver result", refused[0].Event)
	require.True(t, strings.Contains(refused[0].Reason, "lease generation") && strings.Contains(refused[0].Reason, "moved on"), refused[0].Reason)
}
