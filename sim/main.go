package sim

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Command declares `warden-sim`'s flags on fs and returns what runs once
// they are parsed: the process exit code, or what is wrong with the
// command line. With --report, its figures go to report(path, heading,
// section).
func Command(fs *flag.FlagSet, stdout, stderr io.Writer, report func(path, heading, section string) error) func(args []string) (int, error) {
	seed := fs.Uint64("seed", 0, "run this one seed")
	seeds := fs.Uint64("seeds", 0, "run this many seeds, from --from")
	from := fs.Uint64("from", 1, "first seed of --seeds")
	determinism := fs.Bool("check-determinism", false, "run each seed twice and compare the traces")
	plant := fs.String("plant", "", "disable one guard on purpose ("+plantNames()+")")
	nodes := fs.Int("nodes", 1, "run a cluster of this many nodes on the simulated etcd (1: one process on Pebble)")
	trace := fs.Bool("trace", false, "print the whole trace of each seed")
	reportPath := fs.String("report", "", "write the figures (compression, rate, coverage) to this markdown file")
	planted := fs.Bool("planted", false, "for each planted bug, find the first seed that catches it")
	regressions := fs.String("regressions", "", "run every regression file in this directory: a failed seed's schedule, written down (docs/rules/simulation.md)")
	saveTo := fs.String("save-failures", "sim/testdata/regressions", "write each failed seed's regression file into this directory (\"\": do not)")
	once := fs.String("once", "", "switch on only this fault point, firing once (an I11 boundary: "+strings.Join(I11Boundaries, ", ")+")")
	return func(args []string) (int, error) {
		if len(args) > 0 {
			return 0, fmt.Errorf("unexpected arguments %q", args)
		}
		if *nodes < 1 || *nodes > maxNodes {
			return 0, fmt.Errorf("--nodes: 1..%d", maxNodes)
		}
		// A batch of seeds holds little live memory (one world at a time) and
		// allocates a lot per process restart: a larger GC target trades memory
		// it has to spare for about a sixth more seeds per minute. Only this
		// command sets it; the tests and the server keep the default.
		debug.SetGCPercent(400)
		if *planted {
			return findAllPlanted(stdout, *reportPath, report), nil
		}
		if *regressions != "" {
			return runRegressions(stdout, *regressions, *determinism)
		}
		list, err := seedList(*seed, *seeds, *from)
		if err != nil {
			return 0, err
		}
		b := batch{plant: *plant, once: *once, nodes: *nodes, determinism: *determinism, trace: *trace, out: stdout, saveTo: *saveTo}
		agg, failed, wall := b.run(list)
		if failed > 0 {
			// A report states what was measured: a batch with a failed seed is
			// a bug to fix, not a figure to publish.
			if *reportPath != "" {
				fmt.Fprintf(stderr, "warden-sim: %d of %d seeds failed; %s not written\n", failed, len(list), *reportPath)
			}
			return 1, nil
		}
		if *reportPath != "" {
			heading := "## Simulation"
			if *nodes > 1 {
				heading = fmt.Sprintf("## Simulation of a cluster of %d nodes", *nodes)
			}
			if err := report(*reportPath, heading, agg.markdown(heading, len(list), *nodes, wall, *determinism)); err != nil {
				fmt.Fprintln(stderr, "warden-sim:", err)
				return 1, nil
			}
		}
		return 0, nil
	}
}

// seedList is the seeds a command line names.
func seedList(seed, seeds, from uint64) ([]uint64, error) {
	switch {
	case seed != 0:
		return []uint64{seed}, nil
	case seeds != 0:
		var list []uint64
		for s := from; s < from+seeds; s++ {
			list = append(list, s)
		}
		return list, nil
	}
	return nil, errors.New("give --seed N or --seeds K [--from N]")
}

// batch is a run of seeds as the command line asked for it.
type batch struct {
	plant, once        string
	nodes              int
	determinism, trace bool
	out                io.Writer
	// saveTo is where a failed seed's regression file goes ("": nowhere).
	saveTo string
}

