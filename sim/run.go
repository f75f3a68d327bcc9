package sim

import (
	"container/heap"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/driver"
)

// SeedRun is what one seed's run produced.
type SeedRun struct {
	Seed      uint64
	Nodes     int // 1, or the cluster's size
	Config    string
	Violation *Violation
	Trace     []string
	Hash      string
	Steps     int
	// BusiestMinute is the most steps and events in one minute of
	// virtual time (runsAway's bound is a hundred times what passes).
	BusiestMinute int
	Messages      int
	Crashes       int
	SimTime       time.Duration
	Wall          time.Duration
	Coverage      map[string]int
	Fired         map[string]int
	Final         map[string]string
	// plan is the run's faults as drawn and fired (Regression).
	plan *faults
}

// Defaults of a run's phases. A cluster's nodes tick every simTick, so
// its runs are shorter: an hour and a half of weather, then two quiet.
const (
	DefaultFaultyPhase        = 4 * time.Hour
	DefaultQuietPhase         = 6 * time.Hour
	DefaultClusterFaultyPhase = 90 * time.Minute
	DefaultClusterQuietPhase  = 2 * time.Hour
)

// Run runs one seed: a faulty phase, a clean restart, a quiet phase in
// which the operator repairs toward the workload's intent, and the
// oracles throughout.
func Run(o Options) SeedRun {
	wallStart := time.Now()
	w := newWorld(o)
	cluster := o.Nodes > 1
	w.logf("seed %d nodes %d %s plant=%q", o.Seed, max(o.Nodes, 1), w.faults, o.Plant)
	if cluster {
		w.startCluster()
		w.linWorkload()
		w.clusterWeather()
	} else {
		w.p = &proc{name: "warden"}
		w.procs = []*proc{w.p}
		w.guard(w.start)
	}
	w.workload()
	w.envWorkload()
	w.scheduleQuiet(cluster)
	if o.arm != nil {
		o.arm(w)
	}
	w.loop()
	w.finalChecks()
	r := SeedRun{Seed: o.Seed, Nodes: max(o.Nodes, 1), Config: w.faults.String(), Violation: w.violation, Trace: w.trace, Steps: w.steps, BusiestMinute: w.maxInMinute,
		Messages: w.messages, Crashes: w.crashes, SimTime: w.now().Sub(epoch), Coverage: w.coverage, Fired: w.faults.fired, Final: w.final(),
		plan: w.faults}
	sum := sha256.Sum256([]byte(strings.Join(w.trace, "\n")))
	r.Hash = hex.EncodeToString(sum[:])
	_ = w.store.Close()
	hosts.give(w.procs)
	r.Wall = time.Since(wallStart)
	return r
}

// newWorld is a seed's world before anything runs in it.
func newWorld(o Options) *world {
	cluster := o.Nodes > 1
	if o.FaultyPhase == 0 {
		o.FaultyPhase = map[bool]time.Duration{false: DefaultFaultyPhase, true: DefaultClusterFaultyPhase}[cluster]
	}
	if o.QuietPhase == 0 {
		o.QuietPhase = map[bool]time.Duration{false: DefaultQuietPhase, true: DefaultClusterQuietPhase}[cluster]
	}
	mc := marquee.DefaultConfig()
	f := drawFaults(o.Seed, o.FaultFree, o.Once, cluster)
	if o.replay != nil && !o.FaultFree {
		f = replaying(o.replay)
	}
	w := &world{
		opts: o, faults: f, rnd: rand.New(rand.NewPCG(o.Seed, 3)),
		clock: clock.NewManual(epoch), end: epoch.Add(o.FaultyPhase + o.QuietPhase), machine: marquee.Machine{Config: mc},
		fs: vfs.NewCrashableMem(), model: map[string]marquee.State{}, pools: map[string]admission.Pool{},
		granted: map[string]uint64{}, leaks: map[string]time.Time{}, dispatched: map[string]map[uint64]bool{},
		answered: map[string][]byte{}, deliveries: map[string]int{}, answeredAt: map[string]int{}, firstSent: map[string]time.Time{}, created: map[string]bool{}, intents: map[string]*intent{},
		chats: map[string]driver.Chats{}, coverage: map[string]int{},
		disk: &diskFaults{}, preview: newPreviewWorld(), envs: map[string]environment.Env{}, envIntents: map[string]*envIntent{}, envSeen: map[string]envSeen{}, slowAttempts: map[string]slowCall{}, branchLast: map[string]uint64{}, givenTo: map[string]uint64{}, cutUntil: map[pair]time.Time{},
	}
	w.land = w.landBy()
	return w
}

// scheduleQuiet ends the faulty phase: faults heal, a clean restart
// (parked actors come back), then the operator repairs every so often.
func (w *world) scheduleQuiet(cluster bool) {
	quietAt := epoch.Add(w.opts.FaultyPhase)
	w.at(quietAt, "quiet", func() {
		w.faults.off = true
		if cluster {
			w.restartAll("quiet-phase restart")
		} else {
			w.crash("quiet-phase restart")
		}
		for _, t := range w.sureRepairs() {
			w.at(t, "repair", w.repairEnvs)
		}
		w.at(quietAt.Add(time.Minute), "repair", w.repairRound)
	})
}

// repairEvery is the quiet phase's operator's period.
const repairEvery = 20 * time.Minute

