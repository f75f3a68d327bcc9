package sim

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/internal/explaincheck"
	"github.com/wardenhq/warden/persistence"
)

func report(t *testing.T, r SeedRun) {
	t.Helper()
	if r.Violation == nil {
		return
	}
	tail := r.Trace[max(0, len(r.Trace)-30):]
	t.Errorf("seed %d: %v\n%s\ntrace tail:\n%s\nreplay: go run ./cmd/warden-sim --seed %d --nodes %d --trace", r.Seed, r.Violation, r.Config, strings.Join(tail, "\n"), r.Seed, r.Nodes)
}

// TestSeedsWithDeterminism is the CI batch (docs/rules/simulation.md: at least 200
// seeds, each run twice and compared, each checked against a fault-free
// run of its workload): 200 under make check, which CI runs; 60 under
// make test, and 8 under the race detector or -short to show the code
// paths race-clean.
func TestSeedsWithDeterminism(t *testing.T) {
	checkBatch(t, 1, batchSize(200, 60, 8))
}

// batchSize is a batch's seeds: make check's, make test's, and a few
// under -short or the race detector.
func batchSize(check, test, few uint64) uint64 {
	switch {
	case os.Getenv("WARDEN_CHECK") == "1":
		return check
	case testing.Short() || raceEnabled:
		return few
	}
	return test
}

// checkBatch runs seeds 1..n on the given nodes (1: a single node), each
// twice and compared, then against a fault-free run of its workload; it
// stops at the first failure.
func checkBatch(t *testing.T, nodes int, n uint64) {
	t.Helper()
	for seed := uint64(1); seed <= n; seed++ {
		o := Options{Seed: seed, Nodes: nodes}
		r, div := CheckDeterminism(o)
		if div != nil {
			t.Fatal(div)
		}
		report(t, Converge(r, o))
		if t.Failed() {
			return
		}
	}
}

// TestC11ClusterSeedsWithDeterminism is the CI batch of cluster seeds (C11)
// (docs/rules/simulation.md, the cluster in the simulator): three nodes on
// the simulated etcd, each seed run twice and compared, then against a
// fault-free run of its workload; every invariant, C3-C5 and each
// marquee's linearizability hold: 40 under make check, 10 under make
// test. make sim runs 1,000.
func TestC11ClusterSeedsWithDeterminism(t *testing.T) {
	checkBatch(t, 3, batchSize(40, 10, 2))
}

// replayEnv makes this test binary, run again, print one cluster seed's
// trace hash and exit: another process replaying the seed.
const replayEnv = "WARDEN_SIM_REPLAY_SEED"

// TestClusterSeedReplaysInAnotherProcess (C11): a cluster seed printed by a
// failure replays identically in another process (a new address space,
// new map seeds, new goroutine schedule): the trace hash this process
// computes is the one a second process computes.
func TestClusterSeedReplaysInAnotherProcess(t *testing.T) {
	if s := os.Getenv(replayEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("replay-hash %s\n", Run(Options{Seed: seed, Nodes: 3}).Hash)
		return
	}
	seeds := []uint64{3, 17}
	if raceEnabled {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		here := Run(Options{Seed: seed, Nodes: 3})
		cmd := exec.Command(os.Args[0], "-test.run=^TestClusterSeedReplaysInAnotherProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", replayEnv, seed))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("seed %d in another process: %v\n%s", seed, err, out)
		}
		_, after, ok := strings.Cut(string(out), "replay-hash ")
		if !ok {
			t.Fatalf("seed %d: the other process printed no hash:\n%s", seed, out)
		}
		there, _, _ := strings.Cut(after, "\n")
		if there != here.Hash {
			t.Fatalf("seed %d: trace hash %s here, %s in another process", seed, here.Hash, there)
		}
		if here.Crashes == 0 || here.Steps < 1000 {
			t.Fatalf("seed %d replayed a run with %d crashes and %d steps: too little to show anything", seed, here.Crashes, here.Steps)
		}
	}
}

// TestRegressionSeeds keeps every seed that once found a bug.
func TestRegressionSeeds(t *testing.T) {
	for _, seed := range []uint64{
		23, // the quiet phase's repair followed answers, not intents (simulator fix)
		92, // an actor crash between commit and the slot release leaked the slot (I9); fixed by Reconcile{AfterFailure}
		7,  // an older generation's dispatch reached GitHub after a newer one (oracle read I2 too strictly)
		// A failed write of an internal event (the pool's reconciliation
		// after a crash) dropped it and leaked the slot (I9); fixed by
		// retrying internal events with back-off.
		2805, 3366, 4214, 4973,
		// The preview world's first finds (each also has a direct golden or
		// unit test in actors/environment; the world has changed since, so
		// these seeds now replay other scenarios):
		1,   // a repair after the removal request rewound the preview (removal answers open drift)
		25,  // an older preview activated over a route a newer one had held (I14; the newest-sibling rule)
		194, // a newer preview took the hostname between activation and smoke check (superseded, not E3)
		243, // the wake stayed at a spent back-off with an attempt in flight (TestWakeFollowsTheLeaseNotASpentBackoff)
	} {
		report(t, Check(Options{Seed: seed}))
	}
}

