package sim

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

var ruleRef = regexp.MustCompile(`\b([MAE][0-9]{1,2})\b`)

// hooks hand each kind's durable transitions on p to its oracle (right
// after the synced commit), and every actor failure to actorFailed. Steps
// that wrote nothing are judged only for pools: a repeated ask is A6's
// branch, and writes nothing. On a cluster every write is first checked
// against who held the entity's shard.
func (w *world) hooks(p *proc) actors.Hooks {
	return actors.Hooks{
		Marquee: func(c runtime.Committed[record.Marquee, marquee.Event, marquee.Outcome]) {
			if w.wrote(p, "marquee", c.ID, c.Wrote) {
				w.committed(c.Event, c.Before.State, c.After.State, c.Outcome)
			}
		},
		Pool: func(c runtime.Committed[record.Pool, admission.Event, admission.Outcome]) {
			w.wrote(p, "pool", c.ID, c.Wrote)
			w.poolCommitted(c.Event, c.Before.Pool, c.After.Pool, c.Outcome)
		},
		Env: func(c runtime.Committed[record.Environment, environment.Event, environment.Outcome]) {
			if w.wrote(p, "environment", c.ID, c.Wrote) {
				w.envCommitted(p, c.Event, c.Before.Env, c.After.Env, c.Outcome)
			}
		},
		Branch: func(c runtime.Committed[record.Branch, environment.NextGeneration, environment.BranchOutcome]) {
			if w.wrote(p, "branch", c.ID, c.Wrote) {
				w.branchCommitted(c.Event, c.Before.Branch, c.After.Branch)
			} else {
				w.branchToldAgain(c.Event, c.After.Branch)
			}
		},
		Failed: w.actorFailed,
	}
}

// wrote checks, after a step of p that wrote, that no disk fault that
// fired has been let through, and on a cluster that p held the entity's
// shard when it wrote.
func (w *world) wrote(p *proc, kind, id string, wrote bool) bool {
	switch {
	case !wrote:
	case p.node == nil:
		w.checkSealed()
	default:
		w.checkHolder(p, kind, id)
	}
	return wrote
}

// pendingRetries is how many internal events wait to be tried again, in
// every live process.
func (w *world) pendingRetries() int64 {
	var n int64
	for _, p := range w.procs {
		if p.sys != nil && (p.node == nil || !p.node.down) {
			n += p.sys.Load().Retries
		}
		if p.node != nil && !p.node.down {
			n += int64(p.node.cnode.InFlight()) // messages on their way to another node
		}
	}
	return n
}

// committed sees every durable marquee transition.
func (w *world) committed(ev marquee.Event, before, after marquee.State, out marquee.Outcome) {
	w.model[after.ID] = after
	if w.opts.observe != nil {
		w.opts.observe(w.machine, after, w.now())
	}
	for _, e := range out.Records {
		for _, m := range ruleRef.FindAllStringSubmatch(e.Detail, -1) {
			w.cover(m[1])
		}
	}
	switch e := ev.(type) {
	case marquee.Create:
		if e.Kind == marquee.BYO {
			w.cover("M4")
		}
	case marquee.Callback:
		if e.Generation == 0 {
			w.cover("M11")
		}
		if e.Verb == marquee.VerbFailed && out.Answer == marquee.Applied {
			w.cover("M15")
		}
		if out.Answer == marquee.Stale && out.Changed {
			w.violate("I6", "%s: a stale %s changed the state", after.ID, e.Verb)
		}
	case marquee.RetryDue, marquee.ProvisioningTimedOut, marquee.BootstrapRetryDue, marquee.NullExpired, marquee.ChatsRecheckDue:
		if w.crashes > 0 {
			w.cover("M23")
		}
	case marquee.AdmissionDecided:
		for _, eff := range out.Effects {
			if _, ok := eff.(marquee.StartDispatch); ok {
				w.cover("A2")
			}
		}
	}
	if before.Lifecycle != after.Lifecycle || before.Serving != after.Serving {
		w.cover("M1")
	}
	if before.Progress != after.Progress {
		w.cover("M2")
	}
	// I3: a live host with live reachable chats is never errored by a null
	// or failed callback.
	if before.Kind == marquee.Tutorial && before.Serving == marquee.Active && before.Lifecycle == marquee.Provisioned && after.Serving == marquee.Errored {
		if c := w.chats[after.ID]; c.Live >= 1 && c.Reachable >= 1 {
			w.violate("I3", "%s errored while it had %d live, %d reachable chats", after.ID, c.Live, c.Reachable)
		}
	}
	// I4: a single null never tears a provisioned marquee down.
	if before.Lifecycle == marquee.Provisioned && after.Lifecycle == marquee.Failed {
		byNull := false
		switch e := ev.(type) {
		case marquee.Callback:
			byNull = e.Verb == marquee.VerbNull
		case marquee.ChatsAnswered:
			byNull = before.Downgrade != nil && before.Downgrade.Verb == marquee.VerbNull
		}
		if byNull && !w.confirmedNull(after.ID) {
			w.violate("I4", "%s torn down by a null that was never confirmed", after.ID)
		}
	}
}

