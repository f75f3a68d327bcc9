package marquee_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/wardenhq/warden/actors/entity"
	. "github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness is one golden script's world: a machine, a state and a clock that
// only the script moves.
type harness struct {
	m   Machine
	s   State
	now time.Time
	// rec is the durable record as the runtime would hold it, and
	// delivery the id of the callback being stepped ("" for none), for
	// each step's write: line.
	rec      record.Marquee
	delivery string
	t        *testing.T
}

// TestMachine runs the golden scripts in testdata/, one file per rule
// family; every case names the rule it shows. Commands:
//
//	create id= kind= [pool=] [host=]      Machine.Create
//	state k=v ...                         overwrite fields (see set)
//	callback verb= gen= [step=] [host=] [port=] [key=] [domain=] [reason=]
//	op redeploy|destroy|disable|enable [reap]
//	admission status= seq=
//	dispatch gen= outcome=sent|transient|configuration
//	bootstrap gen= ok=true|false
//	chats gen= live= reachable= [err=]
//	reconcile
//	advance [minutes=] [seconds=] [hours=]  move time; fire every due deadline
//	deadlines                             list pending deadlines
//	awaiting                              explain's inputs that move it now (O17)
//	matrix                                every verb x {current, stale, zero}
//	                                      generation against the current state
func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{m: Machine{Config: DefaultConfig()}, now: epoch}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			return h.run(t, d)
		})
	})
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
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
	switch d.Cmd {
	case "create":
		c := Create{ID: arg("id", "m-1"), Kind: Origin(arg("kind", "tutorial")), Pool: arg("pool", "")}
		if host := arg("host", ""); host != "" {
			c.Connection = &Connection{Host: host, Port: 22, User: "root", SSHPrivateKey: "k"}
		}
		s, out := h.m.Create(c, h.now)
		if out.Err != nil {
			return h.refused(out)
		}
		h.s = s
		return h.report(out)
	case "state":
		for _, a := range d.CmdArgs {
			h.set(t, a.Key, a.Vals[0])
		}
		// A connection set by hand was reported by the generation the
		// fixture ends at, whatever order its arguments came in.
		if h.s.Connection != nil && h.s.Kind == Tutorial {
			h.s.ConnectionGeneration = h.s.Generation
		}
		if err := h.s.CheckInvariants(); err != nil {
			t.Fatalf("%s: the fixture describes a state the machine cannot reach: %v", d.Pos, err)
		}
		return h.describe() + "\n"
	case "callback":
		h.delivery = arg("delivery", "")
		defer func() { h.delivery = "" }()
		return h.step(h.callbackFrom(t, arg))
	case "op":
		switch d.CmdArgs[0].Key {
		case "redeploy":
			return h.step(Redeploy{})
		case "destroy":
			return h.step(Destroy{Reap: d.HasArg("reap")})
		case "disable":
			return h.step(Disable{})
		case "enable":
			return h.step(Enable{})
		case "run-now":
			return h.step(RunNow{By: "ana"})
		}
	case "admission":
		return h.step(AdmissionDecided{Status: AdmissionStatus(arg("status", "reserved")), Sequence: num("seq")})
	case "dispatch":
		return h.step(DispatchFinished{Generation: num("gen"), Outcome: DispatchOutcome(arg("outcome", "sent")), Detail: arg("detail", "")})
	case "bootstrap":
		return h.step(BootstrapFinished{Generation: num("gen"), OK: arg("ok", "true") == "true", Detail: arg("detail", "probe failed")})
	case "chats":
		return h.step(ChatsAnswered{Generation: num("gen"), Live: int(num("live")), Reachable: int(num("reachable")), Err: arg("err", "")})
	case "reconcile":
		return h.step(Reconcile{AfterFailure: d.HasArg("after-failure")})
	case "event":
		gen := num("gen")
		switch d.CmdArgs[0].Key {
		case "retry-due":
			return h.step(RetryDue{Generation: gen})
		case "timeout":
			return h.step(ProvisioningTimedOut{Generation: gen})
		case "bootstrap-retry":
			return h.step(BootstrapRetryDue{Generation: gen})
		case "null-expired":
			return h.step(NullExpired{})
		case "chats-recheck":
			return h.step(ChatsRecheckDue{Generation: gen})
		}
	case "advance":
		dur := time.Duration(num("hours"))*time.Hour + time.Duration(num("minutes"))*time.Minute + time.Duration(num("seconds"))*time.Second
		target := h.now.Add(dur)
		var b strings.Builder
		// Fire deadlines one at a time at their own due time, as the
		// shell's timer service does.
		for {
			ds := h.m.Deadlines(h.s)
			if len(ds) == 0 || ds[0].At.After(target) {
				break
			}
			h.now = ds[0].At
			fmt.Fprintf(&b, "at +%s: %s\n", h.now.Sub(epoch), eventName(ds[0].Event))
			b.WriteString(indent(h.step(ds[0].Event)))
		}
		h.now = target
		if b.Len() == 0 {
			return "nothing due\n"
		}
		return b.String()
	case "status":
		// O1: the status line, warden's next step and the list classes.
		st := h.m.Status(h.s, h.now)
		var b strings.Builder
		fmt.Fprintf(&b, "status: %s\n", st.Text)
		if st.Next != nil {
			fmt.Fprintf(&b, "next: +%s %s\n", st.Next.At.Sub(h.now), st.Next.What)
		}
		if len(st.Classes) > 0 {
			fmt.Fprintf(&b, "classes: %s\n", strings.Join(st.Classes, " "))
		}
		return b.String()
	case "deadlines":
		var b strings.Builder
		for _, dl := range h.m.Deadlines(h.s) {
			fmt.Fprintf(&b, "+%s %s\n", dl.At.Sub(epoch), eventName(dl.Event))
		}
		if b.Len() == 0 {
			return "none\n"
		}
		return b.String()
	case "awaiting":
		var b strings.Builder
		for _, in := range h.m.Awaiting(h.s, h.now) {
			at := ""
			if !in.At.IsZero() {
				at = fmt.Sprintf(" at +%s", in.At.Sub(epoch))
			}
			fmt.Fprintf(&b, "%s%s: %s\n", in.Event, at, in.Effect)
		}
		if b.Len() == 0 {
			return "nothing moves it\n"
		}
		return b.String()
	case "matrix":
		var b strings.Builder
		fmt.Fprintf(&b, "from: %s\n", h.describe())
		for _, v := range Verbs {
			for _, g := range []struct {
				name string
				gen  uint64
			}{{"current", h.s.Generation}, {"stale", h.s.Generation + 7}, {"zero", 0}} {
				c := Callback{Verb: v, Generation: g.gen, Step: SSHConfiguring, Reason: "boom"}
				if v == VerbDeployed {
					c.Connection = &Connection{Host: "203.0.113.7", Port: 22, User: "root", SSHPrivateKey: "k", FreeDomain: "m-1.example.net"}
				}
				s, out := h.m.Step(h.s, c, h.now)
				change := "no change"
				if out.Changed {
					change = "-> " + diff(h.s, s)
				}
				fmt.Fprintf(&b, "%-9s %-7s %-20s %s%s\n", v, g.name, out.Answer, change, effects(out.Effects))
				if g.name == "stale" && out.Changed {
					t.Errorf("I6: stale %s changed the state: %s", v, diff(h.s, s))
				}
			}
		}
		return b.String()
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func (h *harness) callbackFrom(t *testing.T, arg func(string, string) string) Callback {
	var gen uint64
	fmt.Sscan(arg("gen", "0"), &gen)
	c := Callback{Verb: Verb(arg("verb", "")), Generation: gen, Reason: arg("reason", "")}
	if st := arg("step", ""); st != "" {
		p, err := ParseProgress(st)
		if err != nil {
			t.Fatal(err)
		}
		c.Step = p
	}
	if c.Verb == VerbDeployed {
		var port int
		fmt.Sscan(arg("port", "22"), &port)
		c.Connection = &Connection{Host: arg("host", "203.0.113.7"), Port: port, User: arg("user", "root"),
			SSHPrivateKey: arg("key", "k"), FreeDomain: arg("domain", "m-1.example.net")}
	}
	return c
}

func (h *harness) step(ev Event) string {
	s, out := h.m.Step(h.s, ev, h.now)
	if out.Err != nil {
		return h.refused(out)
	}
	h.s = s
	h.checkWake(out)
	return h.report(out)
}

// checkWake holds every golden step's wake, which reads the deadlines'
// times alone, to the earliest deadline the list of them makes.
func (h *harness) checkWake(out Outcome) {
	h.t.Helper()
	var want time.Time
	if ds := h.m.Deadlines(h.s); len(ds) > 0 {
		want = ds[0].At
	}
	if !out.Wake.Equal(want) {
		h.t.Fatalf("wake %v, the earliest deadline %v", out.Wake, want)
	}
}

// report is the one way a step is shown (entity.Format), then what the
// runtime's batch would hold for it, then the state.
func (h *harness) report(out Outcome) string {
	before := h.rec
	h.rec = record.NextMarquee(before, h.s, out, h.now)
	write := runtime.DescribeWrite(record.MarqueeWrites{}, h.s.ID, before, h.rec, out, h.delivery)
	return entity.Format(out, h.now) + "write: " + write + "\n" + "state: " + h.describe() + "\n"
}

// refused shows a refused step: nothing is written.
func (h *harness) refused(out Outcome) string { return entity.Format(out, h.now) + "write: none\n" }

func (h *harness) describe() string { return describeAt(h.s, h.now) }

func describeAt(s State, now time.Time) string {
	var parts []string
	add := func(f string, a ...any) { parts = append(parts, fmt.Sprintf(f, a...)) }
	if s.Tombstone != nil {
		add("TOMBSTONE(%s)", s.Tombstone.Reason)
	}
	add("serving=%s", s.Serving)
	if s.Kind == Tutorial {
		add("lifecycle=%s progress=%s", s.Lifecycle, s.Progress)
	}
	add("gen=%d", s.Generation)
	if s.Connection != nil {
		add("conn=%s@gen%d", s.Connection.Host, s.ConnectionGeneration)
	}
	if s.NullPendingUntil.After(now) {
		add("null=pending(until +%s)", s.NullPendingUntil.Sub(epoch))
	}
	if s.RetryCount > 0 {
		add("retries=%d", s.RetryCount)
	}
	if a := s.Attempt; a != nil {
		add("attempt=%s/%d/%s", a.Action, a.Generation, a.Dispatch)
	}
	if a := s.Admission; a != nil {
		add("admission=%s#%d", a.Status, a.Sequence)
	}
	if b := s.Bootstrap; b != nil {
		add("bootstrap=gen%d/failures=%d/running=%t", b.Generation, b.Failures, b.Running)
	}
	if d := s.Downgrade; d != nil {
		add("downgrade=%s/asking=%t", d.Verb, d.Asking)
	}
	return strings.Join(parts, " ")
}

// diff names the described fields that changed.
func diff(a, b State) string {
	pa := strings.Fields(describeAt(a, epoch))
	pb := strings.Fields(describeAt(b, epoch))
	old := map[string]bool{}
	for _, p := range pa {
		old[p] = true
	}
	var changed []string
	for _, p := range pb {
		if !old[p] {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		return "(bookkeeping only)"
	}
	return strings.Join(changed, " ")
}

func effects(es []Effect) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, " %v", e)
	}
	return b.String()
}