// TestClusterRegressionSeeds keeps every cluster seed that once found a
// bug.
func TestClusterRegressionSeeds(t *testing.T) {
	for _, seed := range []uint64{
		// A marquee on a node whose store refused writes (cut off from
		// etcd) woke at once for a deadline it could not apply, forever:
		// virtual time stood still and the run never ended (now the
		// livelock oracle's, and fireDue waits a second after a stall).
		646,
		// The quiet phase's last repair redeployed a host torn down by a
		// confirmed false null; provisioned again it came up active, and
		// no repair was left to disable it as the operator had asked
		// (simulator fix: repairs go on while they have something to do).
		1000,
		// A false null's confirmation, delayed by the weather past the
		// last repair round, errored its marquee for good: warden was right
		// (M16, M18) and the oracle blamed it (simulator fix: the weather's
		// delays land before the last sure repair, landBy).
		64,
	} {
		report(t, Check(Options{Seed: seed, Nodes: 3}))
	}
}

// TestTheWeathersDelaysLandWhileTheOperatorStillRepairs: a callback the
// weather delays (late, reordered) arrives before the last repair round
// that runs whatever it finds, on one node and on three, so that the
// convergence oracle compares worlds the operator could repair.
func TestTheWeathersDelaysLandWhileTheOperatorStillRepairs(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		w := newWorld(Options{Seed: 1, Nodes: nodes})
		w.faults = &faults{rate: map[string]float64{"callback.late": 1, "callback.reorder": 1},
			rnd: w.rnd, fired: map[string]int{}}
		repairs := w.sureRepairs()
		last := repairs[len(repairs)-1]
		sent := epoch.Add(w.opts.FaultyPhase - time.Minute)
		capped := 0
		for range 2000 {
			w.callbackAt(sent, map[string]any{"verb": "null"}, "")
		}
		for _, e := range w.events {
			if !e.at.Before(last) {
				t.Fatalf("%d node(s): a delayed callback lands at %v, the last sure repair is at %v", nodes, e.at.Sub(epoch), last.Sub(epoch))
			}
			if e.at.Equal(w.land) {
				capped++
			}
		}
		if capped == 0 {
			t.Fatalf("%d node(s): no delay of 2000 reached the bound; the test shows nothing", nodes)
		}
		// A callback sent after the bound (a quiet phase's workflow) is not moved.
		w.events = nil
		w.callbackAt(last.Add(time.Minute), map[string]any{"verb": "null"}, "")
		if len(w.events) != 1 || w.events[0].at.Before(last.Add(time.Minute)) {
			t.Fatalf("%d node(s): a callback sent after the bound was moved earlier", nodes)
		}
	}
}

// TestSimulatorReportsALivelock: a world whose time stands still is a
// violation named "livelock", not a run that never ends.
func TestSimulatorReportsALivelock(t *testing.T) {
	var spin func()
	arm := func(w *world) {
		spin = func() { w.after(0, "spin", spin) }
		w.after(time.Minute, "spin", spin)
	}
	r := Run(Options{Seed: 1, arm: arm})
	if r.Violation == nil || r.Violation.Invariant != "livelock" {
		t.Fatalf("a wake re-armed at once: got %v, want the livelock violation", r.Violation)
	}
}

// TestSimulatorReportsARunaway: work that multiplies while time still
// passes, a microsecond at a time, is a violation with its seed, not a
// run that takes hours (cluster seed 179, sim/testdata/regressions).
func TestSimulatorReportsARunaway(t *testing.T) {
	var storm func(n int)
	arm := func(w *world) {
		storm = func(n int) {
			for range n {
				w.after(time.Microsecond, "storm", func() { storm(2) })
			}
		}
		w.after(time.Minute, "storm", func() { storm(1) })
	}
	r := Run(Options{Seed: 1, arm: arm})
	if r.Violation == nil || r.Violation.Invariant != "runaway" {
		t.Fatalf("a retry that starts two: got %v, want the runaway violation", r.Violation)
	}
}