// confirmedNull reads the marquee's history (newest first) for a first null
// answered pending_confirmation since the last thing that cleared it.
func (w *world) confirmedNull(id string) bool {
	hist, err := record.History(w.store, id, record.HistoryLimit)
	if err != nil {
		return true
	}
	for i, e := range hist {
		if i == 0 {
			continue // the transition being judged
		}
		switch {
		case e.Verb == "null" && e.Result == marquee.PendingConfirmation:
			return true
		case e.Result == marquee.Applied && (e.Verb == "step" || e.Verb == "deployed" || e.Verb == "rebooted" || e.Verb == "redeploy" || e.Verb == "null_expired"),
			e.Source == marquee.SourceControlPlane && e.Result == marquee.Vetoed && strings.Contains(e.Detail, "vetoed"):
			return false
		}
	}
	return false
}

// poolCommitted sees every pool transition.
func (w *world) poolCommitted(ev admission.Event, before, after admission.Pool, out admission.Outcome) {
	w.pools[after.Name] = after
	if w.opts.observePool != nil {
		w.opts.observePool(after, w.now())
	}
	if a, ok := ev.(admission.Ask); ok && out.Err == nil && out.Answer.ID == a.Job && out.Answer.Status == admission.Queued && len(before.Reserved) >= before.Limit {
		w.cover("A1") // the limit itself turned a job away: the branch that is A1
	}
	if len(after.Reserved) > after.Limit {
		w.violate("I7", "pool %s holds %d reservations, limit %d", after.Name, len(after.Reserved), after.Limit)
	}
	reserve := func(job string, seq uint64) {
		if seq <= w.granted[after.Name] {
			w.violate("I8", "pool %s admitted %s (sequence %d) after sequence %d", after.Name, job, seq, w.granted[after.Name])
		}
		w.granted[after.Name] = seq
	}
	_, release := ev.(admission.Release)
	switch {
	case release:
		w.cover("A5")
	case len(out.Records) == 0 && out.Answer.Status != admission.Refused:
		w.cover("A3")
		w.cover("A6")
	default:
		w.cover("A3")
	}
	// The jobs this step admitted, in the order it tells them: each is a
	// record this step wrote as reserved.
	for _, j := range out.Records {
		if j.Status == admission.Reserved {
			if release {
				w.cover("A4")
			}
			reserve(j.ID, j.Sequence)
		}
	}
}

// check runs after every step, when the actors are quiet.
func (w *world) check() {
	for _, p := range w.procs {
		if p.sys != nil && p.sys.SentWhileObserving() > 0 {
			w.violate("C12", "%s sent a message while a step was observed: Observe sends nothing; a step's messages are its outcome's", p.name)
		}
	}
	for _, id := range sortedKeys(w.model) {
		s := w.model[id]
		if s.Tombstone == nil && s.Kind == marquee.Tutorial && s.Serving == marquee.Active {
			if s.Connection == nil || s.Connection.Host != hostFor(id, s.Generation) {
				host := "none"
				if s.Connection != nil {
					host = s.Connection.Host
				}
				w.violate("I1", "%s is active at generation %d with host %s", id, s.Generation, host)
			}
		}
	}
	for _, name := range sortedKeys(w.pools) {
		p := w.pools[name]
		seen := map[string]bool{}
		for _, j := range append(append([]admission.Job(nil), p.Reserved...), p.Queued...) {
			if seen[j.ID] {
				w.violate("I9", "%s holds two places in pool %s", j.ID, name)
			}
			seen[j.ID] = true
		}
		for _, j := range p.Reserved {
			if w.pendingRetries() > 0 {
				break // a release may be waiting for its write to be retried
			}
			if s, ok := w.model[j.ID]; ok && (s.Tombstone != nil || s.Lifecycle.Settled()) && s.Admission == nil {
				w.leaked(name, j.ID, s.Lifecycle)
			} else {
				delete(w.leaks, name+"/"+j.ID)
			}
		}
	}
}

