package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

// The preview world: an artifact store, databases with migration ledgers,
// application instances, a routing layer with compare-and-set, and a
// notification sink, all keyed by the declared identities the controller
// hands its drivers. Manual changes (drift) are injected as weather.

// migrations is the expected ledger of every preview database (E4).
var migrations = []string{"001_init", "002_accounts", "003_previews"}

type simDB struct {
	owner  string
	ledger []string
}

type simApp struct {
	owner, revision string
	running         bool
}

type simRoute struct {
	gen uint64
	env string
	// atWaker: the host is sent to warden's waker (a sleeping preview's).
	atWaker bool
}

type previewWorld struct {
	artifacts map[string]bool
	dbs       map[string]*simDB
	apps      map[string]*simApp
	routes    map[string]simRoute // by branch
	// routeHigh is the newest generation each branch route has held: a
	// route set below it moved backwards.
	routeHigh map[string]uint64
	// fence is the newest lease generation each environment's drivers have
	// seen; the targets refuse an effect under an older one.
	fence map[string]uint64
	// notified is the URL each notification key was delivered with.
	notified map[string]string
	// visited is the last visit the proxy served under each branch's
	// host, as its access log tells (E19).
	visited map[string]time.Time
}

func newPreviewWorld() *previewWorld {
	return &previewWorld{artifacts: map[string]bool{}, dbs: map[string]*simDB{}, apps: map[string]*simApp{},
		routes: map[string]simRoute{}, routeHigh: map[string]uint64{}, fence: map[string]uint64{}, notified: map[string]string{},
		visited: map[string]time.Time{}}
}

// envIntent is what the workload wants of an environment.
type envIntent struct {
	branch, revision string
	data             environment.DataPolicy
	ttl              time.Duration
	removed          bool
	// sleepAfter: the preview sleeps once no one visits it for this long.
	sleepAfter time.Duration
}

// previewDriver is every capability of the preview world behind the
// driver contract (E13), called by the real environment actors.
type previewDriver struct{ w *world }

var errDisconnected = errors.New("connection reset by peer")

// Do implements driver.Capability.
func (d previewDriver) Do(_ context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	w, p := d.w, d.w.preview
	if r.Op == "observe" {
		return driver.CapabilityResult{OK: true, Observation: w.observeResource(r)}, nil
	}
	if w.faults.fire("env.driver-transient") {
		return driver.CapabilityResult{}, errors.New("provider answered 503")
	}
	if r.LeaseGeneration < p.fence[r.EnvID] {
		// The target refuses an obsolete worker.
		w.cover("E7")
		return driver.CapabilityResult{Category: "conflict", Message: fmt.Sprintf("lease generation %d is obsolete", r.LeaseGeneration)}, nil
	}
	p.fence[r.EnvID] = r.LeaseGeneration
	switch r.Capability + "/" + r.Op {
	case "artifact/apply":
		p.artifacts[r.Identity] = true
	case "database/apply":
		// Create-or-find: a same-name database of someone else is found,
		// not replaced; the controller's observation sees its owner.
		if p.dbs[r.Identity] == nil {
			p.dbs[r.Identity] = &simDB{owner: r.EnvID}
		}
	case "migrations/apply":
		if answered, res, err := w.applyMigrations(r); answered {
			return res, err
		}
	case "app/apply":
		if a, ok := p.apps[r.Identity]; !ok || a.owner == r.EnvID {
			p.apps[r.Identity] = &simApp{owner: r.EnvID, revision: r.Revision, running: true}
		}
	case "route/apply":
		if answered, res, err := w.applyRoute(r); answered {
			return res, err
		}
	case "smoke/apply":
		return driver.CapabilityResult{OK: true, Observation: w.observeResource(r)}, nil
	case "route/sleep":
		if answered, res, err := w.sleepRoute(r); answered {
			return res, err
		}
	case "app/sleep":
		if a, ok := p.apps[r.Identity]; ok && a.owner == r.EnvID {
			a.running = false
		}
	case "route/remove":
		if p.routes[r.Branch].gen == r.Generation {
			delete(p.routes, r.Branch)
		}
	case "app/remove":
		if a, ok := p.apps[r.Identity]; ok && a.owner == r.EnvID {
			delete(p.apps, r.Identity)
		}
	case "migrations/remove":
		if db, ok := p.dbs[r.Identity]; ok && db.owner == r.EnvID {
			db.ledger = nil
		}
	case "database/remove":
		if db, ok := p.dbs[r.Identity]; ok && db.owner == r.EnvID {
			delete(p.dbs, r.Identity)
		}
	default:
		return driver.CapabilityResult{Category: "configuration", Message: "unsupported " + r.Capability + "/" + r.Op}, nil
	}
	if r.Capability != "route" && w.faults.fire("env.timeout-after-effect") {
		w.logf("%s %s %s done, answer lost", r.Op, r.Capability, r.Identity)
		return driver.CapabilityResult{}, driver.ErrTimeout
	}
	return driver.CapabilityResult{OK: true}, nil
}