// run runs the seeds, a line each as they finish in order, and sums them
// up: the figures, how many failed, the wall time.
func (b batch) run(list []uint64) (*aggregate, int, time.Duration) {
	agg := newAggregate(b.nodes > 1)
	start := time.Now()
	failed, diverged := 0, 0
	for i, o := range runParallel(list, b.one) {
		s := list[i]
		if o.div != nil {
			fmt.Fprintln(b.out, o.div)
			fmt.Fprintf(b.out, "replay: warden-sim --seed %d --nodes %d --check-determinism\n", s, b.nodes)
			failed++
			diverged++
			continue
		}
		r := o.r
		agg.add(r)
		if b.trace {
			fmt.Fprintln(b.out, strings.Join(r.Trace, "\n"))
		}
		fmt.Fprintf(b.out, "seed %d %s steps=%d messages=%d crashes=%d sim=%s wall=%s\n", s, r.Hash[:16], r.Steps, r.Messages, r.Crashes, r.SimTime.Round(time.Second), r.Wall.Round(time.Millisecond))
		if r.Violation != nil {
			failed++
			printFailure(b.out, r, b.plant, b.nodes)
			b.save(r)
		}
	}
	wall := time.Since(start)
	fmt.Fprintln(b.out, agg.summary(len(list), failed, diverged, wall, b.determinism))
	return agg, failed, wall
}

// save writes a failed seed's regression file, and prints it: a CI log
// then carries what a later build needs to replay the failure.
func (b batch) save(r SeedRun) {
	if b.plant != "" || r.plan == nil {
		return // a planted bug's failure is the point, not a regression
	}
	g := regressionOf(Options{Seed: r.Seed, Nodes: b.nodes}, r)
	js, _ := json.Marshal(g)
	fmt.Fprintf(b.out, "regression file (replay: go run ./cmd/warden-sim --regressions DIR):\n%s\n", js)
	if b.saveTo == "" {
		return
	}
	if path, err := WriteRegression(b.saveTo, g); err != nil {
		fmt.Fprintf(b.out, "regression file not written: %v\n", err)
	} else {
		fmt.Fprintf(b.out, "regression file written: %s\n", path)
	}
}

// runRegressions runs every regression file in dir: each must now pass.
func runRegressions(stdout io.Writer, dir string, determinism bool) (int, error) {
	paths, gs, err := ReadRegressions(dir)
	if err != nil {
		return 0, err
	}
	failed := 0
	for i, g := range gs {
		o := g.Options()
		var r SeedRun
		if determinism {
			first, div := CheckDeterminism(o)
			if div != nil {
				fmt.Fprintf(stdout, "%s: %v\n", paths[i], div)
				failed++
				continue
			}
			r = Converge(first, o)
		} else {
			r = Check(o)
		}
		if r.Violation != nil {
			failed++
			fmt.Fprintf(stdout, "%s: FAILED: %s violated: %s\n", paths[i], r.Violation.Invariant, r.Violation.Detail)
			continue
		}
		fmt.Fprintf(stdout, "%s: passed (seed %d, %d nodes, %d faults fired; it failed %s once)\n", paths[i], g.Seed, g.Nodes, firedCount(r.Fired), g.Invariant)
	}
	fmt.Fprintf(stdout, "%d regression files, %d failed\n", len(gs), failed)
	if failed > 0 {
		return 1, nil
	}
	return 0, nil
}

func firedCount(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// one runs one seed, twice when determinism is checked.
func (b batch) one(s uint64) outcome {
	o := Options{Seed: s, Plant: b.plant, Once: b.once, Nodes: b.nodes}
	if !b.determinism {
		return outcome{r: Check(o)}
	}
	first, div := CheckDeterminism(o)
	if div != nil {
		return outcome{div: div}
	}
	return outcome{r: Converge(first, o)}
}

// maxNodes bounds a simulated cluster: enough for every fault a cluster
// meets (a majority and a minority, a pair partitioned), few enough that a
// seed stays fast.
const maxNodes = 5

// plantNames lists the planted bugs for --plant's help.
func plantNames() string {
	names := make([]string, len(Planted))
	for i, p := range Planted {
		names[i] = p.Name
		if p.Nodes > 1 {
			names[i] += fmt.Sprintf(" (--nodes %d)", p.Nodes)
		}
	}
	return strings.Join(names, ", ")
}

// outcome is one seed's: its result, or how its two runs diverged.
type outcome struct {
	r   SeedRun
	div *Divergence
}

// runParallel runs f for every seed, as many at once as there are
// processors, and yields the outcomes in seed order as each is ready.
// Each seed's world is its own, single-threaded, so running several side
// by side changes none of their traces.
func runParallel(seeds []uint64, f func(uint64) outcome) func(yield func(int, outcome) bool) {
	return func(yield func(int, outcome) bool) {
		outs := make([]outcome, len(seeds))
		done := make([]chan struct{}, len(seeds))
		for i := range done {
			done[i] = make(chan struct{})
		}
		var next atomic.Int64
		stop := make(chan struct{})
		defer close(stop)
		for range min(goruntime.GOMAXPROCS(0), len(seeds)) {
			go func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= len(seeds) {
						return
					}
					select {
					case <-stop:
						return
					default:
					}
					outs[i] = f(seeds[i])
					close(done[i])
				}
			}()
		}
		for i := range seeds {
			<-done[i]
			if !yield(i, outs[i]) {
				return
			}
		}
	}
}