func eventName(e Event) string {
	switch e := e.(type) {
	case RetryDue:
		return fmt.Sprintf("retry-due(gen=%d)", e.Generation)
	case ProvisioningTimedOut:
		return fmt.Sprintf("provisioning-timeout(gen=%d)", e.Generation)
	case BootstrapRetryDue:
		return fmt.Sprintf("bootstrap-retry(gen=%d)", e.Generation)
	case NullExpired:
		return "null-expired"
	case ChatsRecheckDue:
		return fmt.Sprintf("chats-recheck(gen=%d)", e.Generation)
	}
	return fmt.Sprintf("%T", e)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// set overwrites one field, so a script can start from any lifecycle.
func (h *harness) set(t *testing.T, k, v string) {
	s := &h.s
	var n uint64
	fmt.Sscan(v, &n)
	switch k {
	case "id":
		s.ID = v
	case "kind":
		s.Kind = Origin(v)
	case "pool":
		s.Pool = v
	case "serving":
		s.Serving = Serving(v)
	case "lifecycle":
		s.Lifecycle = Lifecycle(v)
	case "progress":
		p, err := ParseProgress(v)
		if err != nil {
			t.Fatal(err)
		}
		s.Progress = p
	case "gen":
		s.Generation, s.DispatchedGeneration = n, n
		if s.Attempt != nil {
			s.Attempt.Generation = n
		}
	case "conn":
		if v == "none" {
			s.Connection = nil
			return
		}
		s.Connection = &Connection{Host: v, Port: 22, User: "root", SSHPrivateKey: "k", FreeDomain: "m-1.example.net"}
		s.ConnectionGeneration = s.Generation
	case "attempt": // action/dispatch
		parts := strings.Split(v, "/")
		s.Attempt = &Attempt{Generation: s.Generation, Action: Action(parts[0]), Dispatch: Dispatch(parts[1]), DispatchedAt: h.now}
	case "admission":
		if v == "none" {
			s.Admission = nil
			return
		}
		s.Admission = &Admission{Pool: "default", Status: AdmissionStatus(v), Sequence: 1}
	default:
		t.Fatalf("unknown field %q", k)
	}
}

// TestCheckInvariantsRefusesImpossibleFixtures: the check the golden
// harness runs on every hand-built state fails on the states an earlier
// fixture described (an active marquee serving generation 0's host at
// generation 3, I1), so a fixture cannot pass by describing one.
func TestCheckInvariantsRefusesImpossibleFixtures(t *testing.T) {
	s := State{ID: "m-1", Kind: Tutorial, Serving: Active, Lifecycle: Provisioned, Generation: 3, DispatchedGeneration: 3,
		Connection: &Connection{Host: "h"}, ConnectionGeneration: 0}
	if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "I1") {
		t.Fatalf("I1 breach not seen: %v", err)
	}
	s.ConnectionGeneration = 3
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	s.Lifecycle, s.Serving, s.Admission = Failed, Errored, &Admission{Pool: "default", Status: AdmissionReserved}
	if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "I9") {
		t.Fatalf("I9 breach not seen: %v", err)
	}
}
