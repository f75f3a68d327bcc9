package admission

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestO17PoolAwaitingIsEachInputSteppedOnACopy: a pool's awaiting is each
// holder's and each waiting job's release and a new ask, in words from their outcomes; the pool
// itself is left as it was.
func TestO17PoolAwaitingIsEachInputSteppedOnACopy(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := New("default", 1)
	for _, job := range []string{"m-1", "m-2", "m-3"} {
		p, _ = Step(p, Ask{Job: job}, now)
	}
	before := p.clone()
	got := Awaiting(p, now)
	require.Equal(t, []Input{
		{Event: "release by m-1", Effect: "frees m-1's slot and admits m-2 (sequence 2) (A4, A5)"},
		{Event: "release by m-2", Effect: "m-2 leaves the queue (place 1 of 2); nobody is admitted (A5)"},
		{Event: "release by m-3", Effect: "m-3 leaves the queue (place 2 of 2); nobody is admitted (A5)"},
		{Event: "ask by a new job", Effect: "queued at sequence 4, behind 2 waiting (A3, A4)"},
	}, got)
	require.Equal(t, before, p, "explaining changes nothing")

	empty := New("empty", 2)
	require.Equal(t, "reserved at once, sequence 1 (A3)", Awaiting(empty, now)[0].Effect)
	lone, _ := Step(empty, Ask{Job: "m-9"}, now)
	require.Equal(t, "frees m-9's slot; 0 of 2 held after it, nobody waiting (A5)", Awaiting(lone, now)[0].Effect)
}