// applyMigrations runs the migrations a database's ledger lacks; answered
// is true when the call ends here (no database, a lost connection).
func (w *world) applyMigrations(r driver.CapabilityRequest) (answered bool, _ driver.CapabilityResult, _ error) {
	db := w.preview.dbs[r.Identity]
	if db == nil || db.owner != r.EnvID {
		return true, driver.CapabilityResult{Category: "transient", Message: "no database " + r.Identity}, nil
	}
	// The ledger is read first; only missing migrations run.
	for _, m := range migrations {
		if !slices.Contains(db.ledger, m) {
			db.ledger = append(db.ledger, m)
		}
	}
	if w.faults.fire("env.migration-disconnect") {
		w.logf("migrations of %s committed, client disconnected", r.Identity)
		return true, driver.CapabilityResult{}, errDisconnected
	}
	return false, driver.CapabilityResult{}, nil
}

// applyRoute moves a branch's route forward by compare-and-set (I14);
// answered is true when its answer is lost.
func (w *world) applyRoute(r driver.CapabilityRequest) (answered bool, _ driver.CapabilityResult, _ error) {
	p := w.preview
	cur := p.routes[r.Branch]
	if cur.gen <= r.ExpectedRoute || cur.gen == r.Generation {
		if r.Generation < p.routeHigh[r.Branch] {
			w.violate("I14", "route %s moved from generation %d back to %d (%s)", r.Branch, p.routeHigh[r.Branch], r.Generation, r.EnvID)
		}
		p.routes[r.Branch] = simRoute{gen: r.Generation, env: r.EnvID}
		p.routeHigh[r.Branch] = max(p.routeHigh[r.Branch], r.Generation)
		w.cover("I14")
	}
	if w.faults.fire("env.route-response-lost") {
		w.logf("route %s set, response lost", r.Branch)
		return true, driver.CapabilityResult{}, driver.ErrTimeout
	}
	return false, driver.CapabilityResult{}, nil
}

// sleepRoute sends a branch's host to the waker while the route is this
// environment's at its generation, or absent; answered is true when its
// answer is lost. A visit may come at once, the sleep half done.
func (w *world) sleepRoute(r driver.CapabilityRequest) (answered bool, _ driver.CapabilityResult, _ error) {
	p := w.preview
	if cur, ok := p.routes[r.Branch]; !ok || cur.gen == r.Generation && cur.env == r.EnvID {
		p.routes[r.Branch] = simRoute{gen: r.Generation, env: r.EnvID, atWaker: true}
		p.routeHigh[r.Branch] = max(p.routeHigh[r.Branch], r.Generation)
		if w.faults.fire("env.visit-mid-sleep") {
			id := r.EnvID
			w.after(0, "visitor", func() { w.visit(id) })
		}
	}
	if w.faults.fire("env.route-response-lost") {
		w.logf("route %s sent to the waker, response lost", r.Branch)
		return true, driver.CapabilityResult{}, driver.ErrTimeout
	}
	return false, driver.CapabilityResult{}, nil
}

// observeResource reads the world's truth under a declared identity,
// without changing it.
func (w *world) observeResource(r driver.CapabilityRequest) *driver.CapabilityObservation {
	p := w.preview
	o := &driver.CapabilityObservation{}
	switch r.Capability {
	case "artifact":
		o.Exists, o.Matches = p.artifacts[r.Identity], p.artifacts[r.Identity]
	case "database":
		// It answers queries, as its owner.
		if db, ok := p.dbs[r.Identity]; ok {
			o.Exists, o.Owner, o.Matches = true, db.owner, true
		}
	case "migrations":
		// The ledger inside the database, against the expected list.
		if db, ok := p.dbs[r.Identity]; ok && len(db.ledger) > 0 {
			o.Exists, o.Owner, o.Matches = true, db.owner, slices.Equal(db.ledger, migrations)
			o.Detail = "ledger " + strings.Join(db.ledger, ",")
		}
	case "app":
		if a, ok := p.apps[r.Identity]; ok {
			o.Exists, o.Owner, o.Matches, o.Stopped = true, a.owner, a.running && a.revision == r.Revision, !a.running
			// A killed application never becomes ready by waiting, as
			// podman reports an exited container (driver/local).
			o.Replace = !a.running
			o.Detail = fmt.Sprintf("running=%t revision=%s", a.running, a.revision)
		}
	case "route":
		if rt, ok := p.routes[r.Branch]; ok {
			o.Exists, o.Owner, o.Matches, o.RouteTarget, o.AtWaker = true, rt.env, true, rt.gen, rt.atWaker
		}
		o.LastRequest = p.visited[r.Branch]
	case "smoke":
		// Through the branch hostname: the route's environment answers.
		rt, ok := p.routes[r.Branch]
		a := p.apps["app-"+rt.env]
		if ok && a != nil && a.running && !rt.atWaker {
			o.Exists, o.Owner, o.Matches = true, rt.env, rt.env == r.EnvID && a.revision == r.Revision
		}
		o.RouteTarget = rt.gen
	}
	return o
}

