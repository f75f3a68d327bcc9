// Package explaincheck holds an explanation's awaiting to its machine's
// Step both ways (marquees, environments, pools), for the rules' golden tests and the simulator's: each
// name awaiting lists is one some probe of that name moves the entity
// with, and each probe (more inputs than explain asks about) that moves it
// is listed by its name (O17). Test code only: it imports the rules alone,
// so their own tests may use it; the server never links it.
package explaincheck

import (
	"fmt"
	"slices"
	"time"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
)

// Marquee says where a marquee's awaiting at now and Step disagree.
func Marquee(m marquee.Machine, s marquee.State, now time.Time) []string {
	listed, bad := names(m.Awaiting(s, now))
	moved := map[string]bool{}
	for _, p := range marqueeProbes(m, s) {
		at := now
		if !p.at.IsZero() {
			at = p.at
		}
		if _, moves := m.Moves(s, p.ev, at); moves {
			name := marquee.InputName(p.ev)
			moved[name] = true
			if !listed[name] {
				bad = append(bad, fmt.Sprintf("%#v moves the marquee (%s) but awaiting does not list %q", p.ev, s.Lifecycle, name))
			}
		}
	}
	return append(bad, unmoved(listed, moved, string(s.Lifecycle))...)
}

// Environment says where an environment's awaiting at now and Step
// disagree.
func Environment(m environment.Machine, e environment.Env, now time.Time) []string {
	listed, bad := names(m.Awaiting(e, now))
	moved := map[string]bool{}
	for _, p := range envProbes(e) {
		at := now
		if p.at.After(now) {
			at = p.at
		}
		if _, _, moves := m.Moves(e, p.ev, at); moves {
			name := environment.InputName(e, p.ev)
			moved[name] = true
			if !listed[name] {
				bad = append(bad, fmt.Sprintf("%#v moves the environment (%s) but awaiting does not list %q", p.ev, e.State, name))
			}
		}
	}
	return append(bad, unmoved(listed, moved, string(e.State))...)
}

// Pool says where a pool's awaiting at now and Step disagree. Its probes:
// a release by every job it holds or queues and by one it does not know;
// an ask by each of those and by a new job.
func Pool(p admission.Pool, now time.Time) []string {
	listed, bad := names(admission.Awaiting(p, now))
	jobs := []string{"a job it does not know"}
	for _, j := range append(append([]admission.Job(nil), p.Reserved...), p.Queued...) {
		jobs = append(jobs, j.ID)
	}
	moved := map[string]bool{}
	for _, job := range jobs {
		for _, ev := range []admission.Event{admission.Release{Job: job}, admission.Ask{Job: job}} {
			if _, _, moves := admission.Moves(p, ev, now); moves {
				name := admission.InputName(p, ev)
				moved[name] = true
				if !listed[name] {
					bad = append(bad, fmt.Sprintf("%#v moves the pool but awaiting does not list %q", ev, name))
				}
			}
		}
	}
	return append(bad, unmoved(listed, moved, fmt.Sprintf("%d of %d held, %d waiting", len(p.Reserved), p.Limit, len(p.Queued)))...)
}

// names are the inputs awaiting lists, by name, and each listed with no
// effect.
func names(inputs []entity.Input) (listed map[string]bool, bad []string) {
	listed = map[string]bool{}
	for _, in := range inputs {
		listed[in.Event] = true
		if in.Effect == "" {
			bad = append(bad, fmt.Sprintf("%s is listed with no effect", in.Event))
		}
	}
	return listed, bad
}

// unmoved are the names listed that no probe of that name moved, in
// order.
func unmoved(listed, moved map[string]bool, state string) []string {
	var bad []string
	for name := range listed {
		if !moved[name] {
			bad = append(bad, fmt.Sprintf("awaiting lists %q, but no input of that name moves it (%s)", name, state))
		}
	}
	slices.Sort(bad)
	return bad
}

type probe struct {
	ev marquee.Event
	at time.Time
}

// marqueeProbes are every verb at four generations, each step, each
// command, each driver outcome, both admission answers and each timer at
// its deadline.
func marqueeProbes(m marquee.Machine, s marquee.State) []probe {
	var ps []probe
	gens := []uint64{0, s.Generation, s.Generation + 1}
	if s.Generation > 0 {
		gens = append(gens, s.Generation-1)
	}
	other := &marquee.Connection{Host: "198.51.100.9", Port: 22, User: "root", SSHPrivateKey: "other"}
	for _, g := range gens {
		for p := marquee.Queued; p <= marquee.AppDeploying; p++ {
			ps = append(ps, probe{ev: marquee.Callback{Verb: marquee.VerbStep, Generation: g, Step: p}})
		}
		for _, c := range []*marquee.Connection{s.Connection, other} {
			if c != nil {
				ps = append(ps, probe{ev: marquee.Callback{Verb: marquee.VerbDeployed, Generation: g, Connection: c}})
			}
		}
		for _, v := range []marquee.Verb{marquee.VerbDestroyed, marquee.VerbFailed, marquee.VerbNull, marquee.VerbRebooted} {
			ps = append(ps, probe{ev: marquee.Callback{Verb: v, Generation: g, Reason: "r"}})
		}
		for _, o := range []marquee.DispatchOutcome{marquee.DispatchOK, marquee.DispatchTransient, marquee.DispatchConfiguration} {
			ps = append(ps, probe{ev: marquee.DispatchFinished{Generation: g, Outcome: o}})
		}
		ps = append(ps, probe{ev: marquee.BootstrapFinished{Generation: g, OK: true}}, probe{ev: marquee.BootstrapFinished{Generation: g}},
			probe{ev: marquee.ChatsAnswered{Generation: g, Live: 1, Reachable: 1}}, probe{ev: marquee.ChatsAnswered{Generation: g}},
			probe{ev: marquee.ChatsAnswered{Generation: g, Err: "unreachable"}})
	}
	ps = append(ps, probe{ev: marquee.Redeploy{By: "o"}}, probe{ev: marquee.Destroy{By: "o"}}, probe{ev: marquee.Destroy{By: "o", Reap: true}},
		probe{ev: marquee.Disable{By: "o"}}, probe{ev: marquee.Enable{By: "o"}}, probe{ev: marquee.RunNow{By: "o"}})
	seq := uint64(1)
	if s.Admission != nil {
		seq = s.Admission.Sequence
	}
	for _, st := range []marquee.AdmissionStatus{marquee.AdmissionReserved, marquee.AdmissionQueued} {
		ps = append(ps, probe{ev: marquee.AdmissionDecided{Status: st, Sequence: seq}})
	}
	for _, d := range m.Deadlines(s) {
		ps = append(ps, probe{ev: d.Event, at: d.At})
	}
	return ps
}