// TestPlantedBugsAreCaught: every planted bug is found within 100 seeds,
// by the invariant it breaks.
func TestPlantedBugsAreCaught(t *testing.T) {
	for _, p := range Planted {
		t.Run(p.Name, func(t *testing.T) {
			if raceEnabled {
				// Up to a hundred seeds each under the race detector's
				// fivefold slowdown: make test runs them without it.
				t.Skip("planted bugs run in make test without -race")
			}
			r, seed := FindPlanted(p.Name, p.Nodes, 100)
			if seed == 0 {
				t.Fatalf("planted bug %s was not caught within 100 seeds", p.Name)
			}
			t.Logf("%s caught at seed %d by %v", p.Name, seed, r.Violation)
			if r.Violation.Invariant != p.Invariant {
				t.Logf("(expected %s, caught first by %s)", p.Invariant, r.Violation.Invariant)
			}
		})
	}
}

// TestI11EachBoundaryOnce: for each boundary of I11, a fault injected once
// (the only fault of the run), then the controller runs until no transition
// is eligible; the environments' final states and the preview world's
// resources must equal a fault-free run of the same workload (Check's
// convergence oracle), and I12-I14 hold throughout. Each boundary is tried
// on the first two seeds whose workload reaches it.
func TestI11EachBoundaryOnce(t *testing.T) {
	for _, point := range I11Boundaries {
		t.Run(point, func(t *testing.T) {
			hit := 0
			for seed := uint64(1); seed <= 30 && hit < 2; seed++ {
				r := Check(Options{Seed: seed, Once: point})
				report(t, r)
				if r.Fired[point] > 1 {
					t.Fatalf("seed %d: %s fired %d times, once expected", seed, point, r.Fired[point])
				}
				if r.Fired[point] == 1 {
					hit++
					if point == "env.paused-worker" && r.Coverage["I13"] == 0 {
						t.Errorf("seed %d: the paused worker's late result was not seen rejected (I13)", seed)
					}
				}
			}
			if hit < 2 {
				t.Fatalf("%s fired in %d of 30 seeds; the workload does not reach it", point, hit)
			}
		})
	}
}

// Regressions: every file under testdata/regressions replays its
// schedule and now passes; the cluster's paper-trail finding (C14)
// fails again with C14's guard planted off (S14 when it was found; which
// oracle sees it first moves as the code does).
func TestS14RegressionFilesReplay(t *testing.T) {
	paths, gs, err := ReadRegressions("testdata/regressions")
	if err != nil || len(gs) == 0 {
		t.Fatalf("regression files: %v (%d read)", err, len(gs))
	}
	for i, g := range gs {
		r := Check(g.Options())
		if r.Violation != nil {
			t.Fatalf("%s: %v", paths[i], r.Violation)
		}
		if len(r.Fired) == 0 {
			t.Fatalf("%s: no fault of the plan fired", paths[i])
		}
	}
	g, err := readRegression("testdata/regressions/seed-12-nodes-3.json")
	if err != nil {
		t.Fatal(err)
	}
	g.Plant = PlantUnguarded
	r := Check(g.Options())
	if r.Violation == nil {
		t.Fatal("without the guard the same schedule must fail (a late commit landing over its entity's newer record)")
	}
	t.Logf("without the guard: %v", r.Violation)
}

// TestS14APlantedHistoryBreakFailsTheSeed: a history entry lost from the
// store (a later one moved into its sequence, so none is missing) fails
// the seed that the same run passes untouched: the simulator checks that
// every history replays to its record after every seed, on one node and on
// a cluster.
func TestS14APlantedHistoryBreakFailsTheSeed(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		o := Options{Seed: 3, Nodes: nodes}
		if r := Run(o); r.Violation != nil {
			t.Fatalf("nodes %d: the untouched seed fails: %v", nodes, r.Violation)
		}
		o.arm = func(w *world) {
			w.at(w.end.Add(-time.Second), "plant: a history entry lost", func() { w.loseHistoryEntry() })
		}
		r := Run(o)
		if r.Violation == nil || r.Violation.Invariant != "S14" {
			t.Fatalf("nodes %d: a history that no longer replays must fail the seed (S14); got %v", nodes, r.Violation)
		}
	}
}

// loseHistoryEntry drops the second history entry of the first marquee
// that has a third, moving every later entry down one, as a commit that
// reused a sequence would leave it.
func (w *world) loseHistoryEntry() {
	for _, id := range w.ids {
		rec, err := record.LoadMarquee(w.store, nil, id)
		if err != nil || rec.HistorySeq < 3 {
			continue
		}
		b := w.store.NewBatch()
		for seq := uint64(2); seq < rec.HistorySeq; seq++ {
			var e marquee.Entry
			if err := w.store.Get(persistence.HistoryKey(id, seq+1), &e); err != nil {
				panic(err)
			}
			b.Put(persistence.HistoryKey(id, seq), e)
		}
		b.Delete(persistence.HistoryKey(id, rec.HistorySeq))
		rec.HistorySeq--
		record.PutMarquee(b, nil, rec)
		if err := b.Commit(); err != nil {
			panic(err)
		}
		w.logf("planted: %s's history entry 2 lost", id)
		return
	}
	panic("no marquee with three history entries")
}