// notifyTransport is the notification sink (E10).
type notifyTransport struct{ w *world }

func (t notifyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := t.w
	var n struct{ Key, Event, URL string }
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<16)).Decode(&n); err != nil {
		return respond(400, "bad body"), nil
	}
	if req.Header.Get("Idempotency-Key") != n.Key {
		w.violate("E10", "notification %s delivered under identity %q", n.Key, req.Header.Get("Idempotency-Key"))
	}
	if w.faults.fire("env.notify-down") {
		return respond(503, "sink down"), nil
	}
	if first, ok := w.preview.notified[n.Key]; ok && first != n.URL {
		w.violate("E10", "notification %s repeated with URL %s, first %s", n.Key, n.URL, first)
	}
	w.preview.notified[n.Key] = n.URL
	w.cover("E10")
	return respond(204, ""), nil
}

// slowCall is a driver call the simulator made slower than the lease: the
// incarnation that made it and when it ends.
type slowCall struct {
	p     *proc
	inc   int
	until time.Time
	// epoch is the cluster node's epoch of the preview's shard when the
	// call began: a move since means its renewals went nowhere.
	epoch int64
	// entity is the environment; renewalLost says an injected actor panic
	// struck it during the call, which may have dropped a renewal (the
	// step that panics before its write is lost, by design), so the lease
	// may rightly have expired under the call.
	entity      string
	renewalLost bool
}

// envEpoch is p's epoch of the preview's shard (0 on a single node).
func (w *world) envEpoch(p *proc, id string) int64 {
	if p.node == nil {
		return 0
	}
	return p.node.cnode.Table().Epoch(cluster.ShardOf("environment", id))
}

// slowKey names one lease of one attempt.
func slowKey(attempt, leaseGeneration string) string { return attempt + "/" + leaseGeneration }

// envEffect decides how an environment driver call (named by its labels)
// runs: a paused worker comes back after its lease expired (E7, I13), its
// heartbeat paused with it, and a second worker may try the leased
// transition meanwhile. It answers the call's delay and whether the
// worker's heartbeat renews its lease meanwhile.
func (w *world) envEffect(p *proc, inc int, call map[string]string) (delay time.Duration, beats bool) {
	delay, beats = w.uniform(0, 3*time.Second), true
	apply := call["op"] == "apply"
	switch {
	case apply && w.faults.fire("env.paused-worker"):
		delay, beats = environment.DefaultConfig().LeaseFor+w.uniform(10*time.Second, 2*time.Minute), false
		w.logf("worker for %s %s %s pauses %s", call["entity"], call["capability"], call["attempt"], delay)
	case apply && w.faults.fire("env.slow-effect"):
		// Only the call is slow: the worker renews its lease every third
		// of it, so nobody takes the attempt over, checked when the
		// result commits.
		delay = environment.DefaultConfig().LeaseFor + w.uniform(10*time.Second, 3*time.Minute)
		w.slowAttempts[slowKey(call["attempt"], call["lease"])] = slowCall{p: p, inc: inc, until: w.now().Add(delay), epoch: w.envEpoch(p, call["entity"]), entity: call["entity"]}
		w.logf("driver call for %s %s %s is slow: %s", call["entity"], call["capability"], call["attempt"], delay)
	}
	if p.node == nil && w.faults.fire("env.second-worker") {
		id := call["entity"]
		w.after(w.uniform(0, time.Second), "worker-b", func() {
			if p.inc == inc {
				_, err := p.sys.EnvironmentCommand(context.Background(), id, environment.Advance{Owner: "worker-b"})
				w.logf("worker-b advances %s: err=%v", id, err)
			}
		})
	}
	return delay, beats
}

var ruleCite = regexp.MustCompile(`\bE[0-9]+\b`)

// branchCommitted is the oracle on every generation a branch gives out.
func (w *world) branchCommitted(ev environment.NextGeneration, before, after environment.Branch) {
	w.logf("branch %s gives generation %d to %s", after.Name, after.Last, ev.For)
	// I14: a branch's route generations only go up, across crashes and
	// moves too; each is given to one preview.
	if after.Last <= w.branchLast[after.Name] {
		w.violate("I14", "branch %s gave out generation %d after %d", after.Name, after.Last, w.branchLast[after.Name])
	}
	w.branchLast[after.Name] = after.Last
	w.givenTo[ev.For] = after.Last
}

