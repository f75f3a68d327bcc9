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
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

// The environment kind: each preview is its own worker, taking one
// eligible transition at a time, recording intent before every effect
// (E5), its driver calls under a lease it renews (E7).

// EnvRecord is an environment's durable record.
type EnvRecord struct {
	Env    environment.Env `json:"env"`
	WakeAt time.Time       `json:"wake_at,omitzero"`
}

// EnvConfig wires the environment side of the System.
type EnvConfig struct {
	Machine environment.Machine
	// Drivers by capability (E13); a missing one makes its steps fail as
	// configuration errors.
	Drivers map[environment.Capability]driver.Capability
	// Notifier delivers the outbox (E10, W7): a webhook, or GitHub's
	// commit statuses and pull-request comments; nil means none are sent
	// (they stay in the outbox, shown in the view).
	Notifier driver.Notifier
	// Worker names this process as a lease owner (E7).
	Worker string
	// ExclusiveStore says no other process can write an environment's
	// records while this one runs its actor: a lone warden holds Pebble's
	// lock; a cluster node owns the environment's shard, and every write of
	// another node is fenced out (C3). A lease owner other than Worker found
	// when the actor loads is then a process that can no longer commit (an
	// earlier incarnation, or the shard's previous owner), and its leases
	// end at once instead of at their expiry (issue 10, C5); its driver call
	// still in flight is refused by the lease generation (E7). False only
	// where another writer may be alive: a test's shared store.
	ExclusiveStore bool
	// NotifyBackoff is the first wait after a failed delivery, doubling
	// (zero means 30 seconds).
	NotifyBackoff time.Duration
	// ReconcileEvery is how often environments at rest are observed
	// (E14): zero means 30 seconds, negative never.
	ReconcileEvery time.Duration
	// Watcher, when set, says at once which environment's platform
	// changed under it (P13); that environment is observed then.
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

type environments = runtime.Entities[EnvRecord, environment.Event, environment.Outcome]
type envHandle = runtime.Handle[EnvRecord, environment.Event, environment.Outcome]

type envKind struct {
	runtime.Defaults[EnvRecord, environment.Event, environment.Outcome]
	sys  *System
	gen  *generations
	step EnvStep
}

// The kind's own messages (Signaled).
type (
	// envReconcile: the reconciler's turn (E14).
	envReconcile struct{}
	// envResend: a notification's next delivery attempt.
	envResend struct {
		n       environment.Notification
		attempt int
	}
)

func (envKind) Name() string     { return "environment" }
func (envKind) WakeKind() string { return persistence.KindEnvironment }

func (k envKind) Load(id string) (EnvRecord, bool, error) {
	r, err := loadEnv(k.sys.cfg.Store, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return EnvRecord{}, false, nil
	}
	return r, err == nil, err
}

func (k envKind) Stored(id string) (bool, error) { return k.sys.cfg.Store.Has(persistence.EnvKey(id)) }

// Step is the machine on the record. A create takes its first eligible
// transition in the same step, so that it reaches its first driver call
// after one commit and one mailbox crossing (issue 23: it was four
// crossings and three fsyncs).
func (k envKind) Step(rec EnvRecord, ev environment.Event, now time.Time) (EnvRecord, environment.Outcome) {
	m := k.sys.cfg.Env.Machine
	if c, ok := ev.(environment.Create); ok {
		e, rd := m.Create(c, now)
		if rd.Err != nil {
			return rec, rd
		}
		if e2, adv := k.step(e, environment.Advance{Owner: k.sys.cfg.Env.Worker}, now); adv.Err == nil && (adv.Changed || len(adv.Effects) > 0) {
			e, rd.Effects, rd.Wake = e2, adv.Effects, adv.Wake
		}
		return k.record(e, rd, now), rd
	}
	e, rd := k.step(rec.Env, ev, now)
	return k.record(e, rd, now), rd
}

// record is the durable record after a step. Its wake-index time is the
// step's wake; or now, on a store only this process writes, while an
// attempt is in flight: a process that starts after a crash takes its dead
// predecessor's attempts over at once (ExclusiveStore) rather than when
// their leases would have expired. A live process's timer is armed at the
// step's wake all the same.
func (k envKind) record(e environment.Env, rd environment.Outcome, now time.Time) EnvRecord {
	r := EnvRecord{Env: e, WakeAt: rd.Wake}
	if e.Attempt != nil && k.sys.cfg.Env.ExclusiveStore {
		r.WakeAt = now
	}
	return r
}

// Stage writes the record, and on one node, for a create, its branch's
// route generation (one key a generation, so creates of one branch
// committing in either order leave the newest readable; the one before
// goes).
func (k envKind) Stage(b persistence.Writer, id string, before, next EnvRecord, _ environment.Outcome) {
	b.Put(persistence.EnvKey(id), next)
	// On a cluster the branch's owner committed the generation already,
	// in its own shard (generations.durable): a batch writes one shard.
	if before.Env.ID == "" && k.sys.cfg.Cluster == nil {
		e := next.Env
		b.Set(persistence.BranchGenerationKey(e.Branch, e.Generation), nil)
		if e.Generation > 1 {
			b.Delete(persistence.BranchGenerationKey(e.Branch, e.Generation-1))
		}
	}
}

func (envKind) WakeOf(r EnvRecord) time.Time { return r.WakeAt }

// Prepare gives a create its branch's next route generation, inside the
// environment's mailbox, after the duplicate check: a create refused as a
// duplicate spends none (issue 10).
func (k envKind) Prepare(_ *envHandle, ev environment.Event) (environment.Event, error) {
	c, ok := ev.(environment.Create)
	if !ok {
		return ev, nil
	}
	g, err := k.gen.next(context.Background(), c.Branch)
	if err != nil {
		return nil, err
	}
	c.Generation = g
	return c, nil
}

func (envKind) Conflict(id string, _ EnvRecord) error {
	return fmt.Errorf("%w: environment %s already exists", environment.ErrConflict, id)
}

// Started ends the leases of owners that can no longer commit, fires what
// is due, and sends again what the outbox holds: the sender's retries are
// timers in memory, so after a restart they are gone (E10).
func (k envKind) Started(h *envHandle, _ bool) {
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

func (k envKind) Signaled(h *envHandle, v any) {
	switch m := v.(type) {
	case envReconcile:
		k.reconcile(h)
	case envResend:
		for _, n := range h.Record().Env.Outbox {
			if n.Key == m.n.Key && !n.Delivered {
				k.send(h, n, m.attempt)
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
	if !e.ExpiresAt.IsZero() && !h.Now().Before(e.ExpiresAt) && e.Desired == "ready" {
		h.Apply(environment.Expire{})
	}
	k.next(h)
}

// next asks for the next eligible transition, through the mailbox.
func (k envKind) next(h *envHandle) {
	e := h.Record().Env
	if !h.Exists() || e.Tombstone != nil {
		return
	}
	adv := environment.Advance{Owner: k.sys.cfg.Env.Worker}
	if e.ActivatesRouteNext() {
		// The branch's generations are durable before any is used (I14);
		// only activation needs the newest.
		newest, err := branchGeneration(k.sys.cfg.Store, e.Branch)
		if err != nil {
			k.sys.log.Warn("environment: branch generation unreadable", "environment", h.ID(), "err", err)
		}
		adv.BranchNewest = newest
	}
	h.Send(adv)
}

// reconcile observes an environment at rest, or a tombstone's leftovers
// (E14, I12): observation first, never a blind restart; each answer comes
// back as an AtRest event the machine judges (E15), stamped with the
// attempt it was asked under so that an answer outliving a repair is
// known stale (P14). Every link is observed, the end-to-end one through
// the host name too (P13). One that is not at rest, with nothing in
// flight, is asked for its next step.
func (k envKind) reconcile(h *envHandle) {
	e := h.Record().Env
	if !h.Exists() || e.Attempt != nil {
		return
	}
	if e.Tombstone == nil && (e.State != environment.Ready || e.Desired != "ready") {
		k.next(h)
		return
	}
	s, id, seq := k.sys, h.ID(), e.AttemptSeq
	observe := func(ctx context.Context, c environment.Capability) {
		drv := s.cfg.Env.Drivers[c]
		if drv == nil {
			return
		}
		req := driver.CapabilityRequest{Capability: string(c), Op: "observe", EnvID: id, Identity: e.Identity(c),
			Generation: e.Generation, Branch: e.Branch, Revision: e.Revision}
		out, err := drv.Do(ctx, req)
		if err != nil || out.Observation == nil {
			return // unknown is not drift; the next round looks again
		}
		o := out.Observation
		s.envs.Send(id, environment.AtRest{Capability: c, Seq: seq, Observation: environment.Observation{
			Exists: o.Exists, Owner: o.Owner, Matches: o.Matches, Replace: o.Replace, ProviderID: o.ProviderID, RouteTarget: o.RouteTarget,
			Detail: redactString(o.Detail, s.cfg.Secrets...)}})
	}
	// The serving links in order, route, application, then the request
	// through the host name, so the machine judges the end-to-end answer
	// knowing what the links said (P14): a failed smoke check behind a
	// route edited by hand is the route's drift, not the application's.
	serving := []environment.Capability{environment.Route, environment.App}
	if e.Tombstone == nil && e.SupersededBy == 0 {
		serving = append(serving, environment.Smoke) // a host name ours to check
	}
	h.Go(runtime.Effect{Run: func(ctx context.Context) {
		for _, c := range serving {
			observe(ctx, c)
		}
	}})
	for _, c := range []environment.Capability{environment.Database, environment.Migrations} {
		h.Go(runtime.Effect{Run: func(ctx context.Context) { observe(ctx, c) }})
	}
}

func (k envKind) Run(h *envHandle, next EnvRecord, rd environment.Outcome) {
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
// length while the call runs (E7); the result comes back as an event.
func (k envKind) do(h *envHandle, env environment.Env, e environment.Do) {
	s, id := k.sys, h.ID()
	req := driver.CapabilityRequest{Capability: string(e.Capability), Op: string(e.Op), EnvID: id, Identity: e.Identity,
		AttemptID: e.AttemptID, LeaseGeneration: e.LeaseGeneration, Generation: e.Generation, ExpectedRoute: e.ExpectedRoute,
		Branch: env.Branch, Revision: env.Revision, Epoch: h.Epoch()}
	drv := s.cfg.Env.Drivers[e.Capability]
	done := &atomic.Bool{}
	live := h.Go(runtime.Effect{Detail: req, Run: func(ctx context.Context) {
		defer done.Store(true)
		s.envs.Send(id, s.callCapability(ctx, drv, req))
	}})
	if leaseFor := s.cfg.Env.Machine.Config.LeaseFor; live && leaseFor > 0 {
		// A paused worker's renewals pause with it (the simulator says).
		s.renewWhile(id, environment.RenewLease{AttemptID: req.AttemptID, LeaseGeneration: req.LeaseGeneration}, leaseFor/3, done)
	}
}

// callCapability makes one driver call and says what it found. Receipts
// are kept and shown (E13, E17): a driver that echoes one of the process's
// secrets never gets it there.
func (s *System) callCapability(ctx context.Context, drv driver.Capability, req driver.CapabilityRequest) environment.Result {
	res := environment.Result{AttemptID: req.AttemptID, LeaseGeneration: req.LeaseGeneration}
	if drv == nil {
		res.Category, res.Message = environment.Configuration, "no driver configured for "+req.Capability
		return res
	}
	start := s.clock().Now()
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
		res.Category, res.Message = environment.Category(driver.KindOf(err)), redacted(err, secrets...).Error()
		if res.Category != environment.Configuration {
			res.Category = environment.Transient
		}
	default:
		res.OK, res.Category, res.Message = out.OK, environment.Category(out.Category), redactString(out.Message, secrets...)
		if o := out.Observation; o != nil {
			res.Observation = &environment.Observation{Exists: o.Exists, Owner: o.Owner, Matches: o.Matches, Replace: o.Replace,
				ProviderID: o.ProviderID, RouteTarget: o.RouteTarget, URL: previewURL(o.URL), Detail: redactString(o.Detail, secrets...)}
		}
	}
	return res
}

// renewWhile renews a lease every period while its driver call runs (E7):
// a slow effect must not look like a dead worker. The timers are the
// runtime's clock's, so the simulator runs them on its virtual clock like
// every other deadline; a renewal that races the call's end is refused by
// the machine as the lease it names is gone, harmlessly.
func (s *System) renewWhile(id string, renew environment.RenewLease, period time.Duration, done *atomic.Bool) {
	s.clock().AfterFunc(period, func() {
		if done.Load() || s.rt.Stopping() {
			return
		}
		s.envs.Send(id, renew)
		s.renewWhile(id, renew, period, done)
	})
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
// with back-off (NotifyBackoff doubling), never changing readiness (E10).
func (k envKind) send(h *envHandle, n environment.Notification, attempt int) {
	s, id := k.sys, h.ID()
	if s.cfg.Env.Notifier == nil {
		// Nowhere to send: nothing is tried or retried; the view says why
		// (O2) and the record stays in the outbox.
		return
	}
	h.Go(runtime.Effect{Run: func(ctx context.Context) {
		err := s.notify(ctx, n)
		d := environment.Delivered{Key: n.Key, OK: err == nil}
		if err != nil {
			d.Error = err.Error()
		}
		s.envs.Send(id, d)
		if err != nil && attempt+1 < MaxNotifyAttempts {
			s.clock().AfterFunc(s.cfg.Env.NotifyBackoff<<min(attempt, 10), func() {
				s.envs.Signal(id, envResend{n: n, attempt: attempt + 1})
			})
		}
	}})
}

// notify delivers one outbox record (E10) through the configured notifier;
// the error, secrets scrubbed, is kept on the record (O2).
func (s *System) notify(ctx context.Context, n environment.Notification) error {
	start := s.clock().Now()
	err := s.cfg.Env.Notifier.Notify(ctx, driver.Notification{Key: n.Key, Event: n.Event, URL: n.URL, EnvID: n.EnvID,
		Branch: n.Branch, Revision: n.Revision, Generation: n.Generation, Detail: n.Detail})
	s.observeDriver("notify", start, err)
	if err != nil {
		err = redacted(err, s.cfg.Secrets...)
		s.log.Info("notification not delivered", "environment", n.EnvID, "key", n.Key, "err", err)
	}
	return err
}

// Observe logs and counts every environment step (O11, O12), and, after
// one that did something with no attempt left in flight, asks for the
// next eligible transition.
func (k envKind) Observe(h *envHandle, ev environment.Event, before, next EnvRecord, rd environment.Outcome) {
	if rd.Err != nil || (!rd.Changed && len(rd.Effects) == 0) {
		return
	}
	k.observe(ev, before.Env, next.Env, rd)
	if _, advanced := ev.(environment.Advance); (!advanced || len(rd.Effects) == 0) && next.Env.Attempt == nil {
		k.next(h)
	}
}

func (k envKind) observe(ev environment.Event, b, n environment.Env, rd environment.Outcome) {
	m, log := k.sys.cfg.Metrics, k.sys.log
	ctx := context.Background()
	if b.State != n.State {
		m.EnvTransitions.WithLabelValues(string(n.State)).Inc()
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
	if log.Enabled(ctx, level) {
		log.LogAttrs(ctx, level, "environment transition", slog.String("environment", n.ID), slog.String("event", eventName(ev)),
			slog.String("state", fmt.Sprintf("%s -> %s", orNone(string(b.State)), n.State)), slog.String("desired", n.Desired),
			slog.Uint64("generation", n.Generation), slog.String("note", rd.Answer.Note))
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

// --- route generations, per branch, in order (E8, I14) ----------------------------

// generations gives out each branch's route generations in order. On one
// node a generation is given out in memory and made durable by the create
// that uses it, in its one batch (Stage); a create whose commit fails
// leaves a gap, which is harmless: only the order matters. On a cluster
// the branch's shard owner commits each before giving it out, under the
// branch's fence, since the create may commit on another node.
type generations struct {
	sys  *System
	mu   sync.Mutex
	last map[string]uint64
}

// branchKind names a branch's shard and its questions between nodes.
const branchKind = "branch"

func (g *generations) next(ctx context.Context, branch string) (uint64, error) {
	rt := g.sys.rt
	if g.sys.cfg.Cluster == nil {
		return g.inMemory(branch)
	}
	k := runtime.Key{Kind: branchKind, ID: branch}
	if rt.Owns(k) {
		return g.durable(branch)
	}
	ans, err := rt.AskRemote(ctx, k, []byte(`{}`))
	if err != nil {
		return 0, err
	}
	var a struct {
		Generation uint64 `json:"generation"`
	}
	if err := json.Unmarshal(ans, &a); err != nil || a.Generation == 0 {
		return 0, fmt.Errorf("%w: branch %s answered %q", ErrUnavailable, branch, ans)
	}
	return a.Generation, nil
}

func (g *generations) inMemory(branch string) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	last, ok := g.last[branch]
	if !ok {
		var err error
		if last, err = branchGeneration(g.sys.cfg.Store, branch); err != nil {
			return 0, fmt.Errorf("%w: branch %s: %v", ErrUnavailable, branch, err)
		}
	}
	g.last[branch] = last + 1
	return last + 1, nil
}

// durable gives out a cluster branch's next generation once it is
// committed under the branch's fence.
func (g *generations) durable(branch string) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.sys.cfg.Store
	last, err := branchGeneration(st, branch)
	if err != nil {
		return 0, fmt.Errorf("%w: branch %s: %v", ErrUnavailable, branch, err)
	}
	fence, err := g.sys.cfg.Cluster.Fence(g.sys.cfg.Cluster.Shard(branchKind, branch))
	if err != nil {
		return 0, err
	}
	b := st.NewBatch()
	b.Fence(fence)
	b.Set(persistence.BranchGenerationKey(branch, last+1), nil)
	if last > 0 {
		b.Delete(persistence.BranchGenerationKey(branch, last)) // the newest is the one kept
	}
	if err := b.Commit(); err != nil {
		return 0, fmt.Errorf("%w: branch %s: %v", ErrUnavailable, branch, err)
	}
	return last + 1, nil
}

// answer is the branch owner's side of next (runtime.HandleAsk).
func (g *generations) answer(_ context.Context, branch string, _ []byte) ([]byte, error) {
	n, err := g.durable(branch)
	if err != nil {
		return nil, err
	}
	return []byte(`{"generation":` + strconv.FormatUint(n, 10) + `}`), nil
}

// branchGeneration reads the newest route generation a branch gave out:
// the last of its keys, or the one key of the layout before them.
func branchGeneration(st *persistence.Store, branch string) (uint64, error) {
	var newest uint64
	prefix := persistence.BranchGenerationPrefix(branch)
	err := st.Scan(prefix, nil, func(k, _ []byte) (bool, error) {
		if g, ok := persistence.ParseBranchGeneration(prefix, k); ok {
			newest = max(newest, g)
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	var legacy uint64
	if err := st.Get(persistence.LegacyBranchKey(branch), &legacy); err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return 0, err
	}
	return max(newest, legacy), nil
}

// --- the record's codec -----------------------------------------------------------

// loadEnv reads one environment record; persistence.ErrNotFound or a
// *persistence.CorruptError.
func loadEnv(st *persistence.Store, id string) (EnvRecord, error) {
	var r EnvRecord
	key := persistence.EnvKey(id)
	if err := st.Get(key, &r); err != nil {
		return EnvRecord{}, err
	}
	if !environment.ValidID(r.Env.ID) || r.Env.ID != id {
		return EnvRecord{}, &persistence.CorruptError{Malformed: persistence.Malformed{Key: string(key), Reason: fmt.Sprintf("record names environment %q", r.Env.ID)}}
	}
	return r, nil
}

// listEnvs is one page of stored environments that keep accepts (nil:
// all; tombstones included, they are kept for leak audits, E12).
func listEnvs(st *persistence.Store, after string, limit, maxScan int, keep func(environment.Env) bool) ([]environment.Env, string, []persistence.Malformed, error) {
	return persistence.ListPage(st, persistence.EnvPrefix, after, limit, maxScan, func(k, v []byte) (environment.Env, error) {
		var r EnvRecord
		err := persistence.Decode(k, v, &r)
		return r.Env, err
	}, keep)
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
