package sim

import (
	"bytes"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/faultfs"
	"github.com/wardenhq/warden/sim/serial"
)

const (
	cbToken = "sim-callback-token"
	opToken = "sim-operator-token"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// event is one thing that happens on the virtual timeline.
type event struct {
	at   time.Time
	seq  uint64
	name string
	fn   func()
}

type timeline []*event

func (t timeline) Len() int { return len(t) }
func (t timeline) Less(i, j int) bool {
	if !t[i].at.Equal(t[j].at) {
		return t[i].at.Before(t[j].at)
	}
	return t[i].seq < t[j].seq
}
func (t timeline) Swap(i, j int) { t[i], t[j] = t[j], t[i] }
func (t *timeline) Push(x any)   { *t = append(*t, x.(*event)) }
func (t *timeline) Pop() any {
	old := *t
	e := old[len(old)-1]
	*t = old[:len(old)-1]
	return e
}

// intent is what the workload wants of a marquee; the quiet phase repairs
// toward it, so a run with faults must end where a run without them does.
type intent struct {
	up      bool // provisioned (else destroyed)
	reaped  bool
	serving bool // active when up (else disabled)
	byo     bool
}

// world is one simulated run.
type world struct {
	opts   Options
	faults *faults
	rnd    *rand.Rand // latencies and the world's own choices
	clock  *clock.Manual
	events timeline
	seq    uint64
	end    time.Time
	land   time.Time // landBy, worked out once
	// instant and atInstant count the steps at one instant (standsStill).
	instant   time.Time
	atInstant int
	// minute and inMinute count the steps of one minute (runsAway).
	minute                time.Time
	inMinute, maxInMinute int
	machine               marquee.Machine

	// The processes: one on a single node (p), Options.Nodes on a
	// cluster, each one incarnation at a time. store is the oracles' view
	// of what is durable: the single node's Pebble store, or the
	// simulated etcd read without faults.
	p       *proc
	procs   []*proc
	fs      *vfs.MemFS
	store   *persistence.Store
	crashes int
	// A cluster run's coordinator, the partitions between its nodes, and
	// its clients' history (linearizability per marquee).
	etcd     *etcd
	cutUntil map[pair]time.Time
	lin      *linClients
	// disk injects the storage faults under Pebble; refused is the
	// transition whose write it failed, checked after the restart.
	disk    *diskFaults
	refused *refusedWrite

	// What the oracles know.
	model      map[string]marquee.State
	pools      map[string]admission.Pool
	granted    map[string]uint64
	leaks      map[string]time.Time // pool/job: a settled marquee's slot seen held since
	dispatched map[string]map[uint64]bool
	answered   map[string][]byte // delivery id -> first answer body
	// deliveries counts each marquee's first answers; answeredAt is the
	// count at a delivery's (M20's bound).
	deliveries map[string]int
	answeredAt map[string]int
	// firstSent is when each delivery id was first sent: the earliest its
	// record can carry, a repeat being answered from the record the first
	// send wrote (crashed before its answer, or past M20's bound).
	firstSent map[string]time.Time
	applied   []appliedDelivery // answered 200 applied
	created   map[string]bool   // creates answered 201
	intents   map[string]*intent
	chats     map[string]driver.Chats
	ids       []string

	// The preview world and what its oracles know.
	preview       *previewWorld
	envs          map[string]environment.Env
	envIntents    map[string]*envIntent
	envSeen       map[string]envSeen // the quiet phase's operator's last reads
	envIDs        []string
	lastEnvCommit environment.Outcome
	branchLast    map[string]uint64 // the newest generation each branch gave out
	givenTo       map[string]uint64 // the generation each preview was given
	// slowAttempts are the leases (attempt/generation) whose driver call
	// the simulator made slower than the lease, with the incarnation that
	// made the call (E7 renewal).
	slowAttempts map[string]slowCall

	// What the run reports.
	trace     []string
	steps     int
	messages  int
	coverage  map[string]int
	violation *Violation
}

// Options of one run.
type Options struct {
	Seed  uint64
	Plant string
	// Nodes, above 1, runs a cluster of that many nodes on the simulated
	// etcd; 0 or 1 is one process on Pebble.
	Nodes     int
	FaultFree bool
	// Once switches on this one fault point only, to fire once.
	Once        string
	FaultyPhase time.Duration
	QuietPhase  time.Duration
	// NoSleep leaves previews awake: no sleep_after in the workload, no
	// visits. A regression file written before previews slept replays so,
	// its schedule as it was.
	NoSleep bool
	// observe, in tests, is shown each marquee state a durable transition
	// leaves, with the simulated time and the machine that decided it:
	// the states the simulator's weather brings marquees to, for tests
	// that hold a pure function of the machine to them. It must not
	// keep the state without cloning it. observeEnv is the same for
	// environments.
	observe    func(m marquee.Machine, s marquee.State, now time.Time)
	observeEnv func(m environment.Machine, e environment.Env, now time.Time)
	// observePool is the same for pools.
	observePool func(p admission.Pool, now time.Time)
	// arm, in tests, adds to the world before it runs.
	arm func(*world)
	// replay is a regression file's fault plan, followed instead of the
	// seed's draws (Regression).
	replay *Regression
	// dryRunFirst dry-runs every callback just before it is sent, on the
	// state the simulator has brought its marquee to, and holds the dry
	// run to the truth: the store unchanged by it, and its reply the
	// real answer's, byte for byte. dryRuns counts the cases compared.
	dryRunFirst bool
	dryRuns     *int
}

// Violation is the first broken invariant of a run.
type Violation struct {
	Invariant string
	Detail    string
	Step      int
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s at step %d: %s", v.Invariant, v.Step, v.Detail)
}

func (w *world) now() time.Time { return w.clock.Now() }

func (w *world) at(t time.Time, name string, fn func()) {
	w.seq++
	heap.Push(&w.events, &event{at: t, seq: w.seq, name: name, fn: fn})
}

func (w *world) after(d time.Duration, name string, fn func()) { w.at(w.now().Add(d), name, fn) }

func (w *world) uniform(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rnd.Int64N(int64(hi-lo)+1))
}