// branchToldAgain learns a giving the oracle did not see committed: a
// commit whose answer was lost and that landed all the same is
// known to its actor only by reading the branch again, which then tells
// the asker its generation again, writing nothing.
func (w *world) branchToldAgain(ev environment.NextGeneration, b environment.Branch) {
	for _, g := range b.Recent {
		if g.Env == ev.For && w.givenTo[g.Env] == 0 {
			w.logf("branch %s gave generation %d to %s in a commit whose answer was lost", b.Name, g.Generation, g.Env)
			w.givenTo[g.Env] = g.Generation
			w.branchLast[b.Name] = max(w.branchLast[b.Name], g.Generation)
		}
	}
}

// renewalMayBeLost marks the slow calls of entity id running now: an
// actor panic struck it, and the event it was stepping (a renewal,
// perhaps) is lost. Every matching entry gets the same mark, so the map's
// order cannot show.
func (w *world) renewalMayBeLost(id string) {
	for k, c := range w.slowAttempts {
		if c.entity == id && w.now().Before(c.until) {
			c.renewalLost = true
			w.slowAttempts[k] = c
		}
	}
}

// envCommitted is the oracle on every durable environment transition.
func (w *world) envCommitted(p *proc, ev environment.Event, before, after environment.Env, out environment.Outcome) {
	w.envs[after.ID] = after
	w.lastEnvCommit = out
	if w.opts.observeEnv != nil {
		w.opts.observeEnv(w.envConfig(p).Machine, after, w.now())
	}
	w.logf("%s %T %s -> %s: %s", after.ID, ev, before.State, after.State, out.Answer.Note)
	for _, r := range ruleCite.FindAllString(out.Answer.Note, -1) {
		w.cover(r)
	}
	// E7: a slow driver call whose worker keeps renewing its lease is never
	// taken over while it runs (after a crash the new process takes over
	// its dead predecessor's attempts, rightly; after the call ended, its
	// result may have been lost to an actor panic, and a takeover is how
	// the attempt is recovered; an actor panic during the call may have
	// lost a renewal, and then the lease expires rightly).
	if a := before.Attempt; a != nil && strings.HasPrefix(out.Answer.Note, "took over attempt") {
		if c, slow := w.slowAttempts[slowKey(a.ID, strconv.FormatUint(a.Lease.Generation, 10))]; slow && c.p == p && c.inc == p.inc && c.epoch == w.envEpoch(p, after.ID) && !c.renewalLost && w.now().Before(c.until) {
			w.violate("E7", "%s: slow attempt %s was taken over while its worker renewed the lease", after.ID, a.ID)
		}
	}
	if _, ok := ev.(environment.RenewLease); ok && strings.HasPrefix(out.Answer.Note, "lease renewed") {
		w.cover("E7")
	}
	w.checkEnvEvent(ev, before, after, out)
	w.checkEnvOutcome(before, after, out)
	if after.State != before.State {
		w.checkServed(after)
	}
}

// checkServed is the oracle on what a preview's state says of the world
// (E19, E20): ready, its application runs its revision and its host is
// served by it, not by the waker (or a newer preview took the host since);
// sleeping, its application does not run and its host, if still its
// own, goes to the waker. Only the weather changes the world behind the
// controller, and it picks previews that are ready already.
func (w *world) checkServed(e environment.Env) {
	p := w.preview
	a := p.apps["app-"+e.ID]
	rt, routed := p.routes[e.Branch]
	switch {
	case e.Tombstone != nil:
	case e.State == environment.Ready:
		if a == nil || a.owner != e.ID || !a.running || a.revision != e.Revision {
			w.violate("E20", "%s is ready with its application not running (%+v)", e.ID, a)
		}
		if e.SupersededBy == 0 && (!routed || rt.gen < e.Generation || rt.gen == e.Generation && (rt.env != e.ID || rt.atWaker)) {
			w.violate("E20", "%s is ready with its host not served by it (route %+v)", e.ID, rt)
		}
		w.cover("E20")
	case e.State == environment.Sleeping:
		if a != nil && a.owner == e.ID && a.running {
			w.violate("E19", "%s is sleeping with its application running", e.ID)
		}
		if routed && rt.gen == e.Generation && rt.env == e.ID && !rt.atWaker {
			w.violate("E19", "%s is sleeping with its host served by its application", e.ID)
		}
		w.cover("E19")
	}
}

