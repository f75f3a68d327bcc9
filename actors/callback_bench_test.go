package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/actors/marquee"
)

// BenchmarkDurableCallback is the durable path without HTTP: a step
// callback to one of 64 marquees, each with a delivery id no other
// callback has, answered after its batch is synced on real Pebble. Its
// allocations per callback are the garbage the server makes per durable
// request below the HTTP layer, and the load's own two strings (the
// marquee's and the delivery's ids); make bench measures the whole path.
func BenchmarkDurableCallback(b *testing.B) {
	const marquees = 64
	h := newHarness(b, func(h *harness) { h.pool = marquees })
	ctx := context.Background()
	for i := range marquees {
		if _, err := h.sys.Create(ctx, marquee.Create{ID: fmt.Sprintf("m-%03d", i), Kind: marquee.Tutorial}); err != nil {
			b.Fatal(err)
		}
	}
	h.eventually("every marquee dispatched", func() bool {
		for i := range marquees {
			if len(h.disp.gens(fmt.Sprintf("m-%03d", i))) != 1 {
				return false
			}
		}
		return true
	})
	dups := h.sys.cfg.Metrics.Callbacks.WithLabelValues(string(marquee.VerbStep), "duplicate_delivery")
	before := testutilCounter(dups)
	var n atomic.Int64
	b.ReportAllocs()
	cpu := processCPU(b)
	b.ResetTimer()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := n.Add(1)
			id := fmt.Sprintf("m-%03d", k%marquees)
			_, err := h.sys.Callback(ctx, cbReq(id, fmt.Sprint("bench-", k), marquee.Callback{Verb: marquee.VerbStep, Generation: 1, Step: marquee.VMStarting}))
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
	if d := testutilCounter(dups) - before; d > 0 {
		b.Fatalf("%.0f callbacks were answered as duplicate deliveries: the load repeated ids", d)
	}
}

// processCPU is the CPU this process has used so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
