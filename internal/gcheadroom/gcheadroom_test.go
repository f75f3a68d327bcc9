package gcheadroom

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentLeavesHeadroomAboveTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		scan, headroom uint64
		want           int
	}{
		{7 * mib, 64 * mib, 914},       // the next collection 64 MiB later, not 7
		{64 * mib, 64 * mib, 100},      // as large as the headroom: Go's default
		{1 << 30, 64 * mib, 100},       // never below the default
		{100 * 1024, 64 * mib, 10_000}, // nearly empty: bounded
		{0, 64 * mib, 10_000},
	} {
		if got := Percent(c.scan, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.scan, c.headroom, got, c.want)
		}
	}
}

// gogc is the GC percent in force.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// collectUntil runs collections until ok, or fails after ten seconds:
// the tuner runs on the finalizer goroutine after a collection.
func collectUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the GC percent is %d", what, gogc())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// TestStartTunesAfterEveryCollectionAndStopPutsBackTheDefault: with a
// small live heap the percent goes up; with a live heap larger than the
// headroom it returns to 100; stop leaves the percent found at the start.
func TestStartTunesAfterEveryCollectionAndStopPutsBackTheDefault(t *testing.T) {
	start := gogc()
	stop := Start(256 << 20)
	collectUntil(t, "a test's small heap", func() bool { return gogc() > 100 })

	held := make([]*[1 << 20]byte, 300) // 300 MiB live, more than the headroom
	for i := range held {
		held[i] = new([1 << 20]byte)
	}
	collectUntil(t, "300 MiB live", func() bool { return gogc() == 100 })
	runtime.KeepAlive(held)

	collectUntil(t, "the heap small again", func() bool { return gogc() > 100 })
	stop()
	if got := gogc(); got != start {
		t.Fatalf("after stop the percent is %d, was %d", got, start)
	}
	runtime.GC()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if got := gogc(); got != start {
		t.Fatalf("a collection after stop set the percent to %d", got)
	}
}