// leaked: a settled marquee holds a slot (I9). On a single node that is a
// violation at once. On a cluster the release may have been lost with a
// node that died before delivering it; the pool reconciles its jobs every
// PoolReconcileEvery, so the slot must be free within that and the time
// for the shard to move.
func (w *world) leaked(pool, job string, lc marquee.Lifecycle) {
	key := pool + "/" + job
	since, seen := w.leaks[key]
	if !seen {
		since = w.now()
		w.leaks[key] = since
	}
	if w.p == nil && w.now().Sub(since) <= actors.PoolReconcileEvery+time.Minute {
		return
	}
	w.violate("I9", "settled %s (%s) holds a slot in pool %s (since %s)", job, lc, pool, w.now().Sub(since))
}

// checkApplied: every callback answered applied is still durable after a
// crash (I5). It runs first after a restart, before anything else reads
// the store: a lost acknowledgement is the deeper fault of the two a store
// that dropped writes shows (I15 would see its failed write's
// neighbours gone too).
func (w *world) checkApplied() {
	kept := w.now().Add(-simRetention)
	type read struct {
		ds  persistence.Deliveries
		err error
	}
	reads := map[string]read{} // a marquee's deliveries, read once a check: nothing writes meanwhile
	for _, d := range w.applied {
		if d.at.Before(kept) {
			continue // its retention is over: pruned, rightly
		}
		r, ok := reads[d.marquee]
		if !ok {
			r.ds, r.err = record.MarqueeDeliveries(w.store, d.marquee)
			reads[d.marquee] = r
		}
		ds, err := r.ds, r.err
		if _, ok := ds.Find(d.delivery); ok || err != nil && !errors.Is(err, persistence.ErrNotFound) {
			continue // a record that does not read is D6's, at the end
		}
		// A record full of deliveries no older than this one's second
		// dropped it for them (M20's bound); anything else lost it. Full
		// is more than MaxDeliveries less a chunk: the oldest chunk goes
		// whole when a new one starts past the bound.
		if len(ds) > persistence.MaxDeliveries-persistence.ChunkLen && !d.at.Truncate(time.Second).After(ds[0].At) {
			continue
		}
		oldest := "none"
		if len(ds) > 0 {
			oldest = ds[0].At.Sub(epoch).String()
		}
		w.violate("I5", "delivery %s of %s was answered applied at %s and is lost after the crash (its record keeps %d deliveries, the oldest of %s)",
			d.delivery, d.marquee, d.at.Sub(epoch), len(ds), oldest)
	}
}

// landedUnseen takes into the oracles' view the records a transaction
// wrote whose answer its node never had (C14): its actor learns them only
// when it reads its entity again, and no commit hook shows them.
func (w *world) landedUnseen(ops []persistence.KVOp) {
	for _, op := range ops {
		key := strings.TrimPrefix(op.Key, persistence.DataPrefix)
		switch {
		case strings.HasPrefix(key, persistence.AdmissionFamily):
			// A release deletes its job's record: a pool is rebuilt from
			// what its jobs' records say now.
			name, _, _ := strings.Cut(key[len(persistence.AdmissionFamily):], "/")
			if old, ok := w.pools[name]; ok {
				if p, _, err := record.RebuildPool(w.store, name, old.Limit); err == nil {
					w.pools[name] = p
				}
			}
		case op.Delete:
		case strings.HasPrefix(key, persistence.MarqueePrefix):
			if rec, err := record.LoadMarquee(w.store, nil, key[len(persistence.MarqueePrefix):]); err == nil {
				w.model[rec.State.ID] = rec.State
			}
		case strings.HasPrefix(key, persistence.EnvPrefix):
			if rec, err := record.LoadEnvironment(w.store, key[len(persistence.EnvPrefix):]); err == nil {
				w.envs[rec.Env.ID] = rec.Env
			}
		}
	}
}

