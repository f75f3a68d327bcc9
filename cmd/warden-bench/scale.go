package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

type nopDriver struct{}

func (nopDriver) Dispatch(context.Context, driver.DispatchRequest) (driver.Run, error) {
	return driver.Run{}, nil
}
func (nopDriver) Bootstrap(context.Context, driver.BootstrapRequest) error  { return nil }
func (nopDriver) Chats(context.Context, string) (driver.Chats, error)       { return driver.Chats{}, nil }
func (nopDriver) TeardownPlaygrounds(context.Context, string, uint64) error { return nil }

// populate writes n marquees straight into a store: provisioned and at rest,
// except every hundredth, which is stuck provisioning with a retry overdue
// (its wake-index entry is in the past).
// populatedID is the id populate gives its i-th marquee.
func populatedID(i int) string { return fmt.Sprintf("m-%07d", i) }

func populate(dir string, n int, now time.Time) error {
	st, err := persistence.Open(dir, persistence.Options{NoSync: true})
	if err != nil {
		return err
	}
	const perBatch = 10_000
	b := st.NewBatch()
	for i := 0; i < n; i++ {
		rec := restingMarquee(populatedID(i), i, now)
		record.SeedMarquee(b, nil, rec)
		if (i+1)%perBatch == 0 || i == n-1 {
			if err := b.Commit(); err != nil {
				return err
			}
			b = st.NewBatch()
		}
	}
	b.Discard()
	return st.Close()
}

func startSystem(dir string) (*actors.System, *persistence.Store, error) {
	st, err := persistence.Open(dir, persistence.Options{})
	if err != nil {
		return nil, nil, err
	}
	sys, err := actors.Start(actors.Config{Store: st, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1 << 20}, Dispatcher: nopDriver{}, Bootstrapper: nopDriver{}, ControlPlane: nopDriver{}, IdleAfter: 10 * time.Minute})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return sys, st, nil
}

// heapProfileOut is where -heap-profile-out keeps the heap profile.
var heapProfileOut string

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func pct(ds []time.Duration, p int) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

