package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

// The environment kind: each preview is its own worker, taking one
// eligible transition at a time, recording intent before every effect,
// its driver calls under a lease it renews.

// EnvConfig wires the environment side of the System.
type EnvConfig struct {
	Machine environment.Machine
	// Drivers by capability; a missing one makes its steps fail as
	// configuration errors.
	Drivers map[environment.Capability]driver.Capability
	// Notifier delivers the outbox: a webhook, or GitHub's
	// commit statuses and pull-request comments; nil means none are sent
	// (they stay in the outbox, shown in the view).
	Notifier driver.Notifier
	// Worker names this process as a lease owner.
	Worker string
	// ExclusiveStore says no other process can write an environment's
	// records while this one runs its actor: a lone warden holds Pebble's
	// lock; a cluster node owns the environment's shard, and every write of
	// another node is fenced out. A lease owner other than Worker found
	// when the actor loads is then a process that can no longer commit (an
	// earlier incarnation, or the shard's previous owner), and its leases
	// end at once instead of at their expiry; its driver call
	// still in flight is refused by the lease generation. False only
	// where another writer may be alive: a test's shared store.
	ExclusiveStore bool
	// NotifyBackoff is the first wait after a failed delivery, doubling
	// (zero means 30 seconds).
	NotifyBackoff time.Duration
	// Seeds makes and lists the seeds previews' data is copied from (nil:
	// the platform has none).
	Seeds driver.Seeder
	// SleepAfter is a preview's sleep_after when its create gives none
	// (0: it never sleeps), on a platform whose previews sleep
	// (Machine.Config.Sleeps).
	SleepAfter time.Duration
	// ReconcileEvery is how often environments at rest are observed:
	// zero means 30 seconds, negative never.
	ReconcileEvery time.Duration
	// Watcher, when set, says at once which environment's platform
	// changed under it; that environment is observed then.
	Watcher driver.Watcher
}

// DriverForAll serves every capability the lifecycle calls with one driver
// (an exec script, or an in-process world, that reads the capability from
// the request).
func DriverForAll(d driver.Capability) map[environment.Capability]driver.Capability {
	out := map[environment.Capability]driver.Capability{}
	for _, c := range environment.StepCapabilities {
		out[c] = d
	}
	return out
}

// MaxNotifyAttempts bounds the deliveries of one notification: with the
// back-off that is most of a day, and the record stays in the outbox (and
// the view) either way.
const MaxNotifyAttempts = 12

type environments = runtime.Entities[record.Environment, environment.Event, environment.Outcome]
type envHandle = runtime.Handle[record.Environment, environment.Event, environment.Outcome]

type envKind struct {
	record.EnvironmentWrites
	sys  *System
	step EnvStep
}

func (envKind) Name() string { return envKindName }

func (k envKind) Load(id string) (record.Environment, bool, error) {
	r, err := record.LoadEnvironment(k.sys.cfg.Store, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return record.Environment{}, false, nil
	}
	return r, err == nil, err
}

func (k envKind) Stored(id string) (bool, error) { return k.sys.cfg.Store.Has(persistence.EnvKey(id)) }

// Step is the machine on the record; a create is its first step (the
// machine begins the first transition in it, and refuses a create of an
// environment that exists). Its outcome carries the ask to the branch.
func (k envKind) Step(rec record.Environment, ev environment.Event, now time.Time) (record.Environment, environment.Outcome) {
	e, rd := k.step(rec.Env, ev, now)
	for _, eff := range rd.Effects {
		if a, ok := eff.(environment.AskGeneration); ok {
			// The branch gives a created environment its route generation.
			rd.Messages = append(rd.Messages, entity.Message{Kind: branchKindName, ID: a.Branch, Event: environment.NextGeneration{For: e.ID}})
		}
	}
	return record.NextEnvironment(e, rd, now, k.sys.cfg.Env.ExclusiveStore), rd
}

// Holds keeps a create's answer until the branch has given the route
// generation: the caller hears the environment with its generation.
func (envKind) Holds(r record.Environment) bool {
	return r.Env.Generation == 0 && r.Env.Tombstone == nil
}

func (envKind) Admit(record.Environment, environment.Event) error { return nil }

// Idle: never; an environment's effects report back to the instance that
// started them, and its reconciler runs in its turn.
func (envKind) Idle(record.Environment, bool) bool { return false }

func (envKind) Copy(rec record.Environment) record.Environment { return rec }

