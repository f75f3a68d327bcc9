package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The A/B mode (-ab): two builds measured in alternated pairs. On this
// project's machine one build's reading of a durable request's cost
// varies by more than a change's effect within an hour (docs/decisions,
// "Where the durable path's last microseconds go"), so
// a change is judged by pairs run back to back, each side on a fresh
// warden and store, the side that goes first alternating, and by how
// many pairs it wins, not by one run of each. Even so, one build against
// itself does not tie (BENCHMARKS.md records an A/A run): a side's win
// must be larger than an A/A run's.

// abRun is one side's run of one pair.
type abRun struct {
	cpu time.Duration // server CPU a request
	rps float64
}

// abPair is one pair of runs of one path: A first when aFirst.
type abPair struct {
	a, b   abRun
	aFirst bool
}

// runAB measures each path at each connection count in pairs of runs of
// the -warden build (A) and other (B), and prints the pairs and their
// summary.
func runAB(other string, pairs int, duration, warmup time.Duration, connsFlag string, names []string) error {
	conns, paths, err := parseRun(connsFlag, names)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if p.postgres || p.minimal {
			return fmt.Errorf("-ab measures warden's own paths; %s runs in the bench", p.name)
		}
	}
	if pairs < 1 || pairs > 100 {
		return fmt.Errorf("-pairs %d: between 1 and 100", pairs)
	}
	tmp, a, okScript, err := benchKit("warden-bench-ab")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bins := map[string]string{"A": a, "B": other}
	var report strings.Builder
	fmt.Fprintf(&report, "A/B: A %s, B %s; %d pairs of %s runs after %s of warm-up, each on a fresh warden and store, the first side alternating.\n\n", a, other, pairs, duration, warmup)
	for _, c := range conns {
		for _, p := range paths {
			ps := make([]abPair, pairs)
			for i := range ps {
				ps[i].aFirst = i%2 == 0
				fmt.Printf("pair %d:\n", i+1)
				if err := ps[i].measure(bins, okScript, filepath.Join(tmp, fmt.Sprint(i)), p, c, duration, warmup); err != nil {
					return fmt.Errorf("%s, pair %d, %w", p.name, i+1, err)
				}
			}
			report.WriteString(renderAB(p.name, c, ps))
		}
	}
	fmt.Print(report.String())
	return nil
}

// measure runs both sides of the pair, the first as aFirst says, each
// with its build from bins and a store of its own under dir.
func (pair *abPair) measure(bins map[string]string, okScript, dir string, p path, conns int, duration, warmup time.Duration) error {
	sides := []string{"A", "B"}
	if !pair.aFirst {
		slices.Reverse(sides)
	}
	for _, side := range sides {
		r, err := abOnce(bins[side], okScript, filepath.Join(dir, side+p.name+fmt.Sprint(conns)), p, conns, duration, warmup)
		if err != nil {
			return fmt.Errorf("%s: %w", side, err)
		}
		fmt.Printf("%s %-32s conns=%-3d %8.0f req/s  cpu/req %s\n", side, p.name, conns, r.rps, r.cpu.Round(time.Microsecond))
		if side == "A" {
			pair.a = r
		} else {
			pair.b = r
		}
	}
	return nil
}

// abOnce starts bin on a fresh store in dir, measures one run of p and
// stops it.
func abOnce(bin, okScript, dir string, p path, conns int, duration, warmup time.Duration) (abRun, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return abRun{}, err
	}
	b, server, err := startWarden(bin, okScript, dir, conns)
	if server != nil {
		defer func() { _ = server.Process.Kill(); _ = server.Wait() }()
	}
	if err != nil {
		return abRun{}, err
	}
	r, err := b.measureOnce(p, conns, duration, warmup, func() time.Duration { return cpuTime(server.Process.Pid) })
	if err != nil {
		return abRun{}, err
	}
	if r.requests == 0 {
		return abRun{}, fmt.Errorf("no request answered")
	}
	return abRun{cpu: r.cpuPerReq, rps: r.rps}, nil
}

// renderAB is one path's pairs and what they say: the medians of each
// side, the median of B's difference from A within a pair, and in how
// many pairs B used less CPU a request.
func renderAB(name string, conns int, ps []abPair) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s at %d connections:\n\n| pair | first | A cpu/req | B cpu/req | B - A | A req/s | B req/s |\n|---|---|---|---|---|---|---|\n", name, conns)
	var as, bs, ds []time.Duration
	lower := 0
	for i, p := range ps {
		first := "B"
		if p.aFirst {
			first = "A"
		}
		d := p.b.cpu - p.a.cpu
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %.0f | %.0f |\n", i+1, first, p.a.cpu.Round(time.Microsecond), p.b.cpu.Round(time.Microsecond), d.Round(time.Microsecond), p.a.rps, p.b.rps)
		as, bs, ds = append(as, p.a.cpu), append(bs, p.b.cpu), append(ds, d)
		if d < 0 {
			lower++
		}
	}
	fmt.Fprintf(&b, "\nMedian CPU a request: A %s, B %s; median of B - A within a pair %s; B lower in %d of %d pairs.\n\n",
		middle(as).Round(time.Microsecond), middle(bs).Round(time.Microsecond), middle(ds).Round(time.Microsecond), lower, len(ps))
	return b.String()
}

// middle is the median of vs (the mean of the two middle values of an
// even count).
func middle(vs []time.Duration) time.Duration {
	vs = slices.Sorted(slices.Values(vs))
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}