// runScale measures memory per active marquee actor, activation latency of
// a marquee whose actor is not live (the path a passivated one takes), and
// start-up time against the number of stored marquees.
// Long: a measurement's script, read top to bottom as it runs.
func runScale(out string, sizes []int) error {
	var b strings.Builder
	b.WriteString("## Actors at scale\n\n")
	b.WriteString("Command: `make bench` (`go run ./cmd/warden-bench -scale -out BENCHMARKS.md`). In-process: the real actor system and Pebble store, drivers that do nothing.\n\n")
	ctx := context.Background()
	now := time.Now().UTC()

	// Memory and activation: 20,000 stored marquees at rest.
	const n = 20_000
	dir, err := os.MkdirTemp("", "warden-scale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := populate(dir, n, now); err != nil {
		return err
	}
	sys, st, err := startSystem(dir)
	if err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond) // let the 1% with overdue work settle
	before := heap()
	liveBefore := sys.Load().Live
	cold := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := sys.Activate(ctx, populatedID(i)); err != nil {
			return err
		}
		cold = append(cold, time.Since(t0))
	}
	after := heap()
	activated := sys.Load().Live - liveBefore
	if heapProfileOut != "" {
		if err := writeHeapProfile(heapProfileOut); err != nil {
			return err
		}
	}
	perActor := float64(after-before) / float64(max(activated, 1))
	warm := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := sys.Activate(ctx, populatedID(i)); err != nil {
			return err
		}
		warm = append(warm, time.Since(t0))
	}
	sys.Stop(ctx)
	st.Close()
	fmt.Fprintf(&b, "| figure | value | goal |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| heap per active marquee actor (actor, mailbox, context, snapshot; %d activated) | %.0f B (%.2f KiB) | <= 1 KiB |\n", activated, perActor, perActor/1024)
	fmt.Fprintf(&b, "| activation of a non-live marquee: p50 / p99 | %s / %s | p99 <= 100 µs |\n", pct(cold, 50).Round(time.Microsecond), pct(cold, 99).Round(time.Microsecond))
	fmt.Fprintf(&b, "| the same message to a live actor (baseline): p50 / p99 | %s / %s | |\n", pct(warm, 50).Round(time.Microsecond), pct(warm, 99).Round(time.Microsecond))
	fmt.Fprintf(&b, "| activation over baseline (p50) | %.1fx | |\n\n", float64(pct(cold, 50))/float64(max(pct(warm, 50), 1)))

	// Start-up against stored marquees; 1% have overdue work.
	fmt.Fprintf(&b, "Start-up with N stored marquees of which 1%% have overdue work (ready = recovery finished and /readyz would answer 200; settled = every overdue marquee's due transition is committed, counted by the transitions themselves):\n\n")
	fmt.Fprintf(&b, "| stored marquees | ready after | all overdue work done after | goal |\n|---|---|---|---|\n")
	for _, size := range sizes {
		d, err := os.MkdirTemp("", "warden-startup")
		if err != nil {
			return err
		}
		if err := populate(d, size, now); err != nil {
			return err
		}
		t0 := time.Now()
		sys, st, err := startSystem(d)
		if err != nil {
			return err
		}
		ready := time.Since(t0)
		due := size / 100
		// Settled means committed: every overdue marquee's stuck retry is a
		// durable transition (counted by warden_retries_total{kind="stuck"}),
		// not merely an actor spawned to run it.
		retries := sys.Metrics().Retries.WithLabelValues("stuck")
		deadline := time.Now().Add(5 * time.Minute)
		for int(testutil.ToFloat64(retries)) < due && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		settled := time.Since(t0)
		if done := int(testutil.ToFloat64(retries)); done < due {
			return fmt.Errorf("startup %d: only %d of %d overdue transitions committed within 5 minutes", size, done, due)
		}
		sys.Stop(ctx)
		st.Close()
		os.RemoveAll(d)
		goal := ""
		if size == 1_000_000 {
			goal = "ready <= 3 s"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", size, ready.Round(time.Millisecond), settled.Round(time.Millisecond), goal)
		fmt.Printf("startup %d: ready %s, overdue done %s\n", size, ready, settled)
	}
	b.WriteString("\n")
	fmt.Print(b.String())
	if out != "" {
		return mdreport.Replace(out, "## Actors at scale", b.String())
	}
	return nil
}

const verifyHeading = "## warden verify over a large store (D6)"

// runVerify measures warden verify (D6) over a healthy store of n
// marquees written as populate writes them: one pass, its time and what
// it allocated, and whether it found the store healthy (it must).
func runVerify(out string, n int) error {
	dir, err := os.MkdirTemp("", "warden-bench-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := populate(dir, n, time.Now()); err != nil {
		return err
	}
	st, err := persistence.OpenReadOnly(dir, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	rep, err := actors.Verify(st, actors.VerifyOptions{Machine: marquee.Machine{Config: marquee.DefaultConfig()}})
	took := time.Since(start)
	runtime.ReadMemStats(&m1)
	if err != nil {
		return err
	}
	if !rep.OK() || rep.Marquees != n {
		return fmt.Errorf("verify of a healthy store of %d marquees: %d read, problems:\n%s", n, rep.Marquees, rep.Text())
	}
	records := 0
	for _, f := range rep.Records {
		records += f.Count
	}
	md := fmt.Sprintf(verifyHeading+"\n\n`go run ./cmd/warden-bench -verify %d` (in `make bench`): one pass over a healthy Pebble store (populate's records: "+
		"every hundredth marquee stuck with a wake entry), read-only, every record decoded and the cross-record checks run; found healthy.\n\n", n)
	md += fmt.Sprintf("| stored marquees | records read | time | per record | allocated during the pass |\n|---:|---:|---:|---:|---:|\n| %d | %d | %s | %s | %.0f MiB |\n",
		n, records, took.Round(time.Millisecond), (took / time.Duration(records)).Round(10*time.Nanosecond), float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20))
	fmt.Print(md)
	if out != "" {
		return mdreport.Replace(out, verifyHeading, md)
	}
	return nil
}
