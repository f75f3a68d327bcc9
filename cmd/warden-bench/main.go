// Command warden-bench measures the durable webhook path against a no-op
// handler on the same server stack, over loopback, in one run: the real
// warden binary (built fresh) serves both POST /v1/webhooks/terraform
// (authenticate, decode, decide in the marquee's actor, one synced Pebble
// batch, answer) and POST /v1/webhooks/noop (authenticate, decode, answer).
// Each figure is reported next to the baseline as a ratio, never as an
// absolute pass/fail. `make bench` writes BENCHMARKS.md.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/internal/testports"
	"github.com/wardenhq/warden/internal/trust"
)

const (
	callbackToken = "bench-callback-token"
	operatorToken = "bench-operator-token"
)

// Long: one table of the bench's flags and the measurement each selects.
func main() {
	duration := flag.Duration("duration", 5*time.Second, "measured time per scenario")
	warmup := flag.Duration("warmup", time.Second, "unmeasured time before each scenario")
	out := flag.String("out", "", "write the results to this markdown file (else stdout only)")
	connsFlag := flag.String("conns", "1,64", "connection counts")
	pathsFlag := flag.String("paths", "floor,minimal,records,noop,terraform,scoped,signed,postgres", "webhook paths to load, in order: floor (HTTP and one synced write of the body), minimal (the second floor: net/http and one synced Pebble Set, in the bench), records (the records floor: HTTP and one synced batch of the keys a callback writes), noop, terraform (shared token), scoped, signed (Standard Webhooks), postgres (the PostgreSQL baseline; skipped with a note where PostgreSQL is not installed)")
	clusterScale := flag.Int("cluster-scale", 0, "measure three nodes on etcd holding this many marquees (D10): size, start-up, failover, a steady run")
	steady := flag.Duration("steady", 10*time.Minute, "with -cluster-scale: how long the steady callbacks are measured, after one compaction retention and a minute unmeasured")
	compaction := flag.Duration("compaction", 10*time.Minute, "with -cluster-scale: the members' --etcd-compaction-retention")
	steadyRate := flag.Int("rate", 200, "with -cluster-scale: callbacks a second during the steady run")
	verifySize := flag.Int("verify", 0, "measure warden verify (D6) over a healthy store of this many marquees instead")
	scale := flag.Bool("scale", false, "measure actors at scale (memory, activation, start-up) instead of the webhook path")
	flag.StringVar(&heapProfileOut, "heap-profile-out", "", "with -scale, keep the heap profile taken once the 20,000 marquees are active in this file (what an actor holds, for go tool pprof -sample_index=inuse_space)")
	sizes := flag.String("sizes", "10000,100000,1000000", "stored marquees for the start-up figure")
	flag.StringVar(&clusterProfiles, "cluster-profiles", "", "with -cluster, write each node's CPU profile of the three-node runs into this directory (n1.prof, n2.prof, n3.prof; for go tool pprof with the warden binary)")
	clusterBench := flag.Bool("cluster", false, "measure three nodes on etcd against one node on this machine (docs/rules/cluster.md C8)")
	flag.StringVar(&wardenBin, "warden", "", "the warden binary to measure, in every mode, built with -tags benchfloor for the floors' rows (default: one built so from this checkout); with -ab, the build A")
	lists := flag.Bool("lists", false, "measure the operator surfaces (lists, console pages, the metrics census) over a large store")
	listSize := flag.Int("list-size", 100_000, "stored marquees for -lists")
	gen := flag.String("load", "go", "load generator: go (built in: one keep-alive connection per client, requests written whole; signs Standard Webhooks per request), nethttp (the same clients through net/http's Client, whose Transport costs the shared cores more) or wrk (Debian's wrk; no signed path)")
	flag.IntVar(&rounds, "rounds", rounds, "measured runs per path and connection count (the median is reported)")
	flag.BoolVar(&profile, "profile", true, "profile the durable path at the highest connection count and report where its CPU goes")
	flag.StringVar(&profileOut, "profile-out", "", "keep the durable path's CPU profile in this file (for go tool pprof)")
	flag.StringVar(&profilePath, "profile-path", "terraform", "the path the profile loads: terraform (the durable path), floor or records (the floors, to set beside it)")
	abOther := flag.String("ab", "", "measure -paths at -conns in alternated pairs of runs of two builds, -warden's (A, default: one built from this checkout) and this binary (B), each run on a fresh warden and store; prints each pair and the medians (not written to -out)")
	pairs := flag.Int("pairs", 7, "with -ab: how many pairs")
	flag.DurationVar(&profileWarmup, "profile-warmup", 25*time.Second, "load the profiled warden this long before its profile starts (its memtables grow to full size first; 0: profile from start)")
	flag.Parse()
	if heapProfileOut != "" {
		// Every allocation recorded: the profile divides the heap among an
		// actor's parts exactly, not by 512 KiB samples.
		runtime.MemProfileRate = 1
	}
	loadGen = *gen
	if *clusterBench {
		if err := runCluster(*out, *duration, *warmup); err != nil {
			fmt.Fprintln(os.Stderr, "warden-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *lists {
		if err := runLists(*out, *listSize, 200); err != nil {
			fmt.Fprintln(os.Stderr, "warden-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *clusterScale > 0 {
		if err := runClusterScale(*out, *clusterScale, *compaction+time.Minute, *steady, *compaction, *steadyRate); err != nil {
			fmt.Fprintln(os.Stderr, "warden-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *verifySize > 0 {
		if err := runVerify(*out, *verifySize); err != nil {
			fmt.Fprintln(os.Stderr, "warden-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *scale {
		var ns []int
		for _, f := range strings.Split(*sizes, ",") {
			var n int
			fmt.Sscan(f, &n)
			ns = append(ns, n)
		}
		if err := runScale(*out, ns); err != nil {
			fmt.Fprintln(os.Stderr, "warden-bench:", err)
			os.Exit(1)
		}
		return
	}
	if *abOther != "" {
		if err := runAB(*abOther, *pairs, *duration, *warmup, *connsFlag, strings.Split(*pathsFlag, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "warden-bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*duration, *warmup, *out, *connsFlag, strings.Split(*pathsFlag, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "warden-bench:", err)
		os.Exit(1)
	}
}

// profile: report a CPU profile of the durable path (-profile), kept in
// profileOut when set.
var (
	profile    = true
	profileOut string
	// profileWarmup is how long the profiled warden runs, loaded, before
	// its profile starts.
	profileWarmup time.Duration
	// profilePath is the path profiled: the durable path, or a floor.
	profilePath string
)

// fdatasyncP50 is the p50 of one fdatasync of a small write on the bench's
// disk: the floor under any durable answer at one connection.
func fdatasyncP50(dir string) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 128)
	ds := make([]time.Duration, 0, 200)
	for i := 0; i < 200; i++ {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, int64(i)*128); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return pct(ds, 50), nil
}

// goals states the durable path's targets against what this run
// measured: a share of the floor rather than "0.5x the no-op" (the no-op
// writes nothing, so it flattered no design), the floor (HTTP and one
// synced write, which no design
// can beat on this machine), and server CPU per request.
func goals(rs []result, conns []int, fsync time.Duration) string {
	byKey := map[string]result{}
	for _, r := range rs {
		byKey[fmt.Sprintf("%s/%d", r.path, r.conns)] = r
	}
	top, one := conns[len(conns)-1], conns[0]
	get := func(name string, c int) result { return byKey[fmt.Sprintf("%s/%d", allPaths[name].name, c)] }
	floor, minimal, records, noop, durable, pg := get("floor", top), get("minimal", top), get("records", top), get("noop", top), get("terraform", top), get("postgres", top)
	var b strings.Builder
	fmt.Fprintf(&b, "\nGoals, from this run; one fdatasync of a 128-byte write on this disk: p50 %s.\n\n", fsync.Round(time.Microsecond))
	b.WriteString("| goal | measured | met |\n|---|---|---|\n")
	row := func(goal string, ok bool, measured string, have bool) {
		met := "no"
		switch {
		case !have:
			met, measured = "not measured", "-"
		case ok:
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", goal, measured, met)
	}
	r := 0.0
	if floor.rps > 0 {
		r = durable.rps / floor.rps
	}
	row(fmt.Sprintf("durable >= 0.6x the floor at %d connections", top), r >= 0.6, fmt.Sprintf("%.2fx (%.0f against %.0f req/s)", r, durable.rps, floor.rps), floor.rps > 0 && durable.rps > 0)
	r = 0.0
	if minimal.rps > 0 {
		r = durable.rps / minimal.rps
	}
	row(fmt.Sprintf("durable >= 0.6x the minimal floor at %d connections", top), r >= 0.6, fmt.Sprintf("%.2fx (%.0f against %.0f req/s)", r, durable.rps, minimal.rps), minimal.rps > 0 && durable.rps > 0)
	cpu := fmt.Sprintf("%s (the floor's: %s", durable.cpuPerReq.Round(time.Microsecond), floor.cpuPerReq.Round(time.Microsecond))
	if records.cpuPerReq > 0 {
		cpu += fmt.Sprintf("; the records floor's: %s", records.cpuPerReq.Round(time.Microsecond))
	}
	row(fmt.Sprintf("server CPU per durable request <= 70us at %d connections", top), durable.cpuPerReq <= 70*time.Microsecond, cpu+")", durable.cpuPerReq > 0)
	if noop.rps > 0 && durable.rps > 0 {
		p := float64(durable.p99) / float64(noop.p99)
		row(fmt.Sprintf("durable p99 <= 1.5x the no-op's at %d connections", top), p <= 1.5, fmt.Sprintf("%.2fx (%s against %s)", p, durable.p99.Round(time.Microsecond), noop.p99.Round(time.Microsecond)), true)
	}
	r = 0.0
	if pg.rps > 0 {
		r = durable.rps / pg.rps
	}
	row(fmt.Sprintf("durable >= 5x PostgreSQL at %d connections", top), r >= 5, fmt.Sprintf("%.2fx", r), pg.rps > 0)
	d1 := get("terraform", one)
	if d1.p50 > 0 && one == 1 {
		x := float64(d1.p50) / float64(fsync)
		row("durable p50 at 1 connection <= 2x one fdatasync", x <= 2, fmt.Sprintf("%.2fx (%s against %s)", x, d1.p50.Round(time.Microsecond), fsync.Round(time.Microsecond)), true)
	}
	b.WriteString("\n")
	return b.String()
}

type result struct {
	path     string
	conns    int
	requests int
	errors   int
	rps      float64
	p50, p99 time.Duration
	// cpuPerReq is the server process's CPU time (user and system, from
	// /proc) over the run divided by the requests answered: steadier than
	// throughput on a two-core machine the load generator shares.
	cpuPerReq time.Duration
	// benchCPUPerReq is the bench's CPU time over the run divided the
	// same way: the load generator's cost, which comes off the cores the
	// server has (wrk's process's too, loadCPU), plus the handler of the
	// paths served in this process (PostgreSQL's, the minimal floor).
	benchCPUPerReq time.Duration
	// loadCPU is the CPU of a load generator run as its own process.
	loadCPU time.Duration
}

// A path is one way of calling the webhook: the no-op baseline and the
// durable path under each callback mode (docs/rules/trust.md T1-T3).
type path struct {
	name     string // as reported
	endpoint string // floor, floor-records, noop or terraform
	mode     string // shared, scoped or standard-webhooks
	// postgres: the request goes to the PostgreSQL baseline, not warden.
	postgres bool
	// minimal: the request goes to the minimal floor in the bench.
	minimal bool
}

// wardenFloor is a floor warden serves (with --bench-noop).
func (p path) wardenFloor() bool { return p.endpoint == "floor" || p.endpoint == "floor-records" }

var allPaths = map[string]path{
	"floor":     {"floor (HTTP + one synced write)", "floor", "shared", false, false},
	"minimal":   {"minimal floor (net/http + one synced Pebble Set)", "minimal", "shared", false, true},
	"records":   {"records floor (HTTP + a callback's keys, one synced batch)", "floor-records", "shared", false, false},
	"noop":      {"no-op", "noop", "shared", false, false},
	"terraform": {"durable (shared token)", "terraform", "shared", false, false},
	"scoped":    {"durable (scoped credential)", "terraform", "scoped", false, false},
	"signed":    {"durable (Standard Webhooks v1)", "terraform", "standard-webhooks", false, false},
	"postgres":  {"PostgreSQL 15, one transaction", "terraform", "shared", true, false},
}

// bench is one run's server and what the load needs to speak to it.
type bench struct {
	base    string
	client  *http.Client
	tokens  []string // scoped credential per marquee
	secret  []byte   // Standard Webhooks secret
	runID   string   // unique per bench process: no delivery id repeats across runs
	seq     atomic.Uint64
	marquee int
	// pgBase and pgCPU: the PostgreSQL baseline's server and its
	// cluster's CPU time, when it runs.
	pgBase string
	pgCPU  func() time.Duration
	// minimalBase is the minimal floor's server, in this process.
	minimalBase string
	// target, when set, is the server connection i sends to (a cluster's
	// nodes); nil sends every connection to baseOf.
	target func(i int) string
}

// baseOf is the server a path's requests go to.
func (b *bench) baseOf(p path) string {
	switch {
	case p.postgres:
		return b.pgBase
	case p.minimal:
		return b.minimalBase
	}
	return b.base
}

func run(duration, warmup time.Duration, out, connsFlag string, names []string) error {
	conns, paths, err := parseRun(connsFlag, names)
	if err != nil {
		return err
	}
	maxConns := slices.Max(conns)
	if _, err := profiled(); profile && err != nil {
		return err
	}
	tmp, bin, okScript, err := benchKit("warden-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b, server, err := startWarden(bin, okScript, tmp, maxConns)
	if server != nil {
		defer func() { _ = server.Process.Kill(); _ = server.Wait() }()
	}
	if err != nil {
		return err
	}
	paths, notes, stop, err := b.startBaselines(tmp, paths, maxConns)
	defer stop()
	if err != nil {
		return err
	}
	var results []result
	for _, c := range conns {
		rs, err := b.measure(paths, c, duration, warmup, func() time.Duration { return cpuTime(server.Process.Pid) })
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	fsync, err := fdatasyncP50(tmp)
	if err != nil {
		return err
	}
	report := render(results, duration, conns, paths) + strings.Join(notes, "\n") + goals(results, conns, fsync) + verificationCost(results)
	if profile {
		prof, err := profileDurable(bin, okScript, tmp, maxConns, duration)
		if err != nil {
			return err
		}
		report += prof
	}
	fmt.Print(report)
	if out != "" {
		return writeSection(out, report)
	}
	return nil
}

// parseRun reads -conns and the paths asked for.
func parseRun(connsFlag string, names []string) ([]int, []path, error) {
	var conns []int
	for _, c := range strings.Split(connsFlag, ",") {
		var n int
		if _, err := fmt.Sscan(c, &n); err != nil || n < 1 || n > 1024 {
			return nil, nil, fmt.Errorf("bad -conns %q", connsFlag)
		}
		conns = append(conns, n)
	}
	if !slices.Contains([]string{"go", "nethttp", "wrk"}, loadGen) {
		return nil, nil, fmt.Errorf("unknown -load %q: go, nethttp or wrk", loadGen)
	}
	var paths []path
	for _, n := range names {
		p, ok := allPaths[n]
		if !ok {
			return nil, nil, fmt.Errorf("unknown path %q", n)
		}
		if loadGen == "wrk" && p.mode == "standard-webhooks" {
			return nil, nil, fmt.Errorf("path %s needs a signature per request, which wrk's Lua cannot compute: use -load go", n)
		}
		paths = append(paths, p)
	}
	return conns, paths, nil
}

// startWarden starts warden with the benchmark's routes and one tutorial
// marquee per connection, each admitted and dispatched, so that every
// callback lands on a live attempt of generation 1. The process is
// returned as soon as it started, for the caller to stop, error or not.
func startWarden(bin, okScript, tmp string, marquees int) (*bench, *exec.Cmd, error) {
	b := &bench{secret: make([]byte, 32), marquee: marquees}
	var rid [6]byte
	_, _ = rand.Read(rid[:])
	_, _ = rand.Read(b.secret)
	b.runID = hex.EncodeToString(rid[:])
	secrets := filepath.Join(tmp, "webhook-secrets")
	if err := os.WriteFile(secrets, []byte("whsec_"+base64.StdEncoding.EncodeToString(b.secret)+"\n"), 0o600); err != nil {
		return nil, nil, err
	}
	addr, err := testports.StablePort() // warden binds it after this returns
	if err != nil {
		return nil, nil, err
	}
	data := filepath.Join(tmp, "data")
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data", data, "--bench-noop",
		"--dispatch", "exec", "--dispatch-command", okScript, "--bootstrap", "exec", "--bootstrap-command", okScript,
		"--pool", fmt.Sprintf("default=%d", marquees), "--log-format", "json",
		"--callback-auth", "scoped,shared,standard-webhooks", "--webhook-secrets-file", secrets)
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN="+callbackToken, "WARDEN_OPERATOR_TOKEN="+operatorToken)
	logf, _ := os.Create(filepath.Join(tmp, "warden.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	b.base = "http://" + addr
	b.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 2048}, Timeout: 10 * time.Second}
	if err := waitReady(b.client, b.base, 20*time.Second); err != nil {
		return nil, cmd, err
	}
	for i := 0; i < marquees; i++ {
		body := fmt.Sprintf(`{"id":"m-%03d","kind":"tutorial"}`, i)
		if st, err := post(b.client, b.base+"/v1/marquees", operatorToken, body, nil); err != nil || st != 201 {
			return nil, cmd, fmt.Errorf("create marquee %d: %d %v", i, st, err)
		}
	}
	keys, err := trust.LoadKeyring(filepath.Join(data, "callback-signing.key"))
	if err != nil {
		return nil, cmd, err
	}
	for i := 0; i < marquees; i++ {
		b.tokens = append(b.tokens, trust.MintScoped(keys, fmt.Sprintf("m-%03d", i), 1, time.Now().Add(time.Hour)))
	}
	time.Sleep(500 * time.Millisecond)
	return b, cmd, nil
}

// startBaselines starts the servers the baselines need (PostgreSQL, the
// minimal floor) and wrk's script. A PostgreSQL that cannot start drops
// its path, with a note saying so; stop stops what started.
func (b *bench) startBaselines(tmp string, paths []path, conns int) (_ []path, notes []string, stop func(), _ error) {
	var stops []func()
	stop = func() {
		for _, f := range stops {
			f()
		}
	}
	if i := slices.IndexFunc(paths, func(p path) bool { return p.postgres }); i >= 0 {
		base, cpu, stopPG, err := startPGServer(tmp, conns, conns)
		if err != nil {
			note := fmt.Sprintf("The PostgreSQL baseline did not run: %v.", err)
			fmt.Println(note)
			notes = append(notes, note)
			paths = slices.Delete(slices.Clone(paths), i, i+1)
		} else {
			stops = append(stops, stopPG)
			b.pgBase, b.pgCPU = base, cpu
		}
	}
	if slices.ContainsFunc(paths, func(p path) bool { return p.minimal }) {
		base, stopMinimal, err := startMinimalFloor(tmp)
		if err != nil {
			return paths, notes, stop, err
		}
		stops = append(stops, stopMinimal)
		b.minimalBase = base
	}
	if loadGen == "wrk" {
		wrkScript = filepath.Join(tmp, "load.lua")
		if err := os.WriteFile(wrkScript, []byte(wrkLua(b.tokens)), 0o644); err != nil {
			return paths, notes, stop, err
		}
	}
	return paths, notes, stop, nil
}

// measure runs every path once per round at c connections, in an order
// rotated each round, and reports each path's median round: the store
// grows as the bench runs (history, dedup records, compactions), so a
// fixed order would charge the later paths for the earlier ones' data.
// wardenCPU is the warden process's CPU time.
func (b *bench) measure(paths []path, c int, duration, warmup time.Duration, wardenCPU func() time.Duration) ([]result, error) {
	perPath := map[string][]result{}
	for round := 0; round < rounds; round++ {
		for k := range paths {
			p := paths[(k+round)%len(paths)]
			r, err := b.measureOnce(p, c, duration, warmup, wardenCPU)
			if err != nil {
				return nil, err
			}
			perPath[p.name] = append(perPath[p.name], r)
			fmt.Printf("round %d %-32s conns=%-3d %8.0f req/s  p50 %-9s p99 %-9s cpu/req %-8s (%d requests, %d errors, 0 duplicates)\n",
				round+1, r.path, r.conns, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.cpuPerReq.Round(time.Microsecond), r.requests, r.errors)
		}
	}
	var results []result
	for _, p := range paths {
		results = append(results, median(perPath[p.name]))
	}
	return results, nil
}

// measureOnce is one warmed-up, measured run of a path, refused if any
// request was answered as a duplicate delivery: a deduplicated answer
// costs a read, not a transition, and would flatter the durable path.
func (b *bench) measureOnce(p path, c int, duration, warmup time.Duration, wardenCPU func() time.Duration) (result, error) {
	_ = b.load(p, c, warmup)
	dupBefore, err := duplicates(b.client, b.baseOf(p))
	if err != nil {
		return result{}, err
	}
	cpu := wardenCPU
	switch {
	case p.postgres:
		cpu = b.pgCPU
	case p.minimal:
		cpu = func() time.Duration { return 0 } // shares this process: not separable
	}
	self := os.Getpid()
	cpuBefore, selfBefore := cpu(), cpuTime(self)
	r := b.load(p, c, duration)
	if r.requests > 0 {
		r.cpuPerReq = (cpu() - cpuBefore) / time.Duration(r.requests)
		r.benchCPUPerReq = (cpuTime(self) - selfBefore + r.loadCPU) / time.Duration(r.requests)
	}
	dupAfter, err := duplicates(b.client, b.baseOf(p))
	if err != nil {
		return result{}, err
	}
	if dupAfter != dupBefore {
		return result{}, fmt.Errorf("%s at %d connections: %.0f requests were answered as duplicate deliveries; the load repeated delivery ids", p.name, c, dupAfter-dupBefore)
	}
	return r, nil
}

// median is the round of median throughput, with the median CPU per
// request of all rounds.
func median(rs []result) result {
	rs = slices.Clone(rs)
	sort.Slice(rs, func(i, j int) bool { return rs[i].rps < rs[j].rps })
	med := rs[len(rs)/2]
	med.cpuPerReq = medianOf(rs, func(r result) time.Duration { return r.cpuPerReq })
	med.benchCPUPerReq = medianOf(rs, func(r result) time.Duration { return r.benchCPUPerReq })
	return med
}

// medianOf is the median of one figure over the rounds.
func medianOf(rs []result, figure func(result) time.Duration) time.Duration {
	vs := make([]time.Duration, len(rs))
	for i, r := range rs {
		vs[i] = figure(r)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// duplicates reads the server's count of deduplicated answers.
func duplicates(c *http.Client, base string) (float64, error) {
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	return metricSum(body, "warden_callbacks_total", `result="duplicate_delivery"`), nil
}

// metricSum adds up a /metrics body's samples of family whose labels
// include every one of labels (each as name="value").
func metricSum(body []byte, family string, labels ...string) float64 {
	var total float64
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, family+"{")
		if !ok {
			rest, ok = strings.CutPrefix(line, family+" ") // a sample without labels
		}
		if !ok || !containsAll(rest, labels) {
			continue
		}
		f := strings.Fields(rest)
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			total += v
		}
	}
	return total
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// waitReady waits until base answers /readyz (a cluster node waits for
// its etcd quorum first, hence the caller's bound).
func waitReady(c *http.Client, base string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("warden did not become ready")
}

func post(c *http.Client, url, token, body string, headers []string) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

var (
	loadGen   string
	wrkScript string
)

// wrkLua gives every request of every thread a delivery id no other
// request of this bench run has: wrk runs each thread in its own Lua state
// and does not seed math.random, so the id is built from the thread's
// number (a global setup sets in that thread's state; a top-level "local"
// of the same name would shadow it), a per-thread counter, and a run id
// passed as the script's argument. Marquee i is called with its own
// credential (the scoped path) or the shared token.
func wrkLua(tokens []string) string {
	var t strings.Builder
	for _, tok := range tokens {
		fmt.Fprintf(&t, "%q,", tok)
	}
	return `
local threads = 0
setup = function(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
init = function(args)
  run = args[1]
  mode = args[2]
  counter = 0
  scoped = {` + t.String() + `}
end
request = function()
  counter = counter + 1
  local i = (counter * 7 + tid * 13) % #scoped
  local body = '{"marquee_id":"' .. string.format("m-%03d", i) .. '","verb":"step","generation":1,"step":"vm_starting"}'
  local token = "` + callbackToken + `"
  if mode == "scoped" then token = scoped[i + 1] end
  return wrk.format("POST", wrk.path, {["Authorization"]="Bearer " .. token, ["Content-Type"]="application/json",
    ["Webhook-Id"]="wrk-" .. run .. "-" .. tid .. "-" .. counter}, body)
end
`
}

// loadWrk runs Debian's wrk and reads its summary.
func (b *bench) loadWrk(p path, conns int, d time.Duration) result {
	threads := min(conns, 2)
	// A fresh run id per call: the warm-up and the measured run never share ids.
	runID := fmt.Sprintf("%s-%d", b.runID, b.seq.Add(1))
	cmd := exec.Command("wrk", "-t", fmt.Sprint(threads), "-c", fmt.Sprint(conns), "-d", fmt.Sprintf("%ds", max(1, int(d.Seconds()))),
		"--latency", "-s", wrkScript, b.baseOf(p)+"/v1/webhooks/"+p.endpoint, "--", runID, p.mode)
	out, err := cmd.CombinedOutput()
	r := result{path: p.name, conns: conns}
	if err != nil {
		r.errors = 1
		return r
	}
	r.loadCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			fmt.Sscan(f[1], &r.rps)
		case len(f) == 2 && f[0] == "50%":
			r.p50, _ = time.ParseDuration(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.p99, _ = time.ParseDuration(f[1])
		case len(f) >= 5 && f[1] == "requests" && f[2] == "in":
			fmt.Sscan(f[0], &r.requests)
		case len(f) == 2 && f[0] == "Non-2xx":
			fmt.Sscan(f[1], &r.errors)
		case len(f) >= 2 && f[0] == "Socket" && f[1] == "errors:":
			r.errors++
		}
	}
	return r
}

// load runs conns closed-loop clients for d. Client i always speaks for
// marquee i, each request with a delivery id unique in the bench run, so
// every durable request is a real transition: snapshot, history entry and
// dedup record in one synced batch.
func (b *bench) load(p path, conns int, d time.Duration) result {
	if loadGen == "wrk" {
		return b.loadWrk(p, conns, d)
	}
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		url := b.baseOf(p) + "/v1/webhooks/" + p.endpoint
		if b.target != nil {
			url = b.target(i) + "/v1/webhooks/" + p.endpoint
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			send := func(token, body string, headers []string) (int, error) {
				return post(b.client, url, token, body, headers)
			}
			if loadGen == "go" {
				lc, err := newLoadConn(url)
				if err != nil {
					errs.Add(1)
					return
				}
				defer lc.close()
				send = lc.post
			}
			body, _ := json.Marshal(map[string]any{"marquee_id": fmt.Sprintf("m-%03d", i), "verb": "step", "generation": 1, "step": "vm_starting"})
			local := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) {
				start := time.Now()
				id := fmt.Sprintf("bench-%s-%d", b.runID, b.seq.Add(1))
				token, headers := callbackToken, []string{"Webhook-Id", id}
				switch p.mode {
				case "scoped":
					token = b.tokens[i]
				case "standard-webhooks":
					ts := strconv.FormatInt(time.Now().Unix(), 10)
					token, headers = "", []string{"Webhook-Id", id, "Webhook-Timestamp", ts, "Webhook-Signature", trust.SignV1(b.secret, id, ts, body)}
				}
				st, err := send(token, string(body), headers)
				if err != nil || st != 200 {
					errs.Add(1)
					continue
				}
				local = append(local, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{path: p.name, conns: conns, requests: len(lat), errors: int(errs.Load()), rps: float64(len(lat)) / d.Seconds()}
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r
}

// verificationCost measures each callback mode's authentication alone with
// the Go benchmark BenchmarkCallbackAuth and sets it beside the durable
// path's server CPU per request measured above: a precise figure for
// docs/rules/trust.md's budget ("verification may cost at most 10% of the durable
// throughput"), where the end-to-end rows move by more than that from run
// to run on two shared cores.
func verificationCost(rs []result) string {
	out, err := exec.Command("go", "test", "./httpapi", "-run", "^$", "-bench", "BenchmarkCallbackAuth", "-benchtime", "200000x", "-count", "3").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("Verification cost: the Go benchmark failed: %v\n\n", err)
	}
	perMode := map[string][]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && strings.HasPrefix(f[0], "BenchmarkCallbackAuth/") && f[3] == "ns/op" {
			name := strings.TrimPrefix(f[0], "BenchmarkCallbackAuth/")
			name = name[:strings.LastIndexByte(name, '-')]
			var ns float64
			fmt.Sscan(f[2], &ns)
			perMode[name] = append(perMode[name], ns)
		}
	}
	var durable time.Duration
	for _, r := range rs {
		if r.path == allPaths["terraform"].name && r.conns == slices.Max(connsOf(rs)) {
			durable = r.cpuPerReq
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Verification cost (`go test ./httpapi -bench BenchmarkCallbackAuth -benchtime 200000x -count 3`, median; header parsing, credential check and binding to the body's marquee and generation), against the shared-token durable path's server CPU per request at the highest connection count above (%s):\n\n", durable.Round(time.Microsecond))
	fmt.Fprintf(&b, "| mode | per request | share of the durable path's CPU |\n|---|---|---|\n")
	for _, mode := range []string{"shared", "scoped", "standard-webhooks"} {
		ns := perMode[mode]
		if len(ns) == 0 {
			continue
		}
		slices.Sort(ns)
		med := time.Duration(ns[len(ns)/2])
		share := "n/a"
		if durable > 0 {
			share = fmt.Sprintf("%.1f%%", 100*float64(med)/float64(durable))
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", mode, med, share)
	}
	b.WriteString("\n")
	return b.String()
}

func connsOf(rs []result) []int {
	var cs []int
	for _, r := range rs {
		cs = append(cs, r.conns)
	}
	return cs
}

// rounds is how often each path is measured; the median is reported.
var rounds = 3

// cpuTime is a process's user and system CPU time so far (/proc/<pid>/stat,
// in clock ticks of 10 ms; over a run of seconds that is fine-grained
// enough).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name may hold spaces; fields count from after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func render(rs []result, d time.Duration, conns []int, paths []path) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Durable webhook path vs no-op (loopback)\n\n")
	fmt.Fprintf(&b, "Command: `make bench` (`go run ./cmd/warden-bench -out BENCHMARKS.md`), %s per scenario after a warm-up.\n", d)
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Run: %s on %s, %s/%s, %d CPUs, %s. Load generator: %s, on the same machine as the server (it shares the CPUs). "+
		"Every request carries a delivery id used once in the whole run; the server's count of deduplicated answers was read before and after each measured run and did not move (the bench fails if it does).\n\n",
		time.Now().UTC().Format("2006-01-02"), host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), loadGen)
	fmt.Fprintf(&b, "Each path ran %d times per connection count, in a rotated order; the row is the median run by throughput, with the median server CPU per request. The bench's own CPU per request is the load generator's (and, for the minimal floor and PostgreSQL, their HTTP handlers, which run in the bench): CPU the two cores do not give the server.\n\n", rounds)
	fmt.Fprintf(&b, "| conns | path | req/s | p50 | p99 | server CPU / request | bench CPU / request | errors | throughput vs floor | vs no-op | vs shared-token durable | CPU vs shared-token durable |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	byKey := map[string]result{}
	for _, r := range rs {
		byKey[fmt.Sprintf("%s/%d", r.path, r.conns)] = r
	}
	for _, c := range conns {
		floor := byKey[fmt.Sprintf("%s/%d", allPaths["floor"].name, c)]
		noop := byKey[fmt.Sprintf("%s/%d", allPaths["noop"].name, c)]
		shared := byKey[fmt.Sprintf("%s/%d", allPaths["terraform"].name, c)]
		for _, p := range paths {
			r := byKey[fmt.Sprintf("%s/%d", p.name, c)]
			vsFloor, ratio, vsShared, cpuVsShared := "", "", "", ""
			baseline := p.endpoint == "noop" || p.wardenFloor() || p.minimal
			if p.endpoint == "floor" {
				vsFloor = "1.00 (baseline)"
			} else if floor.rps > 0 {
				vsFloor = fmt.Sprintf("%.2f", r.rps/floor.rps)
			}
			if p.endpoint == "noop" {
				ratio = "1.00 (baseline)"
			} else if noop.rps > 0 {
				ratio = fmt.Sprintf("%.2f", r.rps/noop.rps)
			}
			if !baseline && shared.rps > 0 {
				vsShared = fmt.Sprintf("%.2f", r.rps/shared.rps)
			}
			if !baseline && shared.cpuPerReq > 0 {
				cpuVsShared = fmt.Sprintf("%.2f", float64(r.cpuPerReq)/float64(shared.cpuPerReq))
			}
			cpu := r.cpuPerReq.Round(time.Microsecond).String()
			if p.minimal {
				cpu = "- (in the bench)"
			}
			fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %s | %s | %s | %d | %s | %s | %s | %s |\n", c, p.name, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond),
				cpu, r.benchCPUPerReq.Round(time.Microsecond), r.errors, vsFloor, ratio, vsShared, cpuVsShared)
		}
	}
	b.WriteString("\n")
	for _, c := range conns {
		pg, shared := byKey[fmt.Sprintf("%s/%d", allPaths["postgres"].name, c)], byKey[fmt.Sprintf("%s/%d", allPaths["terraform"].name, c)]
		if pg.rps > 0 && shared.rps > 0 {
			fmt.Fprintf(&b, "At %d connection(s) the durable path (shared token) answered %.2fx the PostgreSQL baseline's throughput, p50 %s against %s. ",
				c, shared.rps/pg.rps, shared.p50.Round(time.Microsecond), pg.p50.Round(time.Microsecond))
		}
	}
	b.WriteString("The PostgreSQL row's CPU is its cluster's processes only (its HTTP handler runs inside the bench), a lower bound of its cost per request.\n\n")
	return b.String()
}

func writeSection(path, section string) error {
	return mdreport.Replace(path, "## Durable webhook path vs no-op (loopback)", section)
}

// profileSpan says what the profile covers.
func profileSpan() string {
	if profileWarmup <= 0 {
		return "the profile covers the whole process, set-up included"
	}
	return fmt.Sprintf("the profile starts after %s of start-up and the same load, `--cpu-profile-after %s`", profileWarmup, profileWarmup)
}

// profiled is the path -profile-path names.
func profiled() (path, error) {
	switch profilePath {
	case "terraform", "floor", "records":
		return allPaths[profilePath], nil
	}
	return path{}, fmt.Errorf("-profile-path %q: terraform, floor or records", profilePath)
}

// profileDurable runs the durable path (shared token), or the floor
// -profile-path names, at conns against a warden of its own started with
// --cpu-profile, then reports the top of the profile: where the server's
// CPU goes per request.
func profileDurable(bin, okScript, tmp string, conns int, d time.Duration) (string, error) {
	p, err := profiled()
	if err != nil {
		return "", err
	}
	addr, err := testports.StablePort() // warden binds it after this returns
	if err != nil {
		return "", err
	}
	profPath := filepath.Join(tmp, "durable.pprof")
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data", filepath.Join(tmp, "profile-data"),
		"--dispatch", "exec", "--dispatch-command", okScript, "--bootstrap", "exec", "--bootstrap-command", okScript,
		"--pool", fmt.Sprintf("default=%d", conns), "--log-format", "json", "--callback-auth", "shared", "--cpu-profile", profPath,
		"--cpu-profile-after", profileWarmup.String())
	if p.wardenFloor() {
		cmd.Args = append(cmd.Args, "--bench-noop")
	}
	started := time.Now()
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN="+callbackToken, "WARDEN_OPERATOR_TOKEN="+operatorToken)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	b := &bench{base: "http://" + addr, marquee: conns, runID: "profile",
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 2048}, Timeout: 10 * time.Second}}
	if err := waitReady(b.client, b.base, 20*time.Second); err != nil {
		_ = cmd.Process.Kill()
		return "", err
	}
	for i := 0; i < conns; i++ {
		body := fmt.Sprintf(`{"id":"m-%03d","kind":"tutorial"}`, i)
		if st, err := post(b.client, b.base+"/v1/marquees", operatorToken, body, nil); err != nil || st != 201 {
			_ = cmd.Process.Kill()
			return "", fmt.Errorf("profile: create marquee %d: %d %v", i, st, err)
		}
	}
	if warm := profileWarmup - time.Since(started); warm > 0 {
		_ = b.load(p, conns, warm)
	}
	r := b.load(p, conns, d)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		return "", fmt.Errorf("profile: warden did not stop cleanly: %w", err)
	}
	if profileOut != "" {
		if raw, err := os.ReadFile(profPath); err == nil {
			_ = os.WriteFile(profileOut, raw, 0o644)
		}
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=30", bin, profPath).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pprof: %v: %s", err, top)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Where the server's CPU goes on the %s path: `go tool pprof -top -cum` (cumulative) of a warden started with `--cpu-profile`, loaded with it at %d connections for %s (%.0f req/s in that run; %s):\n\n```\n", p.name, conns, d, r.rps, profileSpan())
	lines := strings.Split(strings.TrimSpace(string(top)), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		sb.WriteString(l + "\n")
	}
	sb.WriteString("```\n\n")
	return sb.String(), nil
}