func printFailure(w io.Writer, r SeedRun, plant string, nodes int) {
	fmt.Fprintf(w, "\nFAILED seed %d: %s violated: %s\n%s\n", r.Seed, r.Violation.Invariant, r.Violation.Detail, r.Config)
	lo := max(0, len(r.Trace)-25)
	fmt.Fprintln(w, "trace around it:")
	for _, l := range r.Trace[lo:] {
		fmt.Fprintln(w, "  "+l)
	}
	cmd := fmt.Sprintf("go run ./cmd/warden-sim --seed %d --trace", r.Seed)
	if nodes > 1 {
		cmd += fmt.Sprintf(" --nodes %d", nodes)
	}
	if plant != "" {
		cmd += " --plant " + plant
	}
	fmt.Fprintf(w, "replay: %s\n\n", cmd)
}

// aggregate collects figures over many seeds.
type aggregate struct {
	cluster  bool
	coverage map[string]int
	fired    map[string]int
	simTime  time.Duration
	wall     time.Duration
	events   int
	busiest  int // the busiest minute's steps of any seed (runsAway)
}

func newAggregate(cluster bool) *aggregate {
	return &aggregate{cluster: cluster, coverage: map[string]int{}, fired: map[string]int{}}
}

func (a *aggregate) add(r SeedRun) {
	for k, v := range r.Coverage {
		a.coverage[k] += v
	}
	for k, v := range r.Fired {
		a.fired[k] += v
	}
	a.simTime += r.SimTime
	a.wall += r.Wall
	a.events += r.Steps + r.Messages
	a.busiest = max(a.busiest, r.BusiestMinute)
}

// rules are the spec's rule ids the simulator can reach: on a cluster,
// the cluster's own besides, and not the disk's under Pebble.
func rules(cluster bool) []string {
	var out []string
	for i := 1; i <= 23; i++ {
		out = append(out, fmt.Sprintf("M%d", i))
	}
	for i := 1; i <= 10; i++ {
		if cluster && (i == 8 || i == 9) {
			continue // malformed records: the single node's disk faults make them
		}
		out = append(out, fmt.Sprintf("A%d", i))
	}
	for i := 1; i <= 17; i++ {
		out = append(out, fmt.Sprintf("E%d", i))
	}
	if cluster {
		return append(out, "C3", "C4", "C5")
	}
	// The disk's failure path under Pebble: a seal stops the process
	// and the failed write is not there after the restart.
	return append(out, "S1", "I15")
}

func (a *aggregate) missing() (rulesMissed, faultsMissed []string) {
	for _, r := range rules(a.cluster) {
		if a.coverage[r] == 0 {
			rulesMissed = append(rulesMissed, r)
		}
	}
	for _, p := range pointsFor(a.cluster) {
		if a.fired[p] == 0 {
			faultsMissed = append(faultsMissed, p)
		}
	}
	return
}

func (a *aggregate) summary(n, failed, diverged int, wall time.Duration, det bool) string {
	rm, fm := a.missing()
	identical := "not checked"
	if det {
		identical = fmt.Sprintf("%d of %d byte-identical across two runs", n-diverged, n)
	}
	return fmt.Sprintf("%d seeds, %d failed, determinism: %s, wall %s, %.0f seeds/min, time compression %.0fx, %.0f events/s, busiest minute %d steps; rules not hit: %v; fault points not fired: %v",
		n, failed, identical, wall.Round(time.Millisecond), float64(n)/wall.Minutes(), a.simTime.Seconds()/max(a.wall.Seconds(), 1e-9),
		float64(a.events)/max(a.wall.Seconds(), 1e-9), a.busiest, rm, fm)
}

