package clock

import (
	"strings"
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

func TestManualSinceAndTicker(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewManual(start)
	require.Equal(t, 90*time.Second, func() time.Duration { m.Advance(90 * time.Second); return m.Since(start) }())
	tk := m.NewTicker(time.Minute)
	m.Advance(30 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("ticked before its period")
	default:
	}
	m.Advance(30 * time.Second)
	require.Equal(t, start.Add(150*time.Second), <-tk.C(), "a minute after it was made, at 1m30s")
	m.Advance(5 * time.Minute) // a slow reader keeps the first tick it missed
	require.Equal(t, start.Add(210*time.Second), <-tk.C())
	select {
	case <-tk.C():
		t.Fatal("more than one tick kept")
	default:
	}
	tk.Stop()
	m.Advance(5 * time.Minute)
	select {
	case <-tk.C():
		t.Fatal("ticked after Stop")
	default:
	}
	require.Zero(t, m.Pending(), "a stopped ticker arms nothing")
}

func TestRealSinceAndTicker(t *testing.T) {
	var c Clock = Real{}
	tk := c.NewTicker(time.Millisecond)
	defer tk.Stop()
	start := c.Now()
	<-tk.C()
	require.Greater(t, c.Since(start), time.Duration(0))
}

// TestRealNowKeepsTheMonotonicReading: Since and every deadline measure
// with the monotonic clock; .UTC() would drop it.
func TestRealNowKeepsTheMonotonicReading(t *testing.T) {
	now := Real{}.Now()
	if !strings.Contains(now.String(), " m=") {
		t.Fatalf("Real.Now() has no monotonic reading: %s", now)
	}
}
