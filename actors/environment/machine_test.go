package environment_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/entity"
	. "github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestMachine runs the golden scripts in testdata/; each case names its
// rule. Commands:
//
//	create id= branch= revision= [data=] [ttl-hours=] [sleep-after-minutes=] [owner=]   owner: the creating process
//	advance [owner=]                      the next eligible transition
//	ok | timeout | failed category= msg=  the effect's answer for the attempt
//	observe [exists] [owner=] [matches] [replace] [at-waker] [stopped] [route=N] [detail=]
//	stale attempt= lease=                 a result from an old attempt or lease
//	renew                                 renew the current lease
//	remove reason= | expire
//	at-rest cap= [exists] [owner=] [matches] [at-waker] [stopped] [route=N] [provider=] [seq=N]
//	traffic [minutes-ago=]                the proxy's last request (none: never)
//	visited                               a request to a sleeping preview's host
//	sleeps                                previews may sleep (a waker)
//	action name= actor= reason=
//	delivered key= [ok]
//	own-artifacts                         removal removes the artifact (P9)
//	advance-time minutes=
//	run                                   advance with every step succeeding until nothing is eligible
func TestMachine(t *testing.T) { walkGoldens(t, nil) }

// walkGoldens runs the golden scripts, and shows seen, if set, each
// environment state they reach.
func walkGoldens(t *testing.T, seen func(t *testing.T, pos string, m Machine, e Env, now time.Time)) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		m := Machine{Config: DefaultConfig()}
		var e Env
		var rec record.Environment // as the runtime would hold it (write: lines)
		now := epoch
		run := func(t *testing.T, d *datadriven.TestData) string {
			arg := func(k, def string) string {
				if a, ok := d.Arg(k); ok {
					if len(a.Vals) == 0 {
						return "true"
					}
					return a.Vals[0]
				}
				return def
			}
			num := func(k string) uint64 {
				var v uint64
				fmt.Sscan(arg(k, "0"), &v)
				return v
			}
			show := func(next Env, out Outcome) string {
				if out.Err != nil {
					return entity.Format(out, now) + "write: none\n"
				}
				e = next
				var write string
				rec, write = written(rec, e, out, now)
				return entity.Format(out, now) + "write: " + write + "\n" + "state: " + describe(e, m) + "\n"
			}
			step := func(ev Event) string { return show(m.Step(e, ev, now)) }
			// newest is the branch's newest generation as the shell reads
			// it with a result, an observation at rest or an action: this
			// preview's own unless the case says a newer one was given out.
			newest := func() uint64 { return max(num("newest"), e.Generation) }
			cur := func() (string, uint64) {
				if e.Attempt == nil {
					return "none", 0
				}
				return e.Attempt.ID, e.Attempt.Lease.Generation
			}
			switch d.Cmd {
			case "create":
				rec = record.Environment{}
				mm := m // the process that creates it owns its first attempt
				if o := arg("owner", ""); o != "" {
					mm.Config.Worker = o
				}
				gen := uint64(1) // given by the branch already, unless the case says gen=0: then it asks
				if d.HasArg("gen") {
					gen = num("gen")
				}
				return show(mm.Create(Create{ID: arg("id", "env-271"), Branch: arg("branch", "feature-search"), Revision: arg("revision", "3f2c9e1"),
					Data: DataPolicy(arg("data", "")), TTL: time.Duration(num("ttl-hours")) * time.Hour, Generation: gen,
					SleepAfter: time.Duration(num("sleep-after-minutes")) * time.Minute}, now))
			case "given":
				return step(GenerationGiven{Generation: num("generation")})
			case "advance":
				return step(Advance{Owner: arg("owner", "worker-a"), BranchNewest: num("newest")})
			case "ok", "timeout", "failed":
				id, lg := cur()
				return step(DriverAnswer{AttemptID: id, LeaseGeneration: lg, OK: d.Cmd == "ok", Timeout: d.Cmd == "timeout",
					Category: Category(arg("category", "")), Message: arg("msg", ""), BranchNewest: newest()})
			case "observe":
				id, lg := cur()
				return step(DriverAnswer{AttemptID: id, LeaseGeneration: lg, OK: true, BranchNewest: newest(), Observation: &Observation{Exists: d.HasArg("exists"),
					Owner: arg("owner", e.ID), Matches: d.HasArg("matches"), RouteTarget: num("route"), Detail: arg("detail", ""), ProviderID: arg("provider", ""),
					Replace: d.HasArg("replace"), AtWaker: d.HasArg("at-waker"), Stopped: d.HasArg("stopped")}})
			case "stale":
				return step(DriverAnswer{AttemptID: arg("attempt", ""), LeaseGeneration: num("lease"), OK: true})
			case "owner-gone":
				return step(OwnerGone{Owner: arg("owner", "")})
			case "renew":
				id, lg := cur()
				return step(RenewLease{AttemptID: id, LeaseGeneration: lg})
			case "remove":
				return step(RemoveEnv{Reason: arg("reason", "branch merged")})
			case "expire":
				return step(Expire{})
			case "at-rest":
				seq := e.AttemptSeq // taken now, unless the case says when
				if d.HasArg("seq") {
					seq = num("seq")
				}
				return step(AtRest{Capability: Capability(arg("cap", "")), Seq: seq, BranchNewest: newest(), Observation: Observation{Exists: d.HasArg("exists"),
					Owner: arg("owner", e.ID), Matches: d.HasArg("matches"), RouteTarget: num("route"), ProviderID: arg("provider", ""), Detail: arg("detail", ""),
					AtWaker: d.HasArg("at-waker"), Stopped: d.HasArg("stopped")}})
			case "traffic":
				// The proxy's word: the last request minutes ago (none: never).
				var last time.Time
				if d.HasArg("minutes-ago") {
					last = now.Add(-time.Duration(num("minutes-ago")) * time.Minute)
				}
				return step(Traffic{LastRequest: last})
			case "visited":
				return step(Visited{At: now})
			case "action":
				return step(Action{Name: arg("name", ""), Actor: arg("actor", ""), Reason: arg("reason", ""), BranchNewest: newest()})
			case "delivered":
				return step(Delivered{Key: arg("key", ""), OK: d.HasArg("ok")})
			case "status":
				// O1: what it is doing and why, and warden's next step.
				st := m.Status(e, now)
				var b strings.Builder
				fmt.Fprintf(&b, "status: %s\n", st.Text)
				if st.Next != nil {
					fmt.Fprintf(&b, "next: +%s %s\n", st.Next.At.Sub(now), st.Next.What)
				}
				if len(st.Classes) > 0 {
					fmt.Fprintf(&b, "classes: %s\n", strings.Join(st.Classes, " "))
				}
				return b.String()
			case "sleeps":
				// E19: the platform has a waker; previews may sleep.
				m.Config.Sleeps = true
				return "previews may sleep\n"
			case "own-artifacts":
				// P9: the platform's artifacts are each environment's own.
				m.Config.RemoveArtifacts = true
				return "removal removes the artifact\n"
			case "advance-time":
				now = now.Add(time.Duration(num("minutes")) * time.Minute)
				return fmt.Sprintf("now +%s\n", now.Sub(epoch))
			case "run":
				// The steps are summarized; the record still follows them.
				runStep := func(ev Event) (Env, Outcome) {
					next, out := m.Step(e, ev, now)
					rec, _ = written(rec, next, out, now)
					return next, out
				}
				var b strings.Builder
				// drive answers every driver call the step asked for, in a
				// world where every effect does what it was asked, until the
				// walk stops for want of an effect; a step that ends one
				// transition may begin the next (one commit per boundary).
				drive := func(out Outcome) {
					for calls := 0; calls < 200; calls++ {
						var do Do
						found := false
						var other []Effect
						for _, ef := range out.Effects {
							if d, ok := ef.(Do); ok && !found {
								do, found = d, true
								continue
							}
							other = append(other, ef)
						}
						if len(other) > 0 {
							fmt.Fprintf(&b, "  effects:%s\n", effects(other))
						}
						if !found || e.Attempt == nil {
							return
						}
						var r DriverAnswer
						if do.Op == Observe || e.Attempt.Verifying {
							obs := &Observation{Exists: e.Attempt.Op != Remove && e.Attempt.From != DataRemoved, Owner: e.ID, Matches: true, RouteTarget: e.Generation,
								ProviderID: "p-" + do.Identity, AtWaker: e.Attempt.Op == Sleep && do.Capability == Route, Stopped: e.Attempt.Op == Sleep && do.Capability == App}
							r = DriverAnswer{AttemptID: do.AttemptID, LeaseGeneration: do.LeaseGeneration, OK: true, Observation: obs, BranchNewest: e.Generation}
						} else {
							r = DriverAnswer{AttemptID: do.AttemptID, LeaseGeneration: do.LeaseGeneration, OK: true, BranchNewest: e.Generation}
						}
						fmt.Fprintf(&b, "%s %s %s\n", do.Op, do.Capability, do.Identity)
						state := e.State
						e, out = runStep(r)
						if e.State != state {
							fmt.Fprintf(&b, "  -> %s\n", e.State)
						}
					}
				}
				for i := 0; i < 40; i++ {
					if u := arg("until", ""); string(e.State) == u && e.Attempt == nil {
						fmt.Fprintf(&b, "stopped at %s\n", u)
						break
					}
					if e.Attempt != nil { // the walk goes on from an attempt begun before
						drive(Outcome{Effects: []Effect{Do{AttemptID: e.Attempt.ID, LeaseGeneration: e.Attempt.Lease.Generation, Capability: e.Attempt.Capability,
							Op: map[bool]Op{true: Observe, false: e.Attempt.Op}[e.Attempt.Verifying], Identity: e.Attempt.Identity}}})
						continue
					}
					state := e.State
					next, out := runStep(Advance{Owner: "worker-a", BranchNewest: e.Generation})
					if len(out.Effects) == 0 && out.Changed {
						e = next // a step satisfied without an effect
						fmt.Fprintf(&b, "%s\n  -> %s\n", out.Answer.Note, e.State)
						continue
					}
					if len(out.Effects) == 0 {
						e = next
						fmt.Fprintf(&b, "rest: %s\n", out.Answer.Note)
						break
					}
					e = next
					if e.State != state {
						fmt.Fprintf(&b, "  -> %s\n", e.State)
					}
					drive(out)
				}
				return b.String() + "state: " + describe(e, m) + "\n"
			}
			t.Fatalf("unknown command %s", d.Cmd)
			return ""
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := run(t, d)
			if seen != nil && e.ID != "" {
				seen(t, d.Pos, m, e.Clone(), now)
			}
			return out
		})
	})
}