// sureRepairs are the operator's rounds that run whatever the round before
// found: from a minute into the quiet phase, every repairEvery, until an
// hour before the end (repairRound goes on after that only while it has
// something to do).
func (w *world) sureRepairs() []time.Time {
	var ts []time.Time
	for t := epoch.Add(w.opts.FaultyPhase + time.Minute); t.Before(w.end.Add(-time.Hour)); t = t.Add(repairEvery) {
		ts = append(ts, t)
	}
	return ts
}

// landBy is the latest a callback the weather delays may arrive (w.land):
// before the last sure repair round, so that whatever it does is seen and
// repaired toward the workload's intent (a confirmed false null landing
// after the rounds had stopped left its marquee errored, and the
// convergence oracle blamed warden for a correct answer: cluster seed 64,
// 2026-12-05).
func (w *world) landBy() time.Time {
	ts := w.sureRepairs()
	if len(ts) == 0 {
		return w.end
	}
	return ts[len(ts)-1].Add(-time.Minute)
}

// loop runs the events in time order, checking after each, until the
// end, a violation, or a world that stands still.
func (w *world) loop() {
	for w.violation == nil {
		next, ok := w.nextTime()
		if !ok || next.After(w.end) {
			return
		}
		w.steps++
		w.guard(func() { w.clock.Set(next); w.drain() })
		if w.standsStill() || w.runsAway() {
			return
		}
		for w.events.Len() > 0 && !w.events[0].at.After(w.now()) && w.violation == nil && !w.standsStill() && !w.runsAway() {
			e := heap.Pop(&w.events).(*event)
			if e.name != "effect" && w.faults.fire("process.crash.between-events") && w.crashes < 25 {
				w.crashBetweenEvents()
			}
			w.guard(func() { e.fn(); w.drain() })
			w.check()
		}
	}
}

// finalChecks are the oracles at the end of a run, the store's last.
func (w *world) finalChecks() {
	if w.violation == nil && !w.opts.FaultFree {
		w.check()
	}
	for _, check := range []func(){w.checkEnvs, w.checkStore, w.checkLinear} {
		if w.violation != nil {
			return
		}
		check()
	}
}

// crashBetweenEvents kills the process (on a cluster, one node drawn from
// the seed) between two events of the world.
func (w *world) crashBetweenEvents() {
	if w.p != nil {
		w.crash("between-events")
		return
	}
	p := w.procs[w.rnd.IntN(len(w.procs))]
	w.guardNode(p, func() { w.kill(p, "between-events") })
}

func (w *world) nextTime() (time.Time, bool) {
	var next time.Time
	ok := false
	if w.events.Len() > 0 {
		next, ok = w.events[0].at, true
	}
	if t, has := w.clock.Next(); has && (!ok || t.Before(next)) {
		next, ok = t, true
	}
	return next, ok
}

// standsStill reports a livelock: more than maxStepsPerInstant steps and
// events at one instant of virtual time.
func (w *world) standsStill() bool {
	if now := w.now(); !now.Equal(w.instant) {
		w.instant, w.atInstant = now, 0
	}
	if w.atInstant++; w.atInstant > maxStepsPerInstant {
		w.violate("livelock", "virtual time stands still at %s: %d steps without it passing (something re-arms itself at once)",
			w.instant.Format(time.RFC3339Nano), w.atInstant-1)
		return true
	}
	return false
}

// runsAway reports a storm: more than maxStepsPerMinute steps and events
// in one minute of virtual time. Time passes in one, but in steps of
// microseconds, as work multiplies (a retry that starts another retry
// each time), and the run would take hours instead of failing.
func (w *world) runsAway() bool {
	if now := w.now(); now.Sub(w.minute) >= time.Minute {
		w.minute, w.inMinute = now.Truncate(time.Minute), 0
	}
	w.inMinute++
	w.maxInMinute = max(w.maxInMinute, w.inMinute)
	if w.inMinute > maxStepsPerMinute {
		w.violate("runaway", "more than %d steps in the minute of virtual time from %s: work multiplies (a retry that starts another each time)",
			maxStepsPerMinute, w.minute.Format(time.RFC3339))
		return true
	}
	return false
}

// maxStepsPerMinute bounds the steps of one minute of virtual time: about
// a hundred times the busiest minute of the seeds that pass (the batch
// summary's "busiest minute": 326 over 200 cluster seeds).
const maxStepsPerMinute = 30000

// maxStepsPerInstant bounds the steps one instant of virtual time takes:
// far more than every timer and event a world arms for one instant, so
// more is a livelock (a wake re-armed at once, forever), reported with its
// seed rather than left to hang the run.
const maxStepsPerInstant = 20000

// Check runs a seed with faults and the same workload without, and adds
// the convergence oracle: after the quiet phase both worlds must agree.
func Check(o Options) SeedRun { return Converge(Run(o), o) }

// Converge compares a finished faulty run with a fault-free run of the
// same seed's workload.
func Converge(r SeedRun, o Options) SeedRun {
	if r.Violation != nil {
		return r
	}
	ref := o
	ref.FaultFree = true
	clean := Run(ref)
	if clean.Violation != nil {
		// The same seed's fault-free run broke an invariant (a planted bug
		// does not need faults): report that invariant.
		r.Violation = &Violation{Invariant: clean.Violation.Invariant, Step: clean.Violation.Step,
			Detail: "in the fault-free run of the same workload: " + clean.Violation.Detail}
		return r
	}
	for _, id := range sortedKeys(clean.Final) {
		if r.Final[id] != clean.Final[id] {
			r.Violation = &Violation{Invariant: "convergence", Step: r.Steps,
				Detail: fmt.Sprintf("%s ends %s, a fault-free run ends %s", id, r.Final[id], clean.Final[id])}
			return r
		}
	}
	return r
}