// The branch's answer crosses nodes: the branch may live on another
// node than the environment.
func (envKind) EncodeEvent(ev environment.Event) ([]byte, bool) {
	g, ok := ev.(environment.GenerationGiven)
	if !ok {
		return nil, false
	}
	b, _ := json.Marshal(g)
	return b, true
}

func (envKind) DecodeEvent(b []byte) (environment.Event, error) {
	var g environment.GenerationGiven
	if err := strictJSON(b, &g); err != nil || g.Generation == 0 {
		return nil, fmt.Errorf("an environment is told {\"Generation\": n > 0}: %v", err)
	}
	return g, nil
}

// Activated ends the leases of owners that can no longer
// commit, fires what is due, and sends again what the outbox holds: the
// sender's retries are timers in memory, so after a restart they are gone.
func (k envKind) Activated(h *envHandle, _ bool) {
	rec := h.Record()
	if at := rec.Env.Attempt; at != nil && k.sys.cfg.Env.ExclusiveStore && at.Lease.Owner != k.sys.cfg.Env.Worker {
		h.Apply(environment.OwnerGone{Owner: at.Lease.Owner})
	}
	k.due(h)
	for _, n := range rec.Env.Outbox {
		if !n.Delivered && n.Attempts < MaxNotifyAttempts {
			k.send(h, n, n.Attempts)
		}
	}
}

func (k envKind) Woken(h *envHandle) { k.due(h) }

// resend is a notification's next delivery attempt, in its mailbox.
func (k envKind) resend(key string, attempt int) func(h *envHandle) {
	return func(h *envHandle) {
		for _, n := range h.Record().Env.Outbox {
			if n.Key == key && !n.Delivered {
				k.send(h, n, attempt)
			}
		}
	}
}

// due turns passed deadlines into events: TTL expiry, then the next step
// (a back-off over, or a lease to take over after a crash).
func (k envKind) due(h *envHandle) {
	if !h.Exists() {
		return
	}
	e := h.Record().Env
	if !e.ExpiresAt.IsZero() && !h.Now().Before(e.ExpiresAt) && e.Desired != "removed" {
		h.Apply(environment.Expire{})
	}
	if e.SleepDue(h.Now()) {
		k.askTraffic(h, e)
	}
	k.next(h)
}

// askTraffic asks the route's driver for the last request the proxy
// served under the preview's host, and tells the answer as Traffic (E19).
// An answer that does not come leaves the sleep to the next round at rest,
// which asks the same question with its route observation.
func (k envKind) askTraffic(h *envHandle, e environment.Env) {
	s, id := k.sys, h.ID()
	drv := s.cfg.Env.Drivers[environment.Route]
	if drv == nil {
		return
	}
	req := observeRequest(e, environment.Route)
	h.Go(runtime.Effect{Labels: driverLabels(req), Run: func(ctx context.Context) {
		if out, err := drv.Do(ctx, req); err == nil && out.Observation != nil {
			s.envs.Tell(id, environment.Traffic{LastRequest: out.Observation.LastRequest})
		}
	}})
}

// next asks for the next eligible transition, through the mailbox.
func (k envKind) next(h *envHandle) {
	e := h.Record().Env
	if !h.Exists() || e.Tombstone != nil {
		return
	}
	adv := environment.Advance{Owner: k.sys.cfg.Env.Worker}
	if e.ActivatesRouteNext() {
		adv.BranchNewest = k.sys.branchNewest(e.Branch)
	}
	h.Tell(adv)
}

// branchNewest reads the newest route generation the branch gave out,
// for an event that may begin the route's activation: its
// generations are durable before any is used. Unreadable, it is 0, and
// the machine leaves the activation to the next advance.
func (s *System) branchNewest(branch string) uint64 {
	newest, err := record.BranchGeneration(s.cfg.Store, branch)
	if err != nil {
		s.log.Warn("environment: branch generation unreadable", "branch", branch, "err", err)
	}
	return newest
}