func (a *aggregate) markdown(heading string, n, nodes int, wall time.Duration, det bool) string {
	var b strings.Builder
	b.WriteString(heading + "\n\n")
	flags := ""
	if nodes > 1 {
		flags = fmt.Sprintf(" --nodes %d", nodes)
	}
	check := ""
	if det {
		check = " --check-determinism"
	}
	fmt.Fprintf(&b, "Command: `make sim` (`go run ./cmd/warden-sim --seeds %d%s%s --report BENCHMARKS.md`). Each seed: the faulty run, the same seed again (determinism) when checked, and a fault-free run of its workload (convergence).\n\n", n, flags, check)
	fmt.Fprintf(&b, "| figure | value | goal |\n|---|---|---|\n")
	// Only a batch where every seed passed is reported (Main), so every
	// seed that was checked was byte-identical.
	identical := "not checked"
	if det {
		identical = fmt.Sprintf("%d of %d byte-identical across two runs", n, n)
	}
	fmt.Fprintf(&b, "| seeds | %d; determinism: %s | 100%% |\n", n, identical)
	fmt.Fprintf(&b, "| wall time | %s (%.0f seeds/min; per seed: the faulty run twice when checking determinism, and a fault-free run) | 200 seeds < 5 min |\n", wall.Round(time.Second), float64(n)/wall.Minutes())
	fmt.Fprintf(&b, "| time compression (simulated over wall, faulty runs) | %.0fx | >= 1000x |\n", a.simTime.Seconds()/max(a.wall.Seconds(), 1e-9))
	fmt.Fprintf(&b, "| events per wall second (actor messages + world steps) | %.0f | >= 40,000 |\n", float64(a.events)/max(a.wall.Seconds(), 1e-9))
	rm, fm := a.missing()
	fmt.Fprintf(&b, "| rules hit | %d of %d; missing: %v | 100%% |\n", len(rules(a.cluster))-len(rm), len(rules(a.cluster)), rm)
	fmt.Fprintf(&b, "| fault points fired | %d of %d; missing: %v | 100%% |\n\n", len(pointsFor(a.cluster))-len(fm), len(pointsFor(a.cluster)), fm)
	b.WriteString("Rule hits over the batch: ")
	ks := make([]string, 0, len(a.coverage))
	for k := range a.coverage {
		if regexp.MustCompile(`^[MAEC][0-9]+$`).MatchString(k) {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i][0] != ks[j][0] {
			return ks[i][0] > ks[j][0]
		}
		var x, y int
		fmt.Sscan(ks[i][1:], &x)
		fmt.Sscan(ks[j][1:], &y)
		return x < y
	})
	for i, k := range ks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, a.coverage[k])
	}
	b.WriteString(".\n\n")
	return b.String()
}

// findAllPlanted reports seeds-to-detection of every planted bug.
func findAllPlanted(stdout io.Writer, path string, report func(path, heading, section string) error) int {
	var b strings.Builder
	b.WriteString("## Planted bugs\n\nCommand: `go run ./cmd/warden-sim --planted --report BENCHMARKS.md`. Seeds are tried from 1; the first that fails is the detection.\n\n")
	b.WriteString("| planted bug (guard disabled) | caught at seed | by | expected |\n|---|---|---|---|\n")
	code := 0
	for _, p := range Planted {
		name := p.Name
		if p.Nodes > 1 {
			name += fmt.Sprintf(" (%d nodes)", p.Nodes)
		}
		r, seed := FindPlanted(p.Name, p.Nodes, 1000)
		if seed == 0 {
			fmt.Fprintf(stdout, "%s: NOT caught within 1000 seeds\n", name)
			fmt.Fprintf(&b, "| %s | not within 1000 | | %s |\n", name, p.Invariant)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: caught at seed %d by %s\n", name, seed, r.Violation)
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", name, seed, r.Violation.Invariant, p.Invariant)
	}
	b.WriteString("\n")
	if path != "" {
		if err := report(path, "## Planted bugs", b.String()); err != nil {
			fmt.Fprintln(stdout, err)
			return 1
		}
	}
	return code
}