// written is the record after a step, as the runtime would hold it on a
// shared store, and what its one batch holds for the step (the write:
// line). A refused step changes nothing.
func written(before record.Environment, e Env, out Outcome, now time.Time) (record.Environment, string) {
	if out.Err != nil {
		return before, "none"
	}
	next := record.NextEnvironment(e, out, now, false)
	return next, runtime.DescribeWrite(record.EnvironmentWrites{}, e.ID, before, next, out, "")
}

func effects(es []Effect) string {
	var b strings.Builder
	for _, ef := range es {
		fmt.Fprintf(&b, " %v", ef)
	}
	return b.String()
}

func describe(e Env, m Machine) string {
	var parts []string
	parts = append(parts, string(e.State), "desired="+e.Desired)
	if a := e.Attempt; a != nil {
		parts = append(parts, fmt.Sprintf("attempt=%s(%s %s, lease %s/%d, verifying=%t)", a.ID, a.Op, a.Capability, a.Lease.Owner, a.Lease.Generation, a.Verifying))
	}
	if f := e.LastFailure; f != nil {
		parts = append(parts, fmt.Sprintf("failure=%s/%s retryable=%t", f.Category, f.Needs, f.Retryable))
	}
	var present []string
	for _, r := range e.Resources {
		if r.Status == "present" {
			present = append(present, r.Identity)
		}
	}
	if len(present) > 0 {
		parts = append(parts, "present=["+strings.Join(present, " ")+"]")
	}
	if e.SupersededBy > 0 {
		parts = append(parts, fmt.Sprintf("superseded-by=%d", e.SupersededBy))
	}
	for _, n := range e.Outbox {
		parts = append(parts, fmt.Sprintf("outbox=%s(delivered=%t)", n.Key, n.Delivered))
	}
	for _, d := range e.Drift {
		resolved := ""
		if !d.ResolvedAt.IsZero() {
			resolved = ",resolved" // O2
		}
		parts = append(parts, fmt.Sprintf("drift=%s[%s%s]", d.Identity, d.Outcome, resolved))
	}
	if e.Tombstone != nil {
		parts = append(parts, "TOMBSTONE("+e.Tombstone.Reason+")")
	}
	if acts := m.Actions(e); len(acts) > 0 {
		parts = append(parts, "actions="+strings.Join(acts, ","))
	}
	return strings.Join(parts, " ")
}