func (w *world) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%s %s", w.now().Sub(epoch), fmt.Sprintf(format, args...)))
}

func (w *world) violate(inv, format string, args ...any) {
	if w.violation == nil {
		w.violation = &Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...), Step: w.steps}
		w.logf("VIOLATION %s: %s", inv, w.violation.Detail)
	}
}

func (w *world) cover(rule string) { w.coverage[rule]++ }

// --- the process ------------------------------------------------------------------

// proc is one warden process of the simulated world in its current
// incarnation: its run queue, store, actors and API. Everything an
// incarnation armed (timers, effects, queued messages) goes quiet when the
// next one starts.
type proc struct {
	name    string
	inc     int
	q       *serial.RunQueue
	store   *persistence.Store
	sys     *actors.System
	api     http.Handler
	crashAt string // a process crash requested at this point
	// node is a cluster node's own state; nil on a single node.
	node *simNode
	// host is the actor system every incarnation runs on (runtime.Host).
	host *runtime.Host
	// metrics are every incarnation's instruments, made once: no oracle
	// reads them, and a restart need not pay for them again.
	metrics *actors.Metrics
}

// procClock scopes the manual clock to one incarnation of a process:
// timers armed by one that crashed never fire into its successor, and a
// paused node's come due only when it resumes.
type procClock struct {
	w   *world
	p   *proc
	inc int
}

func (c procClock) Now() time.Time                  { return c.w.clock.Now() }
func (c procClock) Since(t time.Time) time.Duration { return c.w.clock.Since(t) }

// NewTicker is the manual clock's; nothing the simulator drives uses one
// (a ticker's reader would be a goroutine of its own).
func (c procClock) NewTicker(d time.Duration) clock.Ticker { return c.w.clock.NewTicker(d) }
func (c procClock) AfterFunc(d time.Duration, f func()) func() bool {
	return c.w.clock.AfterFunc(d, func() { c.w.onProc(c.p, c.inc, f) })
}

// Sleep refuses: the simulator's one thread cannot block for time to
// pass, so a caller that would wait (a request for a shard that is
// moving) is answered as if its wait had run out.
func (procClock) Sleep(context.Context, time.Duration) error { return errNoWaiting }

var errNoWaiting = errors.New("a simulated caller does not wait")

// onProc runs f for incarnation inc of p: not at all if it has died, once
// it resumes if it is paused, and under its guard on a cluster (a node's
// crash is that node's).
func (w *world) onProc(p *proc, inc int, f func()) {
	switch {
	case p.inc != inc:
	case p.node == nil:
		f() // the step's guard restarts a single node
	case p.node.paused:
		p.node.held = append(p.node.held, func() { w.onProc(p, inc, f) })
	default:
		w.guardNode(p, f)
	}
}

// start boots an incarnation of the single node on the current
// filesystem: recovery included.
func (w *world) start() {
	p := w.p
	p.inc++
	p.q = &serial.RunQueue{}
	// The disk's faults act under Pebble: its WAL write or sync
	// fails, its logger's Fatalf seals the store, and the process dies there.
	st, err := persistence.Open("db", plantedStore(w.opts.Plant, persistence.Options{FS: faultfs.Wrap(w.fs, w.disk), OnFatal: w.storageFatal, MarkEvery: -1}))
	if err != nil {
		panic(fmt.Sprintf("sim: open store: %v", err))
	}
	p.store, w.store = st, st
	w.checkApplied()
	w.checkRefused() // before recovery writes anything of its own
	sys, err := actors.Start(w.systemConfig(p, st))
	if err != nil {
		panic(fmt.Sprintf("sim: start: %v", err))
	}
	p.sys = sys
	p.api = httpapi.New(sys, httpapi.Options{CallbackToken: cbToken, OperatorToken: opToken, CallbackKeys: simCallbackKeys})
	w.drain()
}