// FuzzRegressionFile: a regression file is read with its limits, never
// trusted: any bytes are refused with an error or read into a plan whose
// fired points are on and whose reaches are in order.
func FuzzRegressionFile(f *testing.F) {
	good, err := os.ReadFile("testdata/regressions/seed-12-nodes-3.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"seed":1,"nodes":3,"rates":{"a":1},"fires":{"a":[2,1]}}`))
	f.Add([]byte(`{"seed":1,"nodes":9}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := t.TempDir() + "/r.json"
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		g, err := readRegression(path)
		if err != nil {
			return
		}
		if g.Nodes < 1 || g.Nodes > maxNodes {
			t.Fatalf("nodes %d read", g.Nodes)
		}
		for p, reaches := range g.Fires {
			if _, on := g.Rates[p]; !on {
				t.Fatalf("fires %q, not on", p)
			}
			for i := 1; i < len(reaches); i++ {
				if reaches[i] < reaches[i-1] {
					t.Fatalf("reaches of %q out of order", p)
				}
			}
		}
	})
}

// TestO18DryRunIsTheRealStepOnSimulatorStates: on the states the
// simulator's weather brings marquees to (faults, crashes, late and
// repeated callbacks, one node and three), each callback is dry-run just
// before it is sent; the dry run leaves the store's bytes as they were and
// answers what the callback then gets, byte for byte. 10,000 cases under
// make check (about 100 s here), 1,000 in make test.
func TestO18DryRunIsTheRealStepOnSimulatorStates(t *testing.T) {
	want := 1_000
	if os.Getenv("WARDEN_CHECK") == "1" {
		want = 10_000
	}
	compared := 0
	for seed := uint64(1); compared < want; seed++ {
		if seed >= 400 {
			t.Fatalf("too few cases: %d after %d seeds", compared, seed-1)
		}
		nodes := 1
		if seed%2 == 0 {
			nodes = 3
		}
		n := 0
		r := Run(Options{Seed: seed, Nodes: nodes, dryRunFirst: true, dryRuns: &n})
		if r.Violation != nil {
			t.Fatalf("seed %d nodes %d: %v", seed, nodes, r.Violation)
		}
		compared += n
	}
	t.Logf("%d dry runs compared with the real callback", compared)
}

// TestO17AwaitingListsWhatStepAcceptsOnSimulatorStates holds explain's
// awaiting to Step both ways (internal/explaincheck) on every marquee,
// environment and pool state a durable transition leaves in six seeds, one node
// and three, at the time each was reached and a minute, an hour and a
// day later: the states faults, crashes, paused workers, drift and late,
// repeated and stale callbacks bring them to, beyond the golden files'.
func TestO17AwaitingListsWhatStepAcceptsOnSimulatorStates(t *testing.T) {
	marquees, envs, pools := 0, 0, 0
	laters := []time.Duration{0, time.Minute, time.Hour, 24 * time.Hour}
	for seed := uint64(1); seed <= 6; seed++ {
		nodes := 1 + 2*int(seed%2)
		where := func(kind string, n int, later time.Duration) string {
			return fmt.Sprintf("seed %d nodes %d %s state %d +%s", seed, nodes, kind, n, later)
		}
		r := Run(Options{Seed: seed, Nodes: nodes,
			observe: func(m marquee.Machine, s marquee.State, now time.Time) {
				marquees++
				for _, later := range laters {
					for _, bad := range explaincheck.Marquee(m, s.Clone(), now.Add(later)) {
						t.Errorf("%s: %s", where("marquee", marquees, later), bad)
					}
				}
			},
			observePool: func(p admission.Pool, now time.Time) {
				pools++
				for _, bad := range explaincheck.Pool(p, now) {
					t.Errorf("%s: %s", where("pool", pools, 0), bad)
				}
			},
			observeEnv: func(m environment.Machine, e environment.Env, now time.Time) {
				envs++
				for _, later := range laters {
					for _, bad := range explaincheck.Environment(m, e.Clone(), now.Add(later)) {
						t.Errorf("%s: %s", where("environment", envs, later), bad)
					}
				}
			}})
		if r.Violation != nil {
			t.Fatalf("seed %d nodes %d: %v", seed, nodes, r.Violation)
		}
	}
	if marquees < 1000 || envs < 200 || pools < 100 {
		t.Fatalf("only %d marquee, %d environment and %d pool states walked", marquees, envs, pools)
	}
	t.Logf("%d marquee, %d environment and %d pool states walked", marquees, envs, pools)
}