// newEnv is a default machine and a new environment env-1 on main.
func newEnv(t *testing.T, now time.Time) (Machine, Env) {
	t.Helper()
	m := Machine{Config: DefaultConfig()}
	e, err := m.New(Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	return m, e
}

// TestChangedReportsRealChangesOnly: the shell skips the write when nothing
// changed, so Changed must be false for a step that only notes why it waits
// and true for one that moves the record; UpdatedAt moves only with it.
func TestChangedReportsRealChangesOnly(t *testing.T) {
	m, e := newEnv(t, epoch)
	e, out := m.Step(e, Advance{Owner: "w"}, epoch.Add(time.Second))
	if !out.Changed || !e.UpdatedAt.Equal(epoch.Add(time.Second)) {
		t.Fatalf("starting an attempt is a change: %+v", out)
	}
	next, out := m.Step(e, Advance{Owner: "w2"}, epoch.Add(2*time.Second)) // leased: nothing to do
	if out.Changed || !next.UpdatedAt.Equal(e.UpdatedAt) {
		t.Fatalf("waiting on a lease is not a change: %+v", out)
	}
}

// TestWakeFollowsTheLeaseNotASpentBackoff: found by the simulator (seed
// 243). After a transient failure the retry attempt started, but the wake
// stayed at the spent back-off: a restart woke the environment at once, found
// the attempt leased, and never armed the lease's expiry, so a crash after
// the intent (I11) left the attempt unfinished forever (E7).
func TestWakeFollowsTheLeaseNotASpentBackoff(t *testing.T) {
	now := epoch
	m, e := newEnv(t, now)
	if got := m.Wake(e); !got.Equal(now) {
		t.Fatalf("a new environment is due at once (its first transition is eligible), wake %v", got)
	}
	e, _ = m.Step(e, Advance{Owner: "w"}, now)
	e, _ = m.Step(e, DriverAnswer{AttemptID: e.Attempt.ID, LeaseGeneration: e.Attempt.Lease.Generation, Category: Transient, Message: "503"}, now)
	if got := m.Wake(e); !got.Equal(e.RetryAt) {
		t.Fatalf("after a transient failure the wake is the back-off's end %v, got %v", e.RetryAt, got)
	}
	now = e.RetryAt
	e, _ = m.Step(e, Advance{Owner: "w"}, now)
	if e.Attempt == nil {
		t.Fatal("the retry attempt started")
	}
	if got := m.Wake(e); !got.Equal(e.Attempt.Lease.ExpiresAt) {
		t.Fatalf("with an attempt in flight the wake is its lease expiry %v, got %v", e.Attempt.Lease.ExpiresAt, got)
	}
	e, _ = m.Step(e, DriverAnswer{AttemptID: e.Attempt.ID, LeaseGeneration: e.Attempt.Lease.Generation, Category: Configuration, Message: "bad"}, now)
	if got := m.Wake(e); !got.IsZero() {
		t.Fatalf("a failure needing new input wakes nothing, got %v", got)
	}
}

// TestRecordStaysBounded: a preview repaired again and again keeps at most
// MaxReceipts receipts, MaxAudit audit entries and MaxDrift drift records,
// dropping the oldest (and never a drift still waiting for an operator),
// and counts what it dropped (E1: a durable record, bounded).
func TestRecordStaysBounded(t *testing.T) {
	now := epoch
	m, e := newEnv(t, now)
	ready := func() {
		e = walk(m, e, now, func(Do) *Observation {
			return &Observation{Exists: true, Owner: e.ID, Matches: true, RouteTarget: e.Generation}
		})
	}
	ready()
	for i := 0; i < 60; i++ { // a killed application, repaired, 60 times
		now = now.Add(time.Minute)
		e, _ = m.Step(e, AtRest{Capability: App, Seq: e.AttemptSeq, Observation: Observation{}}, now)
		ready()
	}
	e, _ = m.Step(e, AtRest{Capability: Database, Seq: e.AttemptSeq, Observation: Observation{Exists: true, Owner: "env-9"}}, now)
	if len(e.Receipts) != MaxReceipts || len(e.Drift) > MaxDrift || e.Trimmed == 0 {
		t.Fatalf("receipts %d (max %d), drift %d (max %d), trimmed %d", len(e.Receipts), MaxReceipts, len(e.Drift), MaxDrift, e.Trimmed)
	}
	if last := e.Drift[len(e.Drift)-1]; last.Identity != "db-env-1" || last.Outcome != "" {
		t.Fatalf("the open drift is kept: %+v", last)
	}
}

// TestW8PreviewURL: the URL a readiness notification carries comes from
// the configured template, or else from what the route driver observed;
// never from an example host.
func TestW8PreviewURL(t *testing.T) {
	e := Env{ID: "env-7", Branch: "feature-search", Generation: 3}
	m := Machine{Config: DefaultConfig()}
	if got := m.URLOf(e); got != "" {
		t.Fatalf("no template and no observation: no URL, got %q", got)
	}
	e.URL = "http://127.0.0.1:4100/"
	if got := m.URLOf(e); got != e.URL {
		t.Fatalf("the route driver's observation: got %q", got)
	}
	m.Config.PreviewURL = "https://{branch}.preview.acme.dev/{id}?g={generation}"
	if got := m.URLOf(e); got != "https://feature-search.preview.acme.dev/env-7?g=3" {
		t.Fatalf("template: got %q", got)
	}
}

// TestBranchGenerationsOnlyGoUp: each step gives out the next generation,
// durable before it is answered (E8, I14).
func TestBranchGenerationsOnlyGoUp(t *testing.T) {
	b := Branch{Name: "main"}
	for want := uint64(1); want <= 3; want++ {
		var rd BranchOutcome
		b, rd = StepBranch(b, NextGeneration{For: fmt.Sprintf("env-%d", want)}, epoch)
		require.Equal(t, want, rd.Answer)
		require.True(t, rd.Writes(), "a generation is written before it is given out")
	}
}

// TestE8ABranchAskedAgainGivesTheSameGeneration: a preview whose actor
// restarted before its branch's answer came asks again and is told the
// generation it was given, writing nothing; a newer one would make it
// look superseded by a sibling that does not exist. The
// memory is bounded: past RecentGivings later givings, a new one.
func TestE8ABranchAskedAgainGivesTheSameGeneration(t *testing.T) {
	b := Branch{Name: "main"}
	b, first := StepBranch(b, NextGeneration{For: "env-1"}, epoch)
	b, _ = StepBranch(b, NextGeneration{For: "env-2"}, epoch)
	b, again := StepBranch(b, NextGeneration{For: "env-1"}, epoch)
	require.Equal(t, first.Answer, again.Answer)
	require.False(t, again.Writes())
	require.Equal(t, []Give{{Env: "env-1", Generation: 1}}, again.Effects, "told again")
	for i := range RecentGivings {
		b, _ = StepBranch(b, NextGeneration{For: fmt.Sprintf("other-%d", i)}, epoch)
	}
	require.Len(t, b.Recent, RecentGivings)
	_, late := StepBranch(b, NextGeneration{For: "env-1"}, epoch)
	require.Equal(t, uint64(RecentGivings+3), late.Answer, "forgotten: a new generation, only a number spent")
}

// TestReceiptSaysWhichCallVerifiedTheStep: an apply step is verified by an
// observe; the receipt says so, so its recorded request (an observe) no
// longer contradicts its op.
func TestReceiptSaysWhichCallVerifiedTheStep(t *testing.T) {
	m := Machine{Config: DefaultConfig()}
	e, out := m.Create(Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1}, epoch)
	require.NoError(t, out.Err)
	do := out.Effects[0].(Do) // the create began the first transition
	require.Equal(t, Apply, do.Op)
	e, out = m.Step(e, DriverAnswer{AttemptID: do.AttemptID, LeaseGeneration: do.LeaseGeneration, OK: true}, epoch)
	obs := out.Effects[0].(Do)
	require.Equal(t, Observe, obs.Op)
	e, _ = m.Step(e, DriverAnswer{AttemptID: obs.AttemptID, LeaseGeneration: obs.LeaseGeneration, OK: true, Input: `{"op":"observe"}`,
		Observation: &Observation{Exists: true, Owner: "env-1", Matches: true}}, epoch)
	r := e.Receipts[0]
	require.Equal(t, Apply, r.Op, "the step")
	require.Equal(t, Observe, r.VerifiedBy, "the call recorded in Input")
	require.Equal(t, `{"op":"observe"}`, r.Input)
}

