// Package gcheadroom keeps the garbage collector from running often while
// the live heap is small. Go's default (GOGC=100) starts the next
// collection once the heap has doubled: a warden holding 7 MiB under load
// collected ten times a second, about a tenth of the CPU of a durable
// callback (BENCHMARKS.md, "Reading the figures"). After each collection
// the tuner sets the GC percent so the next one comes at least Headroom
// bytes later, and leaves Go's 100 once the live heap is that large. It
// costs at most Headroom bytes of memory, and a GOMEMLIMIT still caps
// the heap as it would.
package gcheadroom

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the percent set for a nearly empty heap: a goal of
// at most a hundred times the live heap.
const maxPercent = 10_000

// Percent is the GC percent that puts the next collection headroom
// bytes above the live heap, and never below Go's default of 100. Go
// sets the next goal at the live heap plus percent of the work of a
// collection: the live heap and the stacks and globals it scans (scan).
func Percent(scan, headroom uint64) int {
	p := uint64(maxPercent)
	if scan > 0 {
		p = min(headroom*100/scan, maxPercent)
	}
	return int(max(p, 100))
}

// tuner runs after every collection, from a finalizer.
type tuner struct {
	headroom uint64
	mu       sync.Mutex
	stopped  bool
	percent  int
	scan     []metrics.Sample
}

// sentinel is what each collection finds unreachable: 16 bytes, so the
// tiny allocator (whose blocks a finalizer may never see freed) does not
// take it.
type sentinel struct{ _ [16]byte }

// Start tunes the GC percent after every collection until stop, which
// puts back the percent found at the start.
func Start(headroom uint64) (stop func()) {
	before := debug.SetGCPercent(100)
	t := &tuner{headroom: headroom, percent: 100, scan: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.stopped = true
		debug.SetGCPercent(before)
	}
}

func (t *tuner) arm() {
	runtime.SetFinalizer(new(sentinel), func(*sentinel) { t.collected() })
}

// collected sets the percent for what the last collection left, then
// waits for the next one.
func (t *tuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.scan)
	var scan uint64
	for _, m := range t.scan {
		scan += m.Value.Uint64()
	}
	if p := Percent(scan, t.headroom); p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
	t.arm()
}