// checkEnvEvent is the oracle on what each kind of event may do.
func (w *world) checkEnvEvent(ev environment.Event, before, after environment.Env, out environment.Outcome) {
	switch ev := ev.(type) {
	case environment.Create:
		w.cover("E1")
	case environment.GenerationGiven:
		// The preview keeps the generation its branch gave it, and only
		// that one (the givings may arrive in any order, at least once).
		if before.Generation == 0 && after.Generation != w.givenTo[after.ID] || before.Generation != 0 && after.Generation != before.Generation {
			w.violate("I14", "%s took route generation %d; its branch gave it %d", after.ID, after.Generation, w.givenTo[after.ID])
		}
	case environment.DriverAnswer:
		// I13: a result under a lease generation that is not current never
		// commits a transition.
		if a := before.Attempt; a != nil && ev.LeaseGeneration != a.Lease.Generation && !out.Answer.Rejected {
			w.violate("I13", "%s: result of lease generation %d committed over current %d", after.ID, ev.LeaseGeneration, a.Lease.Generation)
		}
		if out.Answer.Rejected {
			w.cover("I13")
		}
		if ev.Observation != nil {
			w.cover("E4")
		}
	case environment.Advance:
		// E7: a second worker never takes a transition under a live lease.
		if a := before.Attempt; a != nil && w.now().Before(a.Lease.ExpiresAt) && ev.Owner != a.Lease.Owner {
			w.violate("E7", "%s: %s took attempt %s leased to %s until %s", after.ID, ev.Owner, a.ID, a.Lease.Owner, a.Lease.ExpiresAt)
		}
		if before.LastFailure != nil && after.Attempt != nil && after.Attempt.From == before.State {
			w.cover("E6") // retried from the last verified state
		}
	case environment.AtRest:
		w.cover("E14")
	case environment.Expire:
		w.cover("E14")
	case environment.Action:
		w.cover("E16")
	case environment.Delivered:
		if before.State != after.State {
			w.violate("E10", "%s: a delivery report changed the state %s -> %s", after.ID, before.State, after.State)
		}
	}
}

// checkEnvOutcome is the oracle on a transition's effects and what it
// changed, and the rules it covered.
func (w *world) checkEnvOutcome(before, after environment.Env, out environment.Outcome) {
	for _, eff := range out.Effects {
		switch d := eff.(type) {
		case environment.Do:
			// E2, E5: the declared identity, under the recorded attempt.
			if d.Identity != after.Identity(d.Capability) {
				w.violate("E2", "%s: %s called under %q, declared %q", after.ID, d.Capability, d.Identity, after.Identity(d.Capability))
			}
			w.cover("E2")
			if after.Attempt == nil || after.Attempt.ID != d.AttemptID || after.Attempt.Lease.Generation != d.LeaseGeneration {
				w.violate("E5", "%s: effect %s %s without its attempt recorded", after.ID, d.Op, d.Capability)
			}
		case environment.Send:
			w.cover("E10")
		}
	}
	if after.LastFailure != nil && before.LastFailure == nil {
		w.cover("E9")
		if after.LastFailure.Category == environment.Conflict {
			w.cover("E3")
		}
	}
	if len(after.Drift) > len(before.Drift) {
		w.cover("E15")
	}
	if len(after.Receipts) > len(before.Receipts) {
		if r := after.Receipts[len(after.Receipts)-1]; r.Input != "" && r.Output != "" {
			w.cover("E13")
		}
	}
	if after.Tombstone != nil && before.Tombstone == nil {
		w.cover("E12")
	}
	if after.State != before.State && !after.State.Provisioning() {
		w.cover("E11")
	}
}

// --- the workload ----------------------------------------------------------------

// envWorkload draws the environments from the seed alone. Two rules keep a
// fault-free run a fair reference (decided): creates on one branch are at
// least 40 minutes apart, so the branch's generations come in the same
// order in both runs; and only the oldest live preview of a branch is
// removed, so whether a newer one activated before a removal cannot decide
// which preview ends superseded.
func (w *world) envWorkload() {
	r := rand.New(rand.NewPCG(w.opts.Seed, 5))
	branches := []string{"main", "feature-search"}[:1+r.IntN(2)]
	n := 2 + r.IntN(3)
	lastOn := map[string]time.Time{}
	byBranch := map[string][]string{}
	var creates []time.Time
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("env-%d", i)
		b := branches[r.IntN(len(branches))]
		at := epoch.Add(time.Duration(r.IntN(90)) * time.Minute)
		if last, ok := lastOn[b]; ok && at.Before(last.Add(40*time.Minute)) {
			at = last.Add(time.Duration(40+r.IntN(30)) * time.Minute)
		}
		lastOn[b] = at
		in := &envIntent{branch: b, revision: fmt.Sprintf("rev%d", r.IntN(1000))}
		if r.IntN(4) == 0 {
			in.data = environment.Preserve
		}
		w.envIDs = append(w.envIDs, id)
		w.envIntents[id] = in
		byBranch[b] = append(byBranch[b], id)
		creates = append(creates, at)
	}
	for i, id := range w.envIDs {
		in := w.envIntents[id]
		if len(byBranch[in.branch]) == 1 && r.IntN(2) == 0 {
			in.ttl = time.Duration(90+r.IntN(90)) * time.Minute
		}
		w.at(creates[i], "operator", func() { w.createEnv(id) })
	}
	for _, b := range branches {
		ids := byBranch[b]
		if len(ids) == 0 || r.IntN(3) == 0 {
			continue
		}
		// The oldest preview of the branch goes, after its successors exist.
		last := creates[slices.Index(w.envIDs, ids[len(ids)-1])]
		at := last.Add(time.Duration(20+r.IntN(60)) * time.Minute)
		id := ids[0]
		w.at(at, "operator", func() { w.removeEnv(id) })
	}
	w.sleepWorkload(creates)
	if w.faults.off {
		return
	}
	for t := epoch.Add(time.Hour); t.Before(epoch.Add(w.opts.FaultyPhase)); t = t.Add(time.Duration(10+w.rnd.IntN(30)) * time.Minute) {
		w.at(t, "drift", w.manualDrift)
	}
}