// afterRestart rebuilds the oracles' view from storage and checks what
// must survive a crash: applied callbacks and answered admissions
// (I10).
func (w *world) afterRestart() {
	w.model = map[string]marquee.State{}
	for _, id := range w.ids {
		rec, err := record.LoadMarquee(w.store, nil, id)
		if err == nil {
			w.model[id] = rec.State
		} else if !errors.Is(err, persistence.ErrNotFound) {
			w.violate("A8", "snapshot of %s unusable after restart: %v", id, err)
		}
	}
	view, err := w.p.sys.Pool(context.Background(), "default")
	if err != nil {
		w.violate("A7", "pool not recovered: %v", err)
		return
	}
	w.cover("A7")
	if len(view.Malformed) > 0 {
		w.cover("A8")
		w.cover("A9")
	}
	p := admission.Pool{Name: view.Name, Limit: view.Limit}
	for _, j := range view.Reserved {
		p.Reserved = append(p.Reserved, admission.Job{ID: j.Job, Sequence: j.Sequence, Status: admission.Reserved})
	}
	for _, j := range view.Queued {
		p.Queued = append(p.Queued, admission.Job{ID: j.Job, Sequence: j.Sequence, Status: admission.Queued})
	}
	w.pools[p.Name] = p
	w.logf("recovered pool: reserved=%v queued=%v malformed=%d", jobIDs(p.Reserved), jobIDs(p.Queued), len(view.Malformed))

	for _, id := range sortedKeys(w.created) {
		s, ok := w.model[id]
		if !ok {
			w.violate("I10", "%s was answered 201 and is gone after the crash", id)
			continue
		}
		if s.Admission != nil && s.Admission.Status != marquee.AdmissionAsking {
			if p.Lookup(id).Status == admission.None {
				w.violate("I10", "%s holds admission %s but pool default lost it", id, s.Admission.Status)
			}
		}
	}
}

func jobIDs(js []admission.Job) []string {
	out := make([]string, 0, len(js))
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// checkStore runs warden verify's checks (D6) on the store the run left:
// whatever the faults did, every record decodes and the invariants across
// records hold. The records the malformed-record fault planted are the
// only decode problems allowed.
func (w *world) checkStore() {
	rep, err := actors.Verify(w.store, actors.VerifyOptions{Machine: w.machine, EnvMachine: environment.Machine{Config: environment.DefaultConfig()},
		Pools: map[string]int{"default": 2}, Now: w.now()})
	if err != nil {
		w.violate("D6", "verify: %v", err)
		return
	}
	for _, p := range rep.Problems {
		if p.Check == actors.CheckDecode && strings.Contains(p.Key, "/zz-malformed-") {
			continue
		}
		inv := "D6"
		if p.Check == actors.CheckHistory {
			inv = "S14" // the history is not a true account of the record
		}
		w.violate(inv, "%s %s: %s", p.Check, p.Key, p.Detail)
		return
	}
	w.cover("D6")
	w.checkRetention()
}

// checkRetention: an entity's deliveries record keeps at most
// persistence.MaxDeliveries, none older than the retention before its
// newest (it drops them when it is written, M20), and nothing is left in
// the layout before it (the simulator never writes one).
func (w *world) checkRetention() {
	var sc persistence.DeliveriesScan
	for _, id := range w.ids {
		if rec, err := record.MarqueeDeliveriesInRecord(w.store, id); err == nil {
			sc.Recent(id, rec)
		}
	}
	check := func(e persistence.EntityDeliveries) error {
		ds := e.Deliveries
		switch {
		case e.Err != nil:
			return e.Err
		case ds.KeptPast(simRetention):
			w.violate("M20", "deliveries of %s keep one of %s, past its retention of %s before their newest (%s)", e.Entity, ds[0].At.Format(time.RFC3339), simRetention, ds[len(ds)-1].At.Format(time.RFC3339))
		}
		return nil
	}
	err := w.store.Scan([]byte(persistence.DeliveriesFamily), nil, func(k, v []byte) (bool, error) {
		if e, ok := sc.Add(k, v); ok {
			return true, check(e)
		}
		return true, nil
	})
	if e, ok := sc.End(); ok && err == nil {
		err = check(e)
	}
	for _, e := range sc.Unscanned() {
		if err == nil {
			err = check(e)
		}
	}
	if err == nil {
		err = w.store.Scan([]byte(persistence.DedupFamily), nil, func(k, _ []byte) (bool, error) {
			return false, fmt.Errorf("a record of the layout before r/: %s", k)
		})
	}
	if err != nil {
		w.violate("D6", "scan delivery records: %v", err)
	}
}