type envProbe struct {
	ev environment.Event
	at time.Time
}

// envProbes are more inputs than explain asks about: every answer a
// driver can give the attempt (and a stale one), every category of
// failure, every observation, the lease's renewal and a stale one, every
// action by name, the reconciler's findings on every capability, the
// branch's generations, every notification's report, the proxy's word on
// traffic and a request through the waker, and the timers at their
// deadlines.
func envProbes(e environment.Env) []envProbe {
	var ps []envProbe
	add := func(at time.Time, evs ...environment.Event) {
		for _, ev := range evs {
			ps = append(ps, envProbe{ev: ev, at: at})
		}
	}
	observations := []environment.Observation{{}, {Exists: true, Owner: e.ID, Matches: true, RouteTarget: e.Generation},
		{Exists: true, Owner: e.ID}, {Exists: true, Owner: "someone-else", Matches: true},
		{Exists: true, Owner: e.ID, Matches: true, Replace: true}, {Exists: true, Owner: e.ID, Matches: true, RouteTarget: e.Generation + 1},
		{Exists: true, Owner: e.ID, Matches: true, RouteTarget: e.Generation, AtWaker: true}, {Exists: true, Owner: e.ID, Stopped: true}}
	for _, lease := range []uint64{e.LeaseGeneration, e.LeaseGeneration + 1} {
		id := "none"
		if e.Attempt != nil {
			id = e.Attempt.ID
		}
		add(time.Time{}, environment.DriverAnswer{AttemptID: id, LeaseGeneration: lease, OK: true},
			environment.DriverAnswer{AttemptID: id, LeaseGeneration: lease, Timeout: true}, environment.RenewLease{AttemptID: id, LeaseGeneration: lease})
		for _, c := range []environment.Category{environment.Transient, environment.Configuration, environment.Permission, environment.Conflict, environment.Unknown} {
			add(time.Time{}, environment.DriverAnswer{AttemptID: id, LeaseGeneration: lease, Category: c, Message: "m"})
		}
		for i := range observations {
			add(time.Time{}, environment.DriverAnswer{AttemptID: id, LeaseGeneration: lease, OK: true, Observation: &observations[i]})
		}
	}
	add(time.Time{}, environment.Advance{Owner: "worker-a"}, environment.Advance{Owner: "worker-b"}, environment.RemoveEnv{Reason: "r", By: "o"}, environment.Expire{},
		environment.GenerationGiven{Generation: e.Generation}, environment.GenerationGiven{Generation: e.Generation + 1}, environment.OwnerGone{Owner: "nobody"})
	if a := e.Attempt; a != nil {
		add(a.Lease.ExpiresAt, environment.Advance{Owner: "worker-b"})
		add(time.Time{}, environment.OwnerGone{Owner: a.Lease.Owner})
	}
	add(e.RetryAt, environment.Advance{Owner: "worker-a"})
	if !e.ExpiresAt.IsZero() {
		add(e.ExpiresAt, environment.Expire{})
	}
	add(time.Time{}, environment.Visited{}, environment.Traffic{})
	if e.SleepAfter > 0 {
		due := e.ActiveAt.Add(e.SleepAfter)
		add(due, environment.Traffic{}, environment.Traffic{LastRequest: due}, environment.Traffic{LastRequest: e.ActiveAt.Add(e.SleepAfter / 2)})
	}
	for _, name := range environment.ActionNames {
		add(time.Time{}, environment.Action{Name: name, Actor: "o", Reason: "r"})
	}
	for _, c := range []environment.Capability{environment.Artifact, environment.Database, environment.Migrations, environment.App, environment.Route, environment.Smoke, environment.Notify} {
		for _, o := range observations {
			add(time.Time{}, environment.AtRest{Capability: c, Observation: o, Seq: e.AttemptSeq})
		}
	}
	for _, n := range e.Outbox {
		add(time.Time{}, environment.Delivered{Key: n.Key, OK: true}, environment.Delivered{Key: n.Key, Error: "e"})
	}
	return ps
}