// TestP14ARepairTheSmokeCheckKeepsFindingUndoneBacksOff: an application
// that dies again each time it is started is reprovisioned automatically
// at most three times in one walk; then the smoke check's finding is a
// failure that backs off (E9), never a loop of repairs.
func TestP14ARepairTheSmokeCheckKeepsFindingUndoneBacksOff(t *testing.T) {
	now := epoch
	m, e := newEnv(t, now)
	// walk advances with every effect verified, except that the smoke
	// check finds our route answering and nothing behind it.
	e = walk(m, e, now, func(d Do) *Observation {
		obs := &Observation{Exists: true, Owner: e.ID, Matches: true, RouteTarget: e.Generation}
		if d.Capability == Smoke {
			obs.Exists, obs.Matches = false, false
		}
		return obs
	})
	if e.LastFailure == nil || e.LastFailure.Category != Transient || !e.LastFailure.Retryable {
		t.Fatalf("after the repairs, a retryable failure: %+v (state %s)", e.LastFailure, e.State)
	}
	repairs := 0
	for _, d := range e.Drift {
		if d.Capability == App && d.Outcome == "auto-repair" {
			repairs++
		}
	}
	if repairs != 3 || e.RetryAt.IsZero() {
		t.Fatalf("%d automatic repairs (want 3), retry at %v: %+v", repairs, e.RetryAt, e.Drift)
	}
}

