package runtime

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// idleWorkers is the pool's idle list, the most recently idle last.
func idleWorkers(p *workerPool) []chan func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.idle)
}

func waitIdle(t *testing.T, p *workerPool, n int) []chan func() {
	t.Helper()
	require.Eventually(t, func() bool { return len(idleWorkers(p)) == n }, 5*time.Second, time.Millisecond)
	return idleWorkers(p)
}

// A run goes to the worker idle the shortest time, whose stack is the
// likeliest to be warm: handed to the one idle longest, every run would
// touch a cold stack once all the workers were cycling.
func TestWorkerPoolHandsARunToTheWorkerIdleTheShortestTime(t *testing.T) {
	p := newWorkerPool(4)
	first, second := make(chan struct{}), make(chan struct{})
	p.Schedule(func() { <-first })
	p.Schedule(func() { <-second })
	close(first)
	waitIdle(t, p, 1)
	close(second)
	idle := waitIdle(t, p, 2)
	require.NotEqual(t, idle[0], idle[1])

	hold := make(chan struct{})
	p.Schedule(func() { <-hold })
	require.Equal(t, []chan func(){idle[0]}, idleWorkers(p), "the run went to the worker idle longest")
	close(hold)
	waitIdle(t, p, 2)
	require.Equal(t, 2, p.started, "no worker was started while two were idle")
}

// A run is never queued behind a busy worker: with every worker started
// and busy it gets a goroutine of its own, so a run that waits for another
// run cannot wait for ever.
func TestWorkerPoolNeverQueuesARun(t *testing.T) {
	p := newWorkerPool(1)
	ran := make(chan struct{})
	done := make(chan struct{})
	p.Schedule(func() {
		p.Schedule(func() { close(ran) })
		<-ran
		close(done)
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a run waited for a run queued behind it")
	}
	waitIdle(t, p, 1)
	require.Equal(t, 1, p.started)
}