// sleepWorkload draws, from a stream of its own (the other draws stay as
// they were), which previews sleep and when someone visits them (E19,
// E20): a third of them sleep after 10 to 45 minutes without a visit; each
// of those is visited up to three times during the faulty phase, one
// visit in four with a second at the same instant. The visits are the
// workload's, in the reference run too: by the end of the quiet phase
// every preview that sleeps and is served is asleep in both.
func (w *world) sleepWorkload(creates []time.Time) {
	if w.opts.NoSleep {
		return
	}
	r := rand.New(rand.NewPCG(w.opts.Seed, 9))
	for i, id := range w.envIDs {
		if r.IntN(3) != 0 {
			continue
		}
		w.envIntents[id].sleepAfter = time.Duration(10+r.IntN(36)) * time.Minute
		for range r.IntN(4) {
			at := creates[i].Add(time.Duration(r.IntN(int(w.opts.FaultyPhase/time.Minute))) * time.Minute)
			twice := r.IntN(4) == 0
			if !at.Before(epoch.Add(w.opts.FaultyPhase)) {
				continue
			}
			w.at(at, "visitor", func() {
				w.visit(id)
				if twice {
					w.visit(id)
				}
			})
		}
	}
}

// visit is someone opening a preview's URL: its branch's host answers
// through the proxy, which logs the visit, from the application, or,
// while the route sends it to warden's waker, from the waker, asked
// through the real API as the route would.
func (w *world) visit(id string) {
	b := w.envIntents[id].branch
	rt, ok := w.preview.routes[b]
	if !ok {
		return // nothing is served there: no preview answers
	}
	w.preview.visited[b] = w.now()
	if !rt.atWaker {
		return
	}
	st, _, crashed := w.call("GET", driver.WakerPath, "", nil, "", driver.HeaderWake, rt.env, driver.HeaderWakePath, "/")
	w.logf("visit %s through the waker -> %d crashed=%t", rt.env, st, crashed)
	if st == http.StatusServiceUnavailable {
		w.cover("E20")
	}
}

func (w *world) createEnv(id string) {
	in := w.envIntents[id]
	if _, ok := w.envs[id]; !ok && w.faults.fire("env.wrong-owner") && w.preview.dbs["db-"+id] == nil {
		w.preview.dbs["db-"+id] = &simDB{owner: "intruder"}
		w.logf("a database db-%s of someone else appears", id)
	}
	body := map[string]any{"id": id, "branch": in.branch, "revision": in.revision, "data": string(in.data)}
	if in.data == "" {
		body["data"] = string(environment.Disposable)
	}
	if in.ttl > 0 {
		body["ttl"] = in.ttl.String()
	}
	if in.sleepAfter > 0 {
		body["sleep_after"] = in.sleepAfter.String()
	}
	st, _, crashed := w.call("POST", "/v1/environments", opToken, body, "")
	w.logf("create %s (%s) -> %d crashed=%t", id, in.branch, st, crashed)
	if st != http.StatusCreated && st != http.StatusConflict {
		w.after(time.Minute, "operator", func() { w.createEnv(id) })
	}
}

func (w *world) removeEnv(id string) {
	w.envIntents[id].removed = true
	st, _, crashed := w.call("POST", "/v1/environments/"+id+"/remove", opToken, map[string]any{"reason": "branch merged", "actor": "sim"}, "")
	w.logf("remove %s -> %d crashed=%t", id, st, crashed)
}