// walk drives an environment until it is ready, waits for an operator or
// backs off: the attempt in flight is answered first, then the next is
// asked for; every effect does what it was asked, its observation given by
// observe. A step that ends a transition may begin the next (one commit
// per state boundary).
func walk(m Machine, e Env, now time.Time, observe func(Do) *Observation) Env {
	for i := 0; i < 200 && e.State != Ready && e.LastFailure == nil; i++ {
		var out Outcome
		if e.Attempt == nil {
			if e, out = m.Step(e, Advance{Owner: "w", BranchNewest: e.Generation}, now); len(out.Effects) == 0 {
				return e
			}
		}
		a := e.Attempt
		d := Do{AttemptID: a.ID, LeaseGeneration: a.Lease.Generation, Capability: a.Capability, Op: a.Op, Identity: a.Identity, Generation: e.Generation}
		r := DriverAnswer{AttemptID: a.ID, LeaseGeneration: a.Lease.Generation, OK: true, BranchNewest: e.Generation}
		if a.Verifying {
			d.Op, r.Observation = Observe, observe(d)
		}
		e, _ = m.Step(e, r, now)
	}
	return e
}

// TestE19APlatformWithoutAWakerRefusesSleepAfter: a preview may be asked to
// sleep only where the platform can put it to sleep and wake it; elsewhere
// the create is refused, saying why, and nothing is recorded.
func TestE19APlatformWithoutAWakerRefusesSleepAfter(t *testing.T) {
	m := Machine{Config: DefaultConfig()}
	_, out := m.Create(Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1, SleepAfter: time.Hour}, epoch)
	require.ErrorContains(t, out.Err, "sleep_after needs a platform whose previews can sleep")
	m.Config.Sleeps = true
	e, out := m.Create(Create{ID: "env-1", Branch: "main", Revision: "r1", Generation: 1, SleepAfter: time.Hour}, epoch)
	require.NoError(t, out.Err)
	require.Equal(t, time.Hour, e.SleepAfter)
	_, out = m.Create(Create{ID: "env-2", Branch: "main", Revision: "r1", Generation: 1, SleepAfter: time.Millisecond}, epoch)
	require.ErrorContains(t, out.Err, "sleep_after must be between")
	require.NotContains(t, m.Actions(e), "sleep", "a preview not yet ready is not put to sleep by hand")
}