// reconcile observes an environment at rest, or a tombstone's leftovers:
// observation first, never a blind restart; each answer comes
// back as an AtRest event the machine judges, stamped with the
// attempt it was asked under so that an answer outliving a repair is
// known stale. Every link is observed, the end-to-end one through
// the host name too. One that is not at rest, with nothing in
// flight, is asked for its next step.
func (k envKind) reconcile(h *envHandle) {
	e := h.Record().Env
	if !h.Exists() || e.Attempt != nil {
		return
	}
	asleep := e.State == environment.Sleeping && e.Asleep()
	if e.Tombstone == nil && !asleep && (e.State != environment.Ready || e.Desired != "ready") {
		k.next(h)
		return
	}
	s, id, seq := k.sys, h.ID(), e.AttemptSeq
	observe := func(ctx context.Context, c environment.Capability) {
		drv := s.cfg.Env.Drivers[c]
		if drv == nil {
			return
		}
		out, err := drv.Do(ctx, observeRequest(e, c))
		if err != nil || out.Observation == nil {
			return // unknown is not drift; the next round looks again
		}
		o := observationOf(out.Observation, s.cfg.Secrets)
		s.envs.Tell(id, environment.AtRest{Capability: c, Seq: seq, BranchNewest: s.branchNewest(e.Branch), Observation: o})
		if c == environment.Route && e.SleepAfter > 0 && e.State == environment.Ready {
			s.envs.Tell(id, environment.Traffic{LastRequest: o.LastRequest}) // changes nothing before the sleep is due
		}
	}
	// The serving links in order, route, application, then the request
	// through the host name, so the machine judges the end-to-end answer
	// knowing what the links said: a failed smoke check behind a
	// route edited by hand is the route's drift, not the application's.
	serving := []environment.Capability{environment.Route, environment.App}
	if e.Tombstone == nil && e.SupersededBy == 0 && !asleep {
		// A host name ours to check; a sleeping one's is the waker's,
		// and asking it would be a visit.
		serving = append(serving, environment.Smoke)
	}
	data := []environment.Capability{environment.Database, environment.Migrations}
	round := s.roundOf(id)
	if !round.begin(1 + len(data)) {
		return // a round is still observing; another follows it
	}
	finish := func() {
		if round.done() {
			s.envs.InTurn(id, s.reconcileTurn)
		}
	}
	h.Go(runtime.Effect{Run: func(ctx context.Context) {
		defer finish()
		for _, c := range serving {
			observe(ctx, c)
		}
	}})
	for _, c := range data {
		h.Go(runtime.Effect{Run: func(ctx context.Context) {
			defer finish()
			observe(ctx, c)
		}})
	}
}

// observeRound keeps one round of at-rest observations per environment at
// a time. Rounds come every --env-reconcile-every and on every platform
// event, and each observation is a driver call (a process, a request): a
// round slower than the period piled rounds up without bound (a crash run
// had a hundred driver processes starting at once, and warden's own
// requests timed out behind them). A round asked for while one observes
// runs once that one ends, so an event is never lost.
type observeRound struct {
	mu       sync.Mutex
	inFlight int
	again    bool
}

// roundOf is the environment's round.
func (s *System) roundOf(id string) *observeRound {
	r, _ := s.rounds.LoadOrStore(id, &observeRound{})
	return r.(*observeRound)
}

// begin starts a round of n observations, or, while one is in flight,
// notes that another is wanted and reports false.
func (r *observeRound) begin(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight > 0 {
		r.again = true
		return false
	}
	r.inFlight = n
	return true
}

// done ends one observation of the round; true means the round ended and
// another was asked for meanwhile.
func (r *observeRound) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	if r.inFlight > 0 || !r.again {
		return false
	}
	r.again = false
	return true
}

func (k envKind) Run(h *envHandle, next record.Environment, rd environment.Outcome) {
	env := next.Env
	for _, eff := range rd.Effects {
		switch e := eff.(type) {
		case environment.Do:
			k.do(h, env, e)
		case environment.Send:
			k.send(h, e.Notification, 0)
		}
	}
}

// do runs one capability step under its lease, renewed every third of its
// length while the call runs; the result comes back as an event.
func (k envKind) do(h *envHandle, env environment.Env, e environment.Do) {
	s, id := k.sys, h.ID()
	req := driver.CapabilityRequest{Capability: string(e.Capability), Op: string(e.Op), EnvID: id, Identity: e.Identity,
		AttemptID: e.AttemptID, LeaseGeneration: e.LeaseGeneration, Generation: e.Generation, ExpectedRoute: e.ExpectedRoute,
		Branch: env.Branch, Revision: env.Revision, DataFrom: e.DataFrom, Epoch: h.Epoch()}
	drv := s.cfg.Env.Drivers[e.Capability]
	eff := runtime.Effect{Labels: driverLabels(req), Run: func(ctx context.Context) {
		res := s.callCapability(ctx, drv, req)
		res.BranchNewest = s.branchNewest(env.Branch)
		s.envs.Tell(id, res)
	}}
	if leaseFor := s.cfg.Env.Machine.Config.LeaseFor; leaseFor > 0 {
		// A renewal that races the call's end is refused by the machine as
		// the lease it names is gone, harmlessly.
		renew := environment.RenewLease{AttemptID: req.AttemptID, LeaseGeneration: req.LeaseGeneration}
		eff.Heartbeat, eff.Every = func() { s.envs.Tell(id, renew) }, leaseFor/3
	}
	h.Go(eff)
}