// systemConfig is the actor system of p's current incarnation on st.
func (w *world) systemConfig(p *proc, st *persistence.Store) actors.Config {
	inc := p.inc
	cfg := actors.Config{
		Store:          st,
		Clock:          procClock{w: w, p: p, inc: inc},
		Machine:        w.machine,
		Pools:          map[string]int{"default": 2},
		Dispatcher:     &driver.GitHub{APIURL: "https://github.sim", Repo: "acme/infra", Workflow: "terraform.yml", Ref: "main", Token: "t", Client: &http.Client{Transport: githubTransport{w}}},
		Bootstrapper:   simBootstrap{w},
		ControlPlane:   &driver.HTTPControlPlane{URL: "https://control.sim", Client: &http.Client{Transport: controlTransport{w}}},
		CallbackURL:    "https://warden.sim/v1/webhooks/terraform",
		CallbackKeys:   simCallbackKeys,
		Logger:         slog.New(slog.DiscardHandler),
		RestartLimit:   5,
		RestartWindow:  time.Minute,
		IdleAfter:      20 * time.Minute,
		Env:            w.envConfig(p),
		Fault:          func(point, id string) error { return w.fault(p, point, id) },
		DedupRetention: simRetention,
		Scheduler:      &scheduler{w: w, p: p, inc: inc},
		Hooks:          w.hooks(p),
		Host:           p.hostOf(),
		Metrics:        p.metricsOf(),
	}
	cfg.Steps = plantedSteps(w.opts.Plant, cfg)
	return cfg
}

// hostOf is the process's actor system, taken at its first start.
func (p *proc) hostOf() *runtime.Host {
	if p.host == nil {
		p.host = hosts.take()
	}
	return p.host
}

// metricsOf is the process's instruments, made at its first start.
func (p *proc) metricsOf() *actors.Metrics {
	if p.metrics == nil {
		p.metrics = actors.NewMetrics()
	}
	return p.metrics
}

// hosts are the actor systems of runs that ended, reset for the next run
// (runtime.Host.Reset): making one is about 33,000 small maps.
var hosts hostPool

type hostPool struct {
	mu   sync.Mutex
	free []*runtime.Host
}

func (hp *hostPool) take() *runtime.Host {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if n := len(hp.free); n > 0 {
		h := hp.free[n-1]
		hp.free = hp.free[:n-1]
		return h
	}
	return runtime.NewHost()
}

// give takes back the hosts of a run that ended: nothing steps its
// runtimes again.
func (hp *hostPool) give(procs []*proc) {
	for _, p := range procs {
		if p.host == nil {
			continue
		}
		p.host.Reset()
		hp.mu.Lock()
		hp.free = append(hp.free, p.host)
		hp.mu.Unlock()
		p.host = nil
	}
}

// appliedDelivery is a callback answered 200 applied: its record must
// survive every crash until its retention ends (I5, M20).
type appliedDelivery struct {
	marquee, delivery string
	// at is when the delivery was first sent: its record, written by
	// that send or a later one, is no older (I5's retention and M20's
	// bound are counted from it).
	at time.Time
}

// simRetention is how long the simulated warden keeps delivery records:
// shorter than production's 72 h so that a 10-hour run prunes (through
// the runtime's clock, like every other timer), longer than any repeat the
// workload sends (a duplicate comes within an hour of the first delivery,
// retries within minutes).
const simRetention = 3 * time.Hour

// simCallbackKeys sign the runs' scoped credentials (T1): a fixed key, so
// a seed's credentials, like everything else, replay byte for byte.
var simCallbackKeys = &trust.Keyring{Keys: []trust.Key{{ID: "sim", Secret: [trust.KeySize]byte{'s', 'i', 'm'}}}}

// effectAfter runs an effect of incarnation inc of p after d, unless that
// process has died by then (its effects die with it).
func (w *world) effectAfter(p *proc, inc int, d time.Duration, run func(ctx context.Context)) {
	w.after(d, "effect", func() { w.onProc(p, inc, func() { run(context.Background()) }) })
}

// crash kills the process at once: nothing in flight survives but what was
// synced. Then a new process recovers from the same (crash-cloned) disk; a
// crash during that recovery is one more crash, and so on.
func (w *world) crash(point string) {
	for point != "" {
		point = w.crashOnce(point)
	}
}

