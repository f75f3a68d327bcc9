package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestManualFiresInDueOrderAtDueTime(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewManual(start)
	var fired []string
	var at []time.Duration
	c.AfterFunc(2*time.Minute, func() { fired = append(fired, "b"); at = append(at, c.Now().Sub(start)) })
	c.AfterFunc(time.Minute, func() { fired = append(fired, "a"); at = append(at, c.Now().Sub(start)) })
	stop := c.AfterFunc(90*time.Second, func() { fired = append(fired, "stopped") })
	require.True(t, stop())
	require.False(t, stop(), "a second stop reports it prevented nothing")
	c.Advance(time.Minute + 30*time.Second)
	require.Equal(t, []string{"a"}, fired)
	c.Advance(time.Hour)
	require.Equal(t, []string{"a", "b"}, fired)
	require.Equal(t, []time.Duration{time.Minute, 2 * time.Minute}, at)
	require.Equal(t, start.Add(time.Hour+90*time.Second), c.Now())
	require.Zero(t, c.Pending())
}

func TestManualNeverMovesBackwards(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewManual(start)
	c.Set(start.Add(-time.Hour))
	require.Equal(t, start, c.Now())
}