// manualDrift is someone changing the preview world by hand (E15): an
// application killed, a route deleted, a migration rolled back, or a
// database brought back after its environment's tombstone (I12).
func (w *world) manualDrift() {
	if !w.faults.fire("env.manual-drift") {
		return
	}
	var ready, gone []string
	for _, id := range w.envIDs {
		e, ok := w.envs[id]
		switch {
		case !ok:
		case e.Tombstone != nil:
			gone = append(gone, id)
		case e.State == environment.Ready && e.Attempt == nil:
			ready = append(ready, id)
		}
	}
	p := w.preview
	switch k := w.rnd.IntN(4); {
	case k == 3 && len(gone) > 0:
		id := gone[w.rnd.IntN(len(gone))]
		if p.dbs["db-"+id] == nil {
			p.dbs["db-"+id] = &simDB{owner: id, ledger: slices.Clone(migrations)}
			w.logf("drift: db-%s restored from a backup after the tombstone", id)
		}
	case len(ready) > 0:
		id := ready[w.rnd.IntN(len(ready))]
		e := w.envs[id]
		switch k {
		case 0:
			if a := p.apps["app-"+id]; a != nil {
				a.running = false
				w.logf("drift: app-%s killed", id)
			}
		case 1:
			if p.routes[e.Branch].env == id {
				delete(p.routes, e.Branch)
				w.logf("drift: route %s deleted", e.Branch)
			}
		default:
			if db := p.dbs["db-"+id]; db != nil && len(db.ledger) > 0 {
				db.ledger = db.ledger[:len(db.ledger)-1]
				w.logf("drift: a migration of db-%s rolled back", id)
			}
		}
	}
}

// envSeen is a preview as the operator last read it and found nothing
// to do: its stored record's bytes and whether the workload wanted it
// removed then. A record and a wish that are the same again would be
// read to the same view and the same nothing (the operator reads only
// the record's fields, not the clock), so on a single node the read is
// not repeated: the traces are the same as with it.
type envSeen struct {
	raw     []byte
	removed bool
}

// storedEnv is the environment's record as the store holds it, or nil.
func (w *world) storedEnv(id string) []byte {
	var raw []byte
	key := persistence.EnvKey(id)
	_ = w.store.Scan(key, nil, func(k, v []byte) (bool, error) {
		if bytes.Equal(k, key) {
			raw = bytes.Clone(v)
		}
		return false, nil
	})
	return raw
}

// repairEnvs is the quiet phase's operator for environments: it reads each
// view (E17) and answers what waits for a person, toward the workload's
// intent, through the real HTTP API.
func (w *world) repairEnvs() {
	for _, id := range w.envIDs {
		in := w.envIntents[id]
		var raw []byte
		if w.p != nil { // on a cluster the node a read reaches is drawn, and is part of the run
			raw = w.storedEnv(id)
		}
		if seen, ok := w.envSeen[id]; ok && raw != nil && bytes.Equal(seen.raw, raw) && seen.removed == in.removed {
			continue // read last round as it is, and nothing was to be done
		}
		delete(w.envSeen, id)
		if nothingToDo := w.repairEnv(id, in); nothingToDo && raw != nil {
			w.envSeen[id] = envSeen{raw: raw, removed: in.removed}
		}
	}
}

// repairEnv reads one preview's view and does what it asks of an
// operator; nothingToDo says the view was read and asked nothing.
func (w *world) repairEnv(id string, in *envIntent) (nothingToDo bool) {
	st, body, _ := w.call("GET", "/v1/environments/"+id+"?receipts=0", opToken, nil, "") // the view without what it does not read
	if st == http.StatusNotFound {
		if !in.removed {
			w.createEnv(id)
		}
		return false
	}
	if st != http.StatusOK {
		return false
	}
	var v struct {
		State       environment.Phase
		Desired     string
		Actions     []string
		LastFailure *environment.Failure `json:"last_failure"`
		Drift       []environment.Drift
		Tombstone   *environment.Tombstone
	}
	if err := json.Unmarshal(body, &v); err != nil {
		w.violate("E17", "%s: view does not decode: %v", id, err)
		return false
	}
	act := func(name, reason string) {
		// E17: the operator acts on an action the view offered.
		if slices.Contains(v.Actions, name) {
			w.cover("E17")
		}
		st, _, _ := w.call("POST", "/v1/environments/"+id+"/actions/"+name, opToken, map[string]any{"actor": "sim-operator", "reason": reason}, "")
		w.logf("operator %s %s -> %d", name, id, st)
	}
	open := -1
	for i, d := range v.Drift {
		if d.Outcome == "" {
			open = i
			break
		}
	}
	switch {
	case in.removed && v.Desired != "removed" && v.Tombstone == nil:
		w.removeEnv(id)
	case open >= 0 && v.Tombstone != nil:
		act("continue-removal", "leaked resource")
	case open >= 0:
		act("repair", "back to the current generation")
	case v.LastFailure != nil && slices.Contains(v.Actions, "continue-removal"):
		act("continue-removal", "preview data may go")
	case v.LastFailure != nil && !v.LastFailure.Retryable:
		if db := w.preview.dbs["db-"+id]; db != nil && db.owner != id && v.LastFailure.Category == environment.Conflict {
			delete(w.preview.dbs, "db-"+id)
			w.logf("operator moves the foreign db-%s away", id)
		}
		act("resume", "looked into it")
	default:
		return true
	}
	return false
}

