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

// TestManualFiresInOrderAfterManyStops: timers stopped long before they
// are due leave the heap (it is compacted), and the rest still fire in due
// order, ties in arming order.
func TestManualFiresInOrderAfterManyStops(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	var fired []int
	for i := range 5000 {
		i := i
		stop := m.AfterFunc(time.Duration(5000-i%7)*time.Second, func() { fired = append(fired, i) })
		if i%10 != 0 {
			stop()
		}
	}
	if got := m.Pending(); got != 500 {
		t.Fatalf("pending %d, want 500", got)
	}
	if len(m.timers) > 2*m.live+1024 {
		t.Fatalf("%d timers held for %d armed: the stopped ones were never dropped", len(m.timers), m.live)
	}
	m.Advance(time.Hour * 2)
	if len(fired) != 500 {
		t.Fatalf("fired %d, want 500", len(fired))
	}
	for k := 1; k < len(fired); k++ {
		a, b := fired[k-1], fired[k]
		da, db := 5000-a%7, 5000-b%7
		if da > db || da == db && a > b {
			t.Fatalf("timer %d (due %ds) fired before %d (due %ds)", a, da, b, db)
		}
	}
}