// driverLabels name a driver call to the scheduler (the simulator decides
// from them which calls' workers pause).
func driverLabels(req driver.CapabilityRequest) map[string]string {
	return map[string]string{"kind": "environment", "entity": req.EnvID, "capability": req.Capability, "op": req.Op,
		"attempt": req.AttemptID, "lease": strconv.FormatUint(req.LeaseGeneration, 10)}
}

// callCapability makes one driver call and says what it found. Receipts
// are kept and shown: a driver that echoes one of the process's
// secrets never gets it there.
func (s *System) callCapability(ctx context.Context, drv driver.Capability, req driver.CapabilityRequest) environment.DriverAnswer {
	res := environment.DriverAnswer{AttemptID: req.AttemptID, LeaseGeneration: req.LeaseGeneration}
	if drv == nil {
		res.Category, res.Message = environment.Configuration, "no driver configured for "+req.Capability
		return res
	}
	start := s.cfg.Clock.Now()
	out, rec, err := driver.Call(ctx, drv, req)
	s.observeDriver("capability", start, err)
	in, _ := json.Marshal(rec.Request)
	outJSON, _ := json.Marshal(rec.Result)
	secrets := s.cfg.Secrets
	res.Input, res.Output = redactString(string(in), secrets...), redactString(string(outJSON), secrets...)
	switch {
	case errors.Is(err, driver.ErrTimeout):
		res.Timeout = true
	case err != nil:
		res.Category, res.Message = environment.Category(driver.ClassOf(err)), redacted(err, secrets...).Error()
		if res.Category != environment.Configuration {
			res.Category = environment.Transient
		}
	default:
		res.OK, res.Category, res.Message = out.OK, environment.Category(out.Category), redactString(out.Message, secrets...)
		if out.Observation != nil {
			o := observationOf(out.Observation, secrets)
			res.Observation = &o
		}
	}
	return res
}

// observeRequest asks a driver to observe e's resource of capability c.
func observeRequest(e environment.Env, c environment.Capability) driver.CapabilityRequest {
	return driver.CapabilityRequest{Capability: string(c), Op: "observe", EnvID: e.ID, Identity: e.Identity(c),
		Generation: e.Generation, Branch: e.Branch, Revision: e.Revision}
}

// observationOf is a driver's observation as the machine takes it: its
// URL kept only if it is one, its detail without the process's secrets.
func observationOf(o *driver.CapabilityObservation, secrets []string) environment.Observation {
	return environment.Observation{Exists: o.Exists, Owner: o.Owner, Matches: o.Matches, Replace: o.Replace,
		ProviderID: o.ProviderID, RouteTarget: o.RouteTarget, URL: previewURL(o.URL), AtWaker: o.AtWaker, Stopped: o.Stopped,
		LastRequest: o.LastRequest, Detail: redactString(o.Detail, secrets...)}
}

// previewURL keeps a URL a driver reported only if it is one: http(s),
// bounded, no user info (it is shown and sent in notifications).
func previewURL(s string) string {
	u, err := url.Parse(s)
	if len(s) > 512 || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return ""
	}
	return s
}

// send delivers a notification outside the mailbox; a failure is retried
// with back-off (NotifyBackoff doubling), never changing readiness.
func (k envKind) send(h *envHandle, n environment.Notification, attempt int) {
	s, id := k.sys, h.ID()
	if s.cfg.Env.Notifier == nil {
		// Nowhere to send: nothing is tried or retried; the view says why
		// and the record stays in the outbox.
		return
	}
	h.Go(runtime.Effect{Run: func(ctx context.Context) {
		err := s.notify(ctx, n)
		d := environment.Delivered{Key: n.Key, OK: err == nil}
		if err != nil {
			d.Error = err.Error()
		}
		s.envs.Tell(id, d)
		if err != nil && attempt+1 < MaxNotifyAttempts {
			s.cfg.Clock.AfterFunc(s.cfg.Env.NotifyBackoff<<min(attempt, 10), func() {
				s.envs.InTurn(id, k.resend(n.Key, attempt+1))
			})
		}
	}})
}

