package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
)

// waking is the counter kind with a wake handler that notes when it ran.
type waking struct {
	counter
	woke *[]time.Time
}

func (k waking) Woken(h *Handle[int, int, counted])         { *k.woke = append(*k.woke, h.Now()) }
func (waking) Run(*Handle[int, int, counted], int, counted) {}
func (waking) Activated(*Handle[int, int, counted], bool)   {}

// startingClock is a manual clock that counts the timers started on it.
type startingClock struct {
	*clock.Manual
	started int
}

func (c *startingClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.started++
	return c.Manual.AfterFunc(d, f)
}

// TestM23AWakeMovedLaterKeepsItsTimerAndFiresOnlyWhenAsked: a wake moved
// later keeps the timer already set (a steady callback moves its
// marquee's deadline with every step), which sets itself again rather
// than waking the entity early; a wake moved earlier replaces it; a zero
// wake disarms. Every wake reaches the entity at the time last asked,
// once.
func TestM23AWakeMovedLaterKeepsItsTimerAndFiresOnlyWhenAsked(t *testing.T) {
	var woke []time.Time
	clk := &startingClock{Manual: clock.NewManual(time.Unix(0, 0))}
	rt, ents, failures := startKindOn(t, clk, func(ents **Entities[int, int, counted]) Kind[int, int, counted] {
		return waking{counter: counter{ents: ents}, woke: &woke}
	})
	ents.Tell("a", 0) // the entity exists, so a wake finds it
	drain(rt)
	k, t0, idle, started := ents.Key("a"), clk.Now(), clk.Pending(), clk.started
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	for _, s := range []int{10, 20, 30} {
		rt.armWake(k, at(s))
	}
	require.Equal(t, 1, clk.started-started, "one timer started for the entity, however often its wake moves later")
	require.Equal(t, idle+1, clk.Pending())
	clk.Set(at(29))
	drain(rt)
	require.Empty(t, woke, "the timer set for 10s set itself again, and woke nobody early")
	require.Equal(t, idle+1, clk.Pending())
	require.Equal(t, 2, clk.started-started, "set again once, for the wake last asked")
	clk.Set(at(30))
	drain(rt)
	require.Equal(t, []time.Time{at(30)}, woke, "woken once, at the wake last asked")
	require.Equal(t, idle, clk.Pending(), "a fired wake leaves no timer")

	rt.armWake(k, at(40))
	rt.armWake(k, at(35))
	require.Equal(t, idle+1, clk.Pending(), "a wake moved earlier replaces the timer")
	clk.Set(at(35))
	drain(rt)
	clk.Set(at(45))
	drain(rt)
	require.Equal(t, []time.Time{at(30), at(35)}, woke, "woken at the earlier wake, and not again at the one it replaced")

	rt.armWake(k, at(50))
	rt.armWake(k, at(60))
	rt.armWake(k, time.Time{})
	require.Equal(t, idle, clk.Pending(), "a zero wake disarms a timer moved later too")
	clk.Set(at(70))
	drain(rt)
	require.Len(t, woke, 2, "a disarmed wake never fires")
	require.Empty(t, *failures)
}