func (w *world) crashOnce(point string) (again string) {
	w.crashes++
	w.logf("CRASH at %s (incarnation %d)", point, w.p.inc)
	crashed := w.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if w.store.Health().Failed() != nil {
		w.store.Abandon() // a sealed store is never closed in place
	} else {
		_ = w.store.Close()
	}
	w.fs = crashed
	w.p.crashAt = ""
	w.p.inc++ // the dead incarnation's timers, effects and queue go quiet
	if w.faults.fire("storage.malformed-record") {
		st, err := persistence.Open("db", persistence.Options{FS: w.fs})
		if err == nil {
			b := st.NewBatch()
			b.Set(persistence.AdmissionKey("default", "zz-malformed-"+strconv.Itoa(w.crashes)), []byte("\x01{not json"))
			_ = b.Commit()
			_ = st.Close()
		}
	}
	defer func() {
		if r := recover(); r != nil {
			pc, ok := r.(serial.ProcessCrash)
			if !ok {
				panic(r)
			}
			again = pc.Point
		}
	}()
	w.start()
	w.afterRestart()
	return w.p.crashAt
}

// guard runs fn; a process crash inside it becomes a crash and restart
// (on a cluster, each node's guard has caught its own already).
func (w *world) guard(fn func()) {
	if w.p == nil {
		fn()
		return
	}
	defer func() {
		if r := recover(); r != nil {
			pc, ok := r.(serial.ProcessCrash)
			if !ok {
				panic(r)
			}
			w.crash(pc.Point)
		}
	}()
	fn()
	if w.p.crashAt != "" {
		w.crash(w.p.crashAt)
	}
}

// drain runs every live process's queued messages until none is left, one
// message of each process in turn.
func (w *world) drain() {
	for more := true; more; {
		more = false
		for _, p := range w.procs {
			if p.node != nil && (p.node.down || p.node.paused) {
				continue
			}
			ran := false
			w.onProc(p, p.inc, func() { ran = p.q.Step() })
			if ran {
				w.messages++
				more = true
			}
		}
	}
}

// injectedPanic starts the value of every actor panic the simulator injects.
const injectedPanic = "injected panic at "

// fault is the shell's fault hook of p: actor panics, process crashes and
// storage errors at each step of a transition.
func (w *world) fault(p *proc, point, id string) error {
	if strings.HasPrefix(id, "env-") && point != runtime.FaultBeforePersist && w.crashes < 25 {
		// The environment boundaries of I11: a crash right after an
		// attempt's intent is durable, and one in the middle of a removal.
		intent := slices.ContainsFunc(w.lastEnvCommit.Effects, func(e environment.Effect) bool { _, ok := e.(environment.Do); return ok })
		removing := !w.envs[id].State.Provisioning()
		if intent && point == runtime.FaultAfterPersist && w.faults.fire("env.crash.after-intent") ||
			intent && removing && point == runtime.FaultAfterEffects && w.faults.fire("env.crash.mid-removal") {
			p.crashAt = "env " + point
			panic(serial.ProcessCrash{Point: p.crashAt})
		}
	}
	if w.faults.fire("actor.panic." + point) {
		w.logf("panic in %s at %s", id, point)
		w.renewalMayBeLost(id)
		panic(injectedPanic + point)
	}
	if w.crashes < 25 && w.faults.fire("process.crash."+point) {
		p.crashAt = point
		panic(serial.ProcessCrash{Point: point})
	}
	if point == runtime.FaultBeforePersist && w.crashes < 25 && p.node == nil {
		w.armDiskFault(id)
	}
	return nil
}

// actorFailed: an actor panic the simulator did not inject, or a process
// crash it asked for, is a bug in the code under test.
func (w *world) actorFailed(actor string, err error) {
	if strings.HasPrefix(err.Error(), injectedPanic) {
		return
	}
	w.violate("panic", "actor %s failed: %v", actor, err)
}

// --- HTTP into the process ------------------------------------------------------------

// call sends one request to the real handler. crashed means the process
// died while handling it: the caller never got an answer.
func (w *world) call(method, path, token string, body any, delivery string, headers ...string) (status int, answer []byte, crashed bool) {
	return w.callOn(w.entry(), method, path, token, body, delivery, headers...)
}

// callOn sends one request to p's handler.
func (w *world) callOn(p *proc, method, path, token string, body any, delivery string, headers ...string) (status int, answer []byte, crashed bool) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, "https://warden.sim"+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if delivery != "" {
		req.Header.Set("Webhook-Id", delivery)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if p.node != nil && (p.node.down || p.node.paused) {
		return 0, nil, true // nobody answers: a dead or paused node
	}
	rec := httptest.NewRecorder()
	inc := p.inc
	w.guard(func() { w.onProc(p, inc, func() { p.api.ServeHTTP(rec, req) }) })
	if p.inc != inc {
		return 0, nil, true
	}
	return rec.Code, bytes.TrimSpace(rec.Body.Bytes()), false
}

