package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// Fault points, one per boundary the simulator can break. Each is switched
// on per seed with probability 1/2 (swarm testing) and, when on, fires with
// a rate drawn per seed (FoundationDB's two-level BUGGIFY).
var faultPoints = []string{
	"callback.lost",            // a workflow's callback never arrives
	"callback.late",            // heavy-tailed delay
	"callback.duplicate",       // the same delivery again, later
	"callback.reorder",         // jitter that reorders a run's callbacks
	"callback.bad-token",       // a caller with the wrong token
	"workflow.silent",          // a run that never calls back
	"workflow.slow",            // a slow, chatty run: pings for 40 minutes
	"workflow.failed",          // a run that reports failed
	"workflow.false-null",      // the cloud briefly reports no infrastructure
	"github.transient",         // 503 from the dispatch API
	"github.configuration",     // 404 from the dispatch API
	"controlplane.unreachable", // M18
	"controlplane.garbage",     // M18
	"bootstrap.fail",           // M19
	"actor.panic.before-persist",
	"actor.panic.after-persist",
	"actor.panic.after-effects",
	"process.crash.before-persist",
	"process.crash.after-persist",
	"process.crash.after-effects",
	"process.crash.between-events",
	"storage.wal-write",        // the disk is full under a WAL write: the store seals, the process exits
	"storage.wal-sync",         // a WAL sync fails (EIO): the same
	"storage.malformed-record", // a record that does not decode, found at restart
	// The preview world: the boundaries of I11 and the world's weather.
	"env.crash.after-intent",   // the process dies right after an attempt's intent is durable
	"env.timeout-after-effect", // external success followed by a timeout
	"env.second-worker",        // a second worker tries a leased transition (overlapping leases)
	"env.paused-worker",        // a worker pauses past its lease and completes after the takeover
	"env.slow-effect",          // a driver call longer than the lease; its worker renews
	"env.route-response-lost",  // the route was updated but the response lost
	"env.migration-disconnect", // migrations committed but the client disconnected
	"env.notify-down",          // the notification sink is down after readiness
	"env.crash.mid-removal",    // the process dies with a removal partially complete
	"env.wrong-owner",          // a resource of someone else under the declared name
	"env.driver-transient",     // a provider's 503 before the effect
	"env.manual-drift",         // someone changes the world by hand
	"env.visit-mid-sleep",      // a visit to a preview's host while its sleep is half done
}

// clusterFaultPoints are a cluster run's own, drawn beside the others
// (less the single node's disk under Pebble, and the second worker on a
// shared store, which a cluster's failover is).
var clusterFaultPoints = []string{
	"cluster.node-pause",            // a node stops for seconds: its lease may lapse or be revoked meanwhile
	"cluster.node-kill",             // a node dies; it starts again seconds later
	"cluster.partition-coordinator", // a node cannot reach etcd for seconds
	"cluster.partition-peer",        // two nodes cannot reach each other
	"cluster.keepalive-lost",        // a lease renewal never arrives
	"cluster.keepalive-slow",        // a lease renewal arrives; its answer is too late
	"cluster.commit-answer-lost",    // a transaction applied, its answer lost
	"cluster.commit-delayed",        // a transaction held by a paused member: no answer, absent when read back, applied later
	"cluster.acquire-answer-lost",   // a shard taken, the answer lost
	"cluster.forward-answer-lost",   // a forwarded request handled, its answer lost
}

// singleNodeOnly are the fault points a cluster run does not draw.
var singleNodeOnly = map[string]bool{"storage.wal-write": true, "storage.wal-sync": true, "storage.malformed-record": true, "env.second-worker": true}

// pointsFor are the fault points a run draws from.
func pointsFor(cluster bool) []string {
	if !cluster {
		return faultPoints
	}
	var out []string
	for _, p := range faultPoints {
		if !singleNodeOnly[p] {
			out = append(out, p)
		}
	}
	return append(out, clusterFaultPoints...)
}

