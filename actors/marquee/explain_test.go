package marquee_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	. "github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/sim"
)

// TestO17AwaitingListsWhatStepAccepts walks every state the golden
// scripts reach and holds explain's awaiting to the machine: every input
// it lists, stepped there, moves the marquee, and every probe that moves
// it (each verb at the current, an older, a newer and no generation, each
// step, the operator's commands, the drivers' answers of every outcome,
// each timer at its deadline) is listed under its name.
func TestO17AwaitingListsWhatStepAccepts(t *testing.T) {
	states := 0
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{m: Machine{Config: DefaultConfig()}, now: epoch}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			out := h.run(t, d)
			if h.s.ID != "" {
				checkAwaiting(t, d.Pos, h.m, h.s, h.now)
				states++
			}
			return out
		})
	})
	if states < 100 {
		t.Fatalf("only %d states walked", states)
	}
}

// checkAwaiting holds awaiting to Step both ways on s: each input it
// lists is one some probe of that name moves the marquee with, and each
// probe that moves it is listed under its name.
// TestO17AwaitingListsWhatStepAcceptsOnSimulatorStates holds awaiting to
// Step on the states the simulator's faults, crashes and late, repeated
// and stale callbacks bring marquees to, one node and three, at the time
// each was reached and a minute, an hour and a day later.
func TestO17AwaitingListsWhatStepAcceptsOnSimulatorStates(t *testing.T) {
	states := 0
	for seed := uint64(1); seed <= 6; seed++ {
		nodes := 1 + 2*int(seed%2)
		r := sim.Run(sim.Options{Seed: seed, Nodes: nodes, Observe: func(m Machine, s State, now time.Time) {
			states++
			for _, later := range []time.Duration{0, time.Minute, time.Hour, 24 * time.Hour} {
				checkAwaiting(t, fmt.Sprintf("seed %d nodes %d state %d +%s", seed, nodes, states, later), m, s.Clone(), now.Add(later))
			}
		}})
		if r.Violation != nil {
			t.Fatalf("seed %d: %v", seed, r.Violation)
		}
	}
	if states < 1000 {
		t.Fatalf("only %d states walked", states)
	}
	t.Logf("%d simulator states walked", states)
}

func checkAwaiting(t *testing.T, pos string, m Machine, s State, now time.Time) {
	t.Helper()
	listed := map[string]bool{}
	for _, in := range m.Awaiting(s, now) {
		listed[in.Event] = true
		if in.Effect == "" {
			t.Errorf("%s: %s is listed with no effect", pos, in.Event)
		}
	}
	moved := map[string]bool{}
	for _, p := range probes(m, s) {
		at := now
		if !p.at.IsZero() {
			at = p.at
		}
		if _, moves := m.Moves(s, p.ev, at); moves {
			moved[InputName(p.ev)] = true
			if !listed[InputName(p.ev)] {
				t.Errorf("%s: %#v moves the marquee (%s) but awaiting does not list %q", pos, p.ev, s.Lifecycle, InputName(p.ev))
			}
		}
	}
	for name := range listed {
		if !moved[name] {
			t.Errorf("%s: awaiting lists %q, but no input of that name moves the marquee (%s)", pos, name, s.Lifecycle)
		}
	}
}

type probe struct {
	ev Event
	at time.Time
}

func probes(m Machine, s State) []probe {
	var ps []probe
	gens := []uint64{0, s.Generation, s.Generation + 1}
	if s.Generation > 0 {
		gens = append(gens, s.Generation-1)
	}
	other := &Connection{Host: "198.51.100.9", Port: 22, User: "root", SSHPrivateKey: "other"}
	for _, g := range gens {
		for p := Queued; p <= AppDeploying; p++ {
			ps = append(ps, probe{ev: Callback{Verb: VerbStep, Generation: g, Step: p}})
		}
		for _, c := range []*Connection{s.Connection, other} {
			if c != nil {
				ps = append(ps, probe{ev: Callback{Verb: VerbDeployed, Generation: g, Connection: c}})
			}
		}
		for _, v := range []Verb{VerbDestroyed, VerbFailed, VerbNull, VerbRebooted} {
			ps = append(ps, probe{ev: Callback{Verb: v, Generation: g, Reason: "r"}})
		}
		for _, o := range []DispatchOutcome{DispatchOK, DispatchTransient, DispatchConfiguration} {
			ps = append(ps, probe{ev: DispatchFinished{Generation: g, Outcome: o}})
		}
		ps = append(ps, probe{ev: BootstrapFinished{Generation: g, OK: true}}, probe{ev: BootstrapFinished{Generation: g}},
			probe{ev: ChatsAnswered{Generation: g, Live: 1, Reachable: 1}}, probe{ev: ChatsAnswered{Generation: g}},
			probe{ev: ChatsAnswered{Generation: g, Err: "unreachable"}})
	}
	ps = append(ps, probe{ev: Redeploy{By: "o"}}, probe{ev: Destroy{By: "o"}}, probe{ev: Destroy{By: "o", Reap: true}},
		probe{ev: Disable{By: "o"}}, probe{ev: Enable{By: "o"}}, probe{ev: RunNow{By: "o"}})
	seq := uint64(1)
	if s.Admission != nil {
		seq = s.Admission.Sequence
	}
	for _, st := range []AdmissionStatus{AdmissionReserved, AdmissionQueued} {
		ps = append(ps, probe{ev: AdmissionDecided{Status: st, Sequence: seq}})
	}
	for _, d := range m.Deadlines(s) {
		ps = append(ps, probe{ev: d.Event, at: d.At})
	}
	return ps
}