// notify delivers one outbox record through the configured notifier;
// the error, secrets scrubbed, is kept on the record.
func (s *System) notify(ctx context.Context, n environment.Notification) error {
	start := s.cfg.Clock.Now()
	err := s.cfg.Env.Notifier.Notify(ctx, driver.Notification{Key: n.Key, Event: n.Event, URL: n.URL, EnvID: n.EnvID,
		Branch: n.Branch, Revision: n.Revision, Generation: n.Generation, Detail: n.Detail})
	s.observeDriver("notify", start, err)
	if err != nil {
		err = redacted(err, s.cfg.Secrets...)
		s.log.Info("notification not delivered", "environment", n.EnvID, "key", n.Key, "err", err)
	}
	return err
}

// Observe logs and counts every environment step. It sends
// nothing: the machine begins the next transition in the step that ended
// the last one.
func (k envKind) Observe(_ runtime.View[record.Environment], ev environment.Event, before, next record.Environment, rd environment.Outcome) {
	if rd.Err != nil || (!rd.Changed && len(rd.Effects) == 0) {
		return
	}
	k.observe(ev, before.Env, next.Env, rd)
}

func (k envKind) observe(ev environment.Event, b, n environment.Env, rd environment.Outcome) {
	m, log := k.sys.cfg.Metrics, k.sys.log
	ctx := context.Background()
	for _, st := range rd.Answer.Through {
		m.EnvTransitions.WithLabelValues(string(st)).Inc()
	}
	found, resolved := driftChanges(b.Drift, n.Drift)
	for _, d := range found {
		m.DriftFound.Inc()
		log.Info("drift found", "environment", n.ID, "capability", d.Capability, "identity", d.Identity, "desired", d.Desired,
			"observed", d.Observed, "outcome", orNone(d.Outcome))
	}
	for _, d := range resolved {
		m.DriftResolved.Inc()
		log.Info("drift resolved", "environment", n.ID, "capability", d.Capability, "identity", d.Identity, "outcome", d.Outcome)
	}
	for _, au := range n.Audit[min(len(b.Audit), len(n.Audit)):] {
		log.Info("environment action", "environment", n.ID, "operator", au.Actor, "action", au.Action, "reason", au.Reason)
	}
	if f := n.LastFailure; f != nil && (b.LastFailure == nil || b.LastFailure.AttemptID != f.AttemptID || b.LastFailure.At != f.At) {
		if f.Retryable {
			m.Retries.WithLabelValues("environment").Inc()
		}
		log.Warn("environment step failed", "environment", n.ID, "transition", f.Transition, "category", f.Category, "retryable", f.Retryable,
			"needs", f.Needs, "message", f.Message)
	}
	level := slog.LevelDebug
	if _, created := ev.(environment.Create); created || b.State != n.State || (b.Tombstone == nil) != (n.Tombstone == nil) || b.Desired != n.Desired {
		level = slog.LevelInfo
	}
	if !log.Enabled(ctx, level) {
		return
	}
	// One line per state boundary the step passed: a step may end a
	// transition and the next (the last removal state's).
	from, through := orNone(string(b.State)), rd.Answer.Through
	if len(through) == 0 {
		through = []environment.Phase{n.State}
	}
	for _, st := range through {
		log.LogAttrs(ctx, level, "environment transition", slog.String("environment", n.ID), slog.String("event", eventName(ev)),
			slog.String("state", fmt.Sprintf("%s -> %s", from, st)), slog.String("desired", n.Desired),
			slog.Uint64("generation", n.Generation), slog.String("note", rd.Answer.Note))
		from = string(st)
	}
}

// driftChanges are the drift records a step added and those it resolved.
func driftChanges(before, after []environment.Drift) (found, resolved []environment.Drift) {
	seen := map[string]environment.Drift{}
	for _, d := range before {
		seen[driftKey(d)] = d
	}
	for _, d := range after {
		old, ok := seen[driftKey(d)]
		switch {
		case !ok:
			found = append(found, d)
		case old.ResolvedAt.IsZero() && !d.ResolvedAt.IsZero():
			resolved = append(resolved, d)
		}
	}
	return found, resolved
}

func driftKey(d environment.Drift) string {
	return fmt.Sprintf("%s/%s/%d", d.Capability, d.Identity, d.DetectedAt.UnixNano())
}

// listEnvIDs lists every stored environment's id, in key order, without
// decoding the records (the reconciler's sweep; each actor reads its own).
func listEnvIDs(st *persistence.Store) ([]string, error) {
	var out []string
	err := st.Scan([]byte(persistence.EnvPrefix), nil, func(k, _ []byte) (bool, error) {
		out = append(out, string(k[len(persistence.EnvPrefix):]))
		return true, nil
	})
	return out, err
}