// checkEnvs is the end-of-run oracle of the preview world: nothing
// an environment owned outlives its tombstone undetected.
func (w *world) checkEnvs() {
	p := w.preview
	for _, id := range w.envIDs {
		e, ok := w.envs[id]
		if !ok || e.Tombstone == nil {
			continue
		}
		detected := func(identity string) bool {
			return slices.ContainsFunc(e.Drift, func(d environment.Drift) bool { return d.Identity == identity && d.Outcome == "" })
		}
		if db := p.dbs["db-"+id]; db != nil && db.owner == id && !detected("db-"+id) {
			w.violate("I12", "db-%s outlives the tombstone of %s undetected", id, id)
		}
		if a := p.apps["app-"+id]; a != nil && a.owner == id && !detected("app-"+id) {
			w.violate("I12", "app-%s outlives the tombstone of %s undetected", id, id)
		}
		if rt, ok := p.routes[e.Branch]; ok && rt.env == id {
			w.violate("I12", "route %s still resolves to removed %s", e.Branch, id)
		}
		w.cover("I12")
	}
	// E21: what each preview's state says of the world holds at the end.
	for _, id := range w.envIDs {
		if e, ok := w.envs[id]; ok {
			w.checkServed(e)
		}
	}
	// E10: a notification is delivered in the end, whatever the sink and
	// the process went through, unless its sender gave up after every try.
	for _, id := range w.envIDs {
		for _, n := range w.envs[id].Outbox {
			if _, got := p.notified[n.Key]; !got && n.Attempts < actors.MaxNotifyAttempts {
				w.violate("E10", "%s: notification %s never delivered (%d attempts)", id, n.Key, n.Attempts)
			}
		}
	}
}

// finalEnvs is the preview half of the convergence oracle: each
// environment's state and the external resources. Artifacts are shared
// build outputs no environment owns (decided), and deliveries are not
// resources, so neither is compared.
func (w *world) finalEnvs(out map[string]string) {
	for _, id := range w.envIDs {
		e, ok := w.envs[id]
		if !ok {
			out[id] = "absent"
			continue
		}
		open := 0
		for _, d := range e.Drift {
			if d.Outcome == "" {
				open++
			}
		}
		if e.Tombstone != nil {
			// Whether a removed preview saw a newer one before it went is
			// timing, not outcome.
			out[id] = fmt.Sprintf("tombstone open-drift=%d", open)
			continue
		}
		// Which newer generation a superseded preview saw first is timing
		// too; that it is superseded is not.
		out[id] = fmt.Sprintf("%s/%s superseded=%t open-drift=%d", e.State, e.Desired, e.SupersededBy > 0, open)
	}
	p := w.preview
	var res []string
	for _, k := range sortedKeys(p.dbs) {
		res = append(res, fmt.Sprintf("%s(%s %s)", k, p.dbs[k].owner, strings.Join(p.dbs[k].ledger, ",")))
	}
	for _, k := range sortedKeys(p.apps) {
		res = append(res, fmt.Sprintf("%s(%s %s running=%t)", k, p.apps[k].owner, p.apps[k].revision, p.apps[k].running))
	}
	for _, k := range sortedKeys(p.routes) {
		// By holder: a create that crashed skips a branch number.
		res = append(res, fmt.Sprintf("route-%s(%s)", k, p.routes[k].env))
	}
	out["preview-resources"] = strings.Join(res, " ")
}

// envConfig wires the preview world into one incarnation of p.
func (w *world) envConfig(p *proc) actors.EnvConfig {
	worker := fmt.Sprintf("%s-%d", p.name, p.inc)
	machine := environment.Machine{Config: environment.DefaultConfig()}
	machine.Config.Worker = worker // as actors.Start sets it, so that a planted step wraps the machine it runs
	machine.Config.Sleeps = true   // the world's route can send a host to the waker
	return actors.EnvConfig{Machine: machine, Drivers: actors.DriverForAll(previewDriver{w}),
		Worker:        worker,
		Notifier:      &driver.Webhook{Endpoint: "https://notify.sim/hook", Client: &http.Client{Transport: notifyTransport{w}}},
		NotifyBackoff: time.Minute, ReconcileEvery: 15 * time.Minute,
		// One process on its own store: an earlier incarnation's leases end
		// when the next one starts. A cluster's nodes share theirs.
		ExclusiveStore: p.node == nil}
}