// faults is one seed's drawn configuration and its generator.
type faults struct {
	rate  map[string]float64
	rnd   *rand.Rand
	fired map[string]int
	off   bool
	// held: no point fires, and no reach is counted or drawn, while the
	// simulator asks something the run itself never asks (a dry run), so
	// that asking leaves the run's schedule as it was.
	held bool
	// reached counts each point's reaches while it is on; firedAt lists
	// the reaches that fired, the run's fault plan (Regression). replay,
	// when set, is a plan to follow instead of drawing.
	reached map[string]int
	firedAt map[string][]int
	replay  map[string][]int
	// once: the only point on, firing the first time it is reached and
	// never again (I11: a single fault at one boundary).
	once string
}

// I11Boundaries are the fault points of I11's boundaries, in its order.
var I11Boundaries = []string{
	"env.crash.after-intent",   // crash after intent
	"env.timeout-after-effect", // external success followed by timeout
	"env.second-worker",        // two workers with overlapping leases
	"env.paused-worker",        // stale worker completing after takeover
	"env.route-response-lost",  // route updated but response lost
	"env.migration-disconnect", // migration committed but client disconnected
	"env.notify-down",          // notification unavailable after readiness
	"env.crash.mid-removal",    // removal partially complete
	"env.wrong-owner",          // resource present with wrong ownership
}

func drawFaults(seed uint64, none bool, once string, cluster bool) *faults {
	f := &faults{rate: map[string]float64{}, rnd: rand.New(rand.NewPCG(seed, 2)), fired: map[string]int{}, off: none, once: once,
		reached: map[string]int{}, firedAt: map[string][]int{}}
	if once != "" && !none {
		f.rate[once] = 1
		return f
	}
	swarm := rand.New(rand.NewPCG(seed, 4))
	rates := []float64{0.01, 0.05, 0.15, 0.3}
	// Crashes and panics fire at every transition, recovery's included, so
	// they get rates that still let a run make progress.
	severe := []float64{0.002, 0.005, 0.01, 0.02}
	for _, p := range pointsFor(cluster) {
		on := swarm.IntN(2) == 0
		r := rates[swarm.IntN(len(rates))]
		if strings.HasPrefix(p, "process.") || strings.HasPrefix(p, "actor.") || strings.HasPrefix(p, "storage.") || strings.HasPrefix(p, "env.crash.") {
			r = severe[swarm.IntN(len(severe))]
		}
		if strings.HasPrefix(p, "cluster.keepalive-") {
			// A renewal a second: two lost in a row lapse the lease.
			r = []float64{0.005, 0.01, 0.03, 0.1}[swarm.IntN(4)]
		}
		if on && !none {
			f.rate[p] = r
		}
	}
	return f
}

// fire reports whether point fires now. The draw happens only for points
// that are on, so switching one off never shifts another's draws... within
// one configuration.
func (f *faults) fire(point string) bool {
	if f.off || f.held {
		return false
	}
	r, ok := f.rate[point]
	if !ok || f.once != "" && f.fired[point] > 0 {
		return false
	}
	if f.reached == nil {
		f.reached, f.firedAt = map[string]int{}, map[string][]int{}
	}
	n := f.reached[point]
	f.reached[point] = n + 1
	var fires bool
	if f.replay != nil {
		_, fires = slices.BinarySearch(f.replay[point], n)
	} else {
		fires = f.rnd.Float64() < r
	}
	if fires {
		f.fired[point]++
		f.firedAt[point] = append(f.firedAt[point], n)
	}
	return fires
}

// replaying is a plan's faults: its points on at its rates, each firing
// on the reaches it lists.
func replaying(g *Regression) *faults {
	f := &faults{rate: map[string]float64{}, fired: map[string]int{}, reached: map[string]int{}, firedAt: map[string][]int{}, replay: g.Fires}
	for p, r := range g.Rates {
		f.rate[p] = r
	}
	if f.replay == nil {
		f.replay = map[string][]int{}
	}
	return f
}

func (f *faults) String() string {
	if len(f.rate) == 0 {
		return "faults: none"
	}
	var on []string
	for p, r := range f.rate {
		on = append(on, fmt.Sprintf("%s=%.2f", p, r))
	}
	sort.Strings(on)
	return "faults: " + strings.Join(on, " ")
}