// entry is the process a client's request reaches: the single node, or on
// a cluster any node (a load balancer does not know which owns what, nor
// which one is paused), drawn from the seed.
func (w *world) entry() *proc {
	if w.p != nil {
		return w.p
	}
	return w.procs[w.rnd.IntN(len(w.procs))]
}

// unanswered: no answer came (0), or the 503 of a shard on the move.
func unanswered(status int) bool { return status == 0 || status == http.StatusServiceUnavailable }

func resultOf(b []byte) string {
	var v struct {
		Result string `json:"result"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Result
}

// --- the workflow runner (GitHub Actions + Terraform) -----------------------------------

type githubTransport struct{ w *world }

func respond(status int, body string) *http.Response {
	return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}
}

// RoundTrip is the GitHub dispatch API: it records the dispatch (I2) and
// starts the run.
func (t githubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := t.w
	var body struct {
		Inputs map[string]string `json:"inputs"`
	}
	if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
		return respond(422, "bad body"), nil
	}
	id, action := body.Inputs["marquee_id"], body.Inputs["action"]
	gen, _ := strconv.ParseUint(body.Inputs["generation"], 10, 64)
	if w.dispatched[id] == nil {
		w.dispatched[id] = map[uint64]bool{}
	}
	if w.dispatched[id][gen] {
		w.violate("I2", "%s: generation %d dispatched twice", id, gen)
	}
	// I2 is about reuse, not arrival order: an older generation's dispatch
	// may reach GitHub after a newer one (started, then superseded).
	w.dispatched[id][gen] = true
	w.cover("M3")
	if w.faults.fire("github.transient") {
		w.logf("github 503 for %s g%d", id, gen)
		return respond(503, "unavailable"), nil
	}
	if w.faults.fire("github.configuration") {
		w.logf("github 404 for %s g%d", id, gen)
		return respond(404, "workflow not found"), nil
	}
	w.logf("dispatch %s g%d %s", id, gen, action)
	w.run(id, gen, action, body.Inputs["callback_token"])
	return respond(204, ""), nil
}

func hostFor(id string, gen uint64) string { return fmt.Sprintf("%s-g%d.host", id, gen) }

// run plays one workflow run: steps, then deployed (or failed), or
// destroyed for a destroy; every callback subject to the network's faults.
// Its callbacks use the run's scoped credential; an unversioned ping
// of an old workflow (generation 0) cannot, and uses the shared token.
func (w *world) run(id string, gen uint64, action, token string) {
	if w.faults.fire("workflow.silent") {
		w.logf("run %s g%d is silent", id, gen)
		return
	}
	at := w.now()
	if action == "destroy" {
		at = at.Add(w.uniform(time.Minute, 4*time.Minute))
		w.callbackAt(at, map[string]any{"marquee_id": id, "verb": "destroyed", "generation": gen}, token)
		return
	}
	// Some runs come from an old workflow that predates the generation
	// field: their progress pings say generation 0.
	stepGen := gen
	if w.rnd.IntN(10) == 0 {
		stepGen = 0
	}
	steps := []string{"vm_starting", "ssh_configuring", "tls_provisioning"}
	gap := func() time.Duration { return w.uniform(30*time.Second, 2*time.Minute) }
	if w.faults.fire("workflow.slow") {
		// Alive but slow: a ping every few minutes for 40 minutes, longer
		// than an attempt may provision.
		steps = nil
		for i := 0; i < 12; i++ {
			steps = append(steps, []string{"vm_starting", "ssh_configuring", "tls_provisioning"}[i/4])
		}
		gap = func() time.Duration { return w.uniform(3*time.Minute, 4*time.Minute) }
	}
	for _, step := range steps {
		at = at.Add(gap())
		w.callbackAt(at, map[string]any{"marquee_id": id, "verb": "step", "generation": stepGen, "step": step}, token)
	}
	at = at.Add(w.uniform(time.Minute, 4*time.Minute))
	if w.faults.fire("workflow.failed") {
		w.callbackAt(at, map[string]any{"marquee_id": id, "verb": "failed", "generation": gen, "reason": "terraform apply failed"}, token)
		return
	}
	w.callbackAt(at, map[string]any{"marquee_id": id, "verb": "deployed", "generation": gen, "connection": map[string]any{
		"host": hostFor(id, gen), "port": 22, "user": "root", "ssh_private_key": "sim-key", "free_domain": id + ".sim"}}, token)
}

// callbackAt schedules one delivery with the network's faults.
// token is the run's scoped credential, or "" for a caller warden did not
// dispatch (it uses the shared token).
func (w *world) callbackAt(at time.Time, body map[string]any, token string) {
	w.seq++
	delivery := fmt.Sprintf("d-%d", w.seq)
	if w.faults.fire("callback.lost") {
		return
	}
	sent := at
	if w.faults.fire("callback.reorder") {
		at = at.Add(w.uniform(0, 5*time.Minute))
	}
	if w.faults.fire("callback.late") {
		// Pareto tail: usually minutes, sometimes hours.
		late := time.Duration(float64(5*time.Minute) * math.Pow(1/(1-w.rnd.Float64()*0.999), 1/1.2))
		at = at.Add(min(late, 6*time.Hour))
	}
	if at.After(w.land) && !sent.After(w.land) {
		at = w.land
	}
	w.at(at, "callback", func() { w.deliver(body, delivery, 0, token) })
	if w.faults.fire("callback.duplicate") {
		w.at(at.Add(w.uniform(time.Second, time.Hour)), "callback", func() { w.deliver(body, delivery, 0, token) })
	}
}

// deliver sends a callback; like a webhook sender it retries what was not
// answered, with the same delivery id.
func (w *world) deliver(body map[string]any, delivery string, attempt int, scoped string) {
	if _, sent := w.firstSent[delivery]; !sent {
		w.firstSent[delivery] = w.now()
	}
	token := cbToken
	if g, _ := body["generation"].(uint64); scoped != "" && g > 0 {
		token = scoped
	}
	if w.faults.fire("callback.bad-token") {
		// Unanswered (no answer, or 503 while a cluster's shard moves) is
		// not an answer; any answer must be the refusal.
		st, _, _ := w.call("POST", "/v1/webhooks/terraform", "wrong-token", body, delivery)
		if st != http.StatusUnauthorized && !unanswered(st) {
			w.violate("M9", "a wrong token was answered %d", st)
		}
		w.cover("M9")
		// A genuine credential of another marquee speaks for nothing here.
		g, _ := body["generation"].(uint64)
		foreign := trust.MintScoped(simCallbackKeys, "zz-foreign", g, w.now().Add(time.Hour))
		if st, _, _ := w.call("POST", "/v1/webhooks/terraform", foreign, body, delivery); st != http.StatusForbidden && !unanswered(st) {
			w.violate("T1", "another marquee's credential was answered %d", st)
		}
	}
	id, _ := body["marquee_id"].(string)
	dry, dried := w.dryRun(id, body, delivery)
	st, ans, crashed := w.call("POST", "/v1/webhooks/terraform", token, body, delivery)
	if dried && !crashed && st == http.StatusOK {
		if !bytes.Equal(dry, ans) {
			w.violate("O18", "delivery %s to %s: the dry run answered %s, the callback %s", delivery, id, dry, ans)
			return
		}
		*w.opts.dryRuns++
	}
	if crashed || st == http.StatusServiceUnavailable {
		w.logf("callback %s %s %v unanswered (crashed=%t status=%d)", delivery, id, body["verb"], crashed, st)
		if attempt < 5 {
			w.after(30*time.Second, "callback", func() { w.deliver(body, delivery, attempt+1, token) })
		}
		return
	}
	res := resultOf(ans)
	w.logf("callback %s %s %v g%v -> %d %s", delivery, id, body["verb"], body["generation"], st, res)
	if first, ok := w.answered[delivery]; ok {
		// M20 keeps an entity's newest MaxDeliveries: one that many
		// deliveries ago is forgotten, and its repeat is a new message.
		// (Less a chunk's slack: a delivery whose answer was lost is
		// counted when its retry is answered, a little late.)
		since := w.deliveries[id] - w.answeredAt[delivery]
		switch {
		case since >= persistence.MaxDeliveries-persistence.ChunkLen:
			w.logf("delivery %s: %d deliveries of %s since its first answer; past M20's bound, a new message", delivery, since, id)
			delete(w.answered, delivery)
		case !bytes.Equal(first, ans):
			w.violate("M20", "delivery %s answered %s, then %s", delivery, first, ans)
			return
		default:
			w.cover("M20")
			return
		}
	}
	if st == http.StatusOK {
		w.deliveries[id]++
		w.answeredAt[delivery] = w.deliveries[id]
		w.answered[delivery] = ans
		if res == "applied" {
			w.applied = append(w.applied, appliedDelivery{marquee: id, delivery: delivery, at: w.firstSent[delivery]})
		}
	}
}

// dryRun asks what the callback would do, with dryRunFirst, and checks
// that asking wrote nothing; dried is false where there is no answer to
// compare (off, or the dry run itself was refused or unanswered).
func (w *world) dryRun(id string, body map[string]any, delivery string) (reply []byte, dried bool) {
	if !w.opts.dryRunFirst {
		return nil, false
	}
	// What is already queued runs first, as it would before the callback:
	// only the dry run itself is then between the two hashes.
	// A dry run, like any message, activates an actor that is not live,
	// and activation reconciles what a crash left in flight, with writes
	// of its own: the actor is activated first (on the node that owns it),
	// so that only the dry run is between the two hashes.
	w.faults.held = true
	for _, p := range w.procs {
		if p.sys != nil && (p.node == nil || !p.node.down && !p.node.paused) {
			inc := p.inc
			w.guard(func() {
				w.onProc(p, inc, func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					_ = p.sys.Activate(ctx, id)
				})
			})
		}
	}
	w.faults.held = false
	w.guard(w.drain)
	before := w.storeHash()
	w.faults.held = true
	st, ans, crashed := w.call("POST", "/v1/marquees/"+id+"/dry-run", opToken, body, delivery)
	w.faults.held = false
	if after := w.storeHash(); after != before {
		w.violate("O18", "a dry run of delivery %s to %s wrote to the store", delivery, id)
		return nil, false
	}
	if crashed || st != http.StatusOK {
		return nil, false
	}
	var a struct {
		Reply json.RawMessage `json:"reply"`
	}
	if json.Unmarshal(ans, &a) != nil {
		w.violate("O18", "a dry run answered %s", ans)
		return nil, false
	}
	return bytes.TrimSpace(a.Reply), true
}

// storeHash is a digest of every key and value of the durable store.
func (w *world) storeHash() [32]byte {
	h := sha256.New()
	_ = w.store.Scan(nil, nil, func(k, v []byte) (bool, error) {
		h.Write(k)
		h.Write([]byte{0})
		h.Write(v)
		h.Write([]byte{0})
		return true, nil
	})
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// --- control plane and bootstrap --------------------------------------------------

type controlTransport struct{ w *world }

func (t controlTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := t.w
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) >= 3 && parts[2] == "playgrounds" {
		w.cover("M14")
		return respond(204, ""), nil
	}
	if w.faults.fire("controlplane.unreachable") {
		return nil, errors.New("connection refused")
	}
	if w.faults.fire("controlplane.garbage") {
		return respond(200, `{"live":`), nil
	}
	c := w.chats[parts[1]]
	return respond(200, fmt.Sprintf(`{"live": %d, "reachable": %d}`, c.Live, c.Reachable)), nil
}

type simBootstrap struct{ w *world }

func (b simBootstrap) Bootstrap(_ context.Context, r driver.BootstrapRequest) error {
	if b.w.faults.fire("bootstrap.fail") {
		return errors.New("https probe: tls handshake timeout")
	}
	return nil
}

// --- the workload ----------------------------------------------------------------

// workload draws the operators' commands from the seed alone, so the
// fault-free reference run gets exactly the same ones.
func (w *world) workload() {
	r := rand.New(rand.NewPCG(w.opts.Seed, 1))
	n := 3 + r.IntN(5)
	at := epoch
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m-%d", i)
		w.ids = append(w.ids, id)
		byo := r.IntN(8) == 0
		at = at.Add(time.Duration(r.IntN(20)) * time.Minute)
		w.at(at, "operator", func() { w.create(id, byo) })
	}
	for t := at; t.Before(epoch.Add(w.opts.FaultyPhase)); {
		t = t.Add(time.Duration(5+r.IntN(25)) * time.Minute)
		id := w.ids[r.IntN(len(w.ids))]
		op := []string{"redeploy", "redeploy", "destroy", "destroy", "reap", "disable", "enable"}[r.IntN(7)]
		w.at(t, "operator", func() { w.operate(id, op) })
	}
	if w.faults.off {
		return
	}
	// The world's own weather: chats come and go, the cloud hiccups.
	for t := epoch; t.Before(epoch.Add(w.opts.FaultyPhase)); t = t.Add(time.Duration(5+w.rnd.IntN(20)) * time.Minute) {
		w.at(t, "chats", func() {
			id := w.ids[w.rnd.IntN(len(w.ids))]
			live := w.rnd.IntN(3)
			w.chats[id] = driver.Chats{Live: live, Reachable: w.rnd.IntN(live + 1)}
		})
		w.at(t.Add(time.Minute), "cloud", w.falseNull)
	}
}

func (w *world) create(id string, byo bool) {
	body := map[string]any{"id": id, "kind": "tutorial"}
	if byo {
		body = map[string]any{"id": id, "kind": "byo", "connection": map[string]any{"host": "byo.host", "port": 22, "user": "root", "ssh_private_key": "k"}}
	}
	st, ans, crashed := w.call("POST", "/v1/marquees", opToken, body, "")
	w.logf("create %s -> %d crashed=%t", id, st, crashed)
	if w.intents[id] == nil {
		w.intents[id] = &intent{up: true, serving: true, byo: byo}
	}
	if st == http.StatusCreated {
		w.created[id] = true
		var v struct {
			Admission *struct{ Status string } `json:"admission"`
		}
		_ = json.Unmarshal(ans, &v)
		if v.Admission != nil && v.Admission.Status != "asking" {
			w.cover("A10") // answered with a durable admission
		}
	}
	if st != http.StatusCreated && st != http.StatusConflict {
		w.after(time.Minute, "operator", func() { w.create(id, byo) }) // the operator tries again
	}
}

func (w *world) operate(id, op string) {
	in := w.intents[id]
	if in == nil || in.reaped {
		return
	}
	path := "/v1/marquees/" + id + "/" + op
	var body any
	switch op {
	case "reap":
		path, body = "/v1/marquees/"+id+"/destroy", map[string]any{"reap": true}
	case "destroy":
	}
	st, _, crashed := w.call("POST", path, opToken, body, "")
	w.logf("%s %s -> %d crashed=%t", op, id, st, crashed)
	// The intent is the operator's wish, whatever this answer was; the
	// quiet phase asks again until the system agrees.
	if op == "disable" || op == "enable" {
		in.serving = op == "enable"
		if st == http.StatusOK {
			w.cover("M8")
		}
		return
	}
	if in.byo {
		return
	}
	switch op {
	case "redeploy":
		in.up = true
	case "destroy":
		in.up = false
	case "reap":
		in.up, in.reaped = false, true
	}
}

// falseNull is a transient "no infrastructure" plan against a live host,
// sometimes confirmed, sometimes followed by a healthy signal.
func (w *world) falseNull() {
	if !w.faults.fire("workflow.false-null") {
		return
	}
	var live []string
	for _, id := range w.ids {
		if s, ok := w.model[id]; ok && s.Lifecycle == marquee.Provisioned && s.Tombstone == nil {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		return
	}
	id := live[w.rnd.IntN(len(live))]
	gen := w.model[id].Generation
	w.callbackAt(w.now(), map[string]any{"marquee_id": id, "verb": "null", "generation": gen}, "")
	if w.rnd.IntN(2) == 0 {
		w.callbackAt(w.now().Add(w.uniform(time.Minute, 10*time.Minute)), map[string]any{"marquee_id": id, "verb": "rebooted", "generation": gen}, "")
	}
	if w.rnd.IntN(2) == 0 {
		w.callbackAt(w.now().Add(w.uniform(time.Minute, 30*time.Minute)), map[string]any{"marquee_id": id, "verb": "null", "generation": gen}, "")
	}
}

// repair is the quiet phase's operator: it asks again for what the
// workload wants, so every fault's damage is healed by the system's own
// commands, as a person would do.
// repairRound repairs every 20 minutes until an hour before the end, and
// after that for as long as the round before had something to do, until
// half an hour before it: a repair can take two rounds (a redeploy
// provisions a host active; only then can it be disabled again, seed
// 1000 on three nodes), and the last must have time to settle.
func (w *world) repairRound() {
	acted := w.repair()
	next := w.now().Add(repairEvery)
	if next.Before(w.end.Add(-time.Hour)) || acted && next.Before(w.end.Add(-30*time.Minute)) {
		w.at(next, "repair", w.repairRound)
	}
}

// repair asks once for what differs from the workload's wishes and
// reports whether it asked anything.
func (w *world) repair() (acted bool) {
	call := func(path string, body any) {
		w.call("POST", path, opToken, body, "")
		acted = true
	}
	for _, id := range w.ids {
		in := w.intents[id]
		s, ok := w.model[id]
		if in == nil {
			continue
		}
		if !ok {
			w.create(id, in.byo)
			acted = true
			continue
		}
		switch {
		case in.byo:
			if in.serving && s.Serving != marquee.Active {
				call("/v1/marquees/"+id+"/enable", nil)
			} else if !in.serving && s.Serving != marquee.Disabled {
				call("/v1/marquees/"+id+"/disable", nil)
			}
		case in.reaped && s.Tombstone == nil && s.Lifecycle != marquee.Destroying:
			call("/v1/marquees/"+id+"/destroy", map[string]any{"reap": true})
		case !in.up && !in.reaped && s.Lifecycle != marquee.Destroyed && s.Lifecycle != marquee.Destroying:
			call("/v1/marquees/"+id+"/destroy", nil)
		case in.up && (s.Lifecycle == marquee.Failed || s.Lifecycle == marquee.Destroyed):
			call("/v1/marquees/"+id+"/redeploy", nil)
		case in.up && s.Lifecycle == marquee.Provisioned && in.serving && s.Serving == marquee.Disabled:
			call("/v1/marquees/"+id+"/enable", nil)
		case in.up && s.Lifecycle == marquee.Provisioned && !in.serving && s.Serving == marquee.Active:
			call("/v1/marquees/"+id+"/disable", nil)
		}
	}
	return acted
}

// final is the outcome the convergence oracle compares.
func (w *world) final() map[string]string {
	out := map[string]string{}
	w.finalEnvs(out)
	for _, id := range w.ids {
		s, ok := w.model[id]
		switch {
		case !ok:
			out[id] = "absent"
		case s.Tombstone != nil:
			out[id] = "tombstone"
		default:
			out[id] = fmt.Sprintf("%s/%s", s.Lifecycle, s.Serving)
		}
	}
	return out
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
