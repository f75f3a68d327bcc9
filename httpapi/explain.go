package httpapi

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/runtime"
)

// Explain: why an entity is where it is, what can move it now, what
// holds it, and what it refused, as one answer. Its awaiting is the
// machine's own (marquee.Machine.Awaiting: every input stepped on a copy),
// its because and refused are the history as stored.

// maxRefused bounds the refused inputs an explanation lists.
const maxRefused = 20

type explanation struct {
	ID        string          `json:"id"`
	Summary   string          `json:"summary"`
	State     explainedState  `json:"state"`
	Because   []cause         `json:"because"`
	Awaiting  []marquee.Input `json:"awaiting"`
	BlockedBy []blocker       `json:"blocked_by"`
	Refused   []refusedInput  `json:"refused"`
}

type explainedState struct {
	Serving          marquee.Serving    `json:"serving"`
	Lifecycle        marquee.Lifecycle  `json:"lifecycle,omitempty"`
	Progress         string             `json:"progress,omitempty"`
	Generation       uint64             `json:"generation"`
	RetryCount       int                `json:"retry_count"`
	NullPendingUntil time.Time          `json:"null_pending_until,omitzero"`
	Admission        *marquee.Admission `json:"admission,omitempty"`
	Tombstone        *marquee.Tombstone `json:"tombstone,omitempty"`
}

// cause is a history entry that brought the marquee where it is; a run of
// progress-only steps is one cause (Folded counts the entries in it).
type cause struct {
	At         time.Time        `json:"at"`
	Source     marquee.Source   `json:"source"`
	Event      string           `json:"event"`
	Generation uint64           `json:"generation"`
	Changed    []marquee.Change `json:"changed"`
	Folded     int              `json:"folded,omitempty"`
}

type blocker struct {
	What   string    `json:"what"`
	Detail string    `json:"detail"`
	Until  time.Time `json:"until,omitzero"`
}

type refusedInput struct {
	At                 time.Time      `json:"at"`
	Source             marquee.Source `json:"source"`
	Event              string         `json:"event"`
	Result             marquee.Answer `json:"result"`
	Reason             string         `json:"reason"`
	Generation         uint64         `json:"generation"`
	ReceivedGeneration uint64         `json:"received_generation,omitempty"`
}

// explainMarquee is GET /v1/marquees/{id}/explain.
func (s *Server) explainMarquee(w http.ResponseWriter, r *http.Request, p httprouter.Params, _ Operator) {
	id := p.ByName("id")
	if !marquee.ValidID(id) {
		refuse(w, notFound, "no such marquee")
		return
	}
	st, err := s.sys.Marquee(id)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	hist, err := s.sys.History(id, 200)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	m, now := s.sys.Machine(), s.sys.Now()
	e := explanation{ID: id, Summary: m.Status(st, now).Text, State: stateOf(st), Because: causes(hist),
		Awaiting: m.Awaiting(st, now), Refused: refusedOf(hist)}
	if e.Awaiting == nil {
		e.Awaiting = []marquee.Input{}
	}
	e.BlockedBy = s.blockers(r, st, now)
	writeJSON(w, http.StatusOK, e)
}

func stateOf(st marquee.State) explainedState {
	e := explainedState{Serving: st.Serving, Lifecycle: st.Lifecycle, Generation: st.Generation, RetryCount: st.RetryCount,
		NullPendingUntil: st.NullPendingUntil, Admission: st.Admission, Tombstone: st.Tombstone}
	if st.Kind == marquee.Tutorial {
		e.Progress = st.Progress.String()
	}
	return e
}

// causes are the entries that changed the marquee, oldest first; a run of
// entries that changed only its progress is folded into its last.
func causes(newestFirst []marquee.Entry) []cause {
	out := []cause{}
	for i := len(newestFirst) - 1; i >= 0; i-- {
		e := newestFirst[i]
		if len(e.Changed) == 0 {
			continue
		}
		c := cause{At: e.At, Source: e.Source, Event: e.Verb, Generation: e.Generation, Changed: e.Changed}
		if n := len(out); n > 0 && progressOnly(out[n-1].Changed) && progressOnly(e.Changed) {
			c.Changed = []marquee.Change{{Field: "progress", From: out[n-1].Changed[0].From, To: e.Changed[0].To}}
			c.Folded = max(out[n-1].Folded, 1) + 1
			out[n-1] = c
			continue
		}
		out = append(out, c)
	}
	return out
}

func progressOnly(cs []marquee.Change) bool { return len(cs) == 1 && cs[0].Field == "progress" }

// refusedOf is the newest inputs that were not applied, with why.
func refusedOf(newestFirst []marquee.Entry) []refusedInput {
	out := []refusedInput{}
	for _, e := range newestFirst {
		if e.Result == marquee.Applied || len(out) == maxRefused {
			continue
		}
		out = append(out, refusedInput{At: e.At, Source: e.Source, Event: e.Verb, Result: e.Result, Reason: e.Detail,
			Generation: e.Generation, ReceivedGeneration: e.ReceivedGeneration})
	}
	return out
}

// blockers are what holds the marquee: a live-chat veto, or the pool it
// waits in (its holders and its place in the queue).
func (s *Server) blockers(r *http.Request, st marquee.State, now time.Time) []blocker {
	out := []blocker{}
	if d := st.Downgrade; d != nil {
		out = append(out, blocker{What: "veto check", Detail: fmt.Sprintf("a %s waits for the control plane's count of live chats before the host is errored (M18)", d.Verb), Until: d.RecheckAt})
	}
	if v := st.LastVeto; v != nil && st.Downgrade == nil && st.Serving == marquee.Active {
		out = append(out, blocker{What: "live-chat veto", Detail: fmt.Sprintf("a %s was vetoed by %d live chats at %s (M18)", v.Verb, v.Live, v.At.UTC().Format(time.RFC3339))})
	}
	if a := st.Admission; a != nil && a.Status != marquee.AdmissionReserved {
		b := blocker{What: "pool " + a.Pool, Detail: fmt.Sprintf("waiting for a slot in pool %s (%s)", a.Pool, a.Status)}
		if pv, err := s.sys.Pool(r.Context(), a.Pool); err == nil {
			place := 0
			for i, j := range pv.Queued {
				if j.Job == st.ID {
					place = i + 1
				}
			}
			var holders []string
			for _, j := range pv.Reserved {
				holders = append(holders, j.Job)
			}
			b.Detail = fmt.Sprintf("queued %d of %d in pool %s (limit %d), held by %v (A3, A4)", place, len(pv.Queued), a.Pool, pv.Limit, holders)
		}
		out = append(out, b)
	}
	return out
}

// dryRunAnswer is what an input would do now: the same result and
// reason the real one would get, what it would change, start and send,
// and what would move the marquee after it.
type dryRunAnswer struct {
	Result    marquee.Answer   `json:"result"`
	Reason    string           `json:"reason,omitempty"`
	Reply     json.RawMessage  `json:"reply"`
	Changes   []marquee.Change `json:"changes"`
	Effects   []string         `json:"effects"`
	Messages  []string         `json:"messages"`
	Awaiting  []marquee.Input  `json:"awaiting"`
	Duplicate bool             `json:"duplicate,omitempty"`
}

// dryRunMarquee is POST /v1/marquees/{id}/dry-run with a callback's body
// (and its Webhook-Id, if it is to be looked up): operators only, never a
// callback credential, so that a workflow cannot probe.
func (s *Server) dryRunMarquee(w http.ResponseWriter, r *http.Request, p httprouter.Params, _ Operator) {
	body, ok := readBody(w, r, false)
	if !ok {
		return
	}
	deliveryID, id, cb, ok := s.decodeDelivery(w, r, body)
	if !ok {
		return
	}
	if id != p.ByName("id") {
		refuse(w, invalidRequest, fmt.Sprintf("the body's marquee_id %q is not the path's %q", id, p.ByName("id")))
		return
	}
	d, err := s.sys.DryRun(r.Context(), id, cb, runtime.Delivery{ID: deliveryID, BodyHash: sha256.Sum256(body)})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	var reply struct {
		Result marquee.Answer `json:"result"`
		Reason string         `json:"reason"`
	}
	_ = json.Unmarshal(d.Reply, &reply)
	writeJSON(w, http.StatusOK, dryRunAnswer{Result: reply.Result, Reason: reply.Reason, Reply: d.Reply,
		Changes: nonNil(marquee.Changes(d.Before, d.After)), Effects: inWords(d.Outcome.Effects), Messages: nonNil(d.Messages),
		Awaiting: nonNil(s.sys.Machine().Awaiting(d.After, s.sys.Now())), Duplicate: d.Duplicate})
}

// inWords is a step's effects as a dry run lists them: each as it prints.
func inWords[E any](effects []E) []string {
	out := make([]string, len(effects))
	for i, e := range effects {
		out[i] = fmt.Sprint(e)
	}
	return out
}

// poolExplanation is a pool's explanation: who holds its slots, who
// waits in what order, and what each release or a new ask would do. A
// pool keeps no history of its own; each job's marquee keeps its part.
type poolExplanation struct {
	Name      string            `json:"name"`
	Summary   string            `json:"summary"`
	Limit     int               `json:"limit"`
	Reserved  []actors.PoolJob  `json:"reserved"`
	Queued    []actors.PoolJob  `json:"queued"`
	Awaiting  []admission.Input `json:"awaiting"`
	BlockedBy []blocker         `json:"blocked_by"`
}

// explainPool is GET /v1/pools/{name}/explain.
func (s *Server) explainPool(w http.ResponseWriter, r *http.Request, p httprouter.Params, _ Operator) {
	v, err := s.sys.Pool(r.Context(), p.ByName("name"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	e := poolExplanation{Name: v.Name, Limit: v.Limit, Reserved: v.Reserved, Queued: v.Queued, Awaiting: v.Awaiting(s.sys.Now()), BlockedBy: []blocker{}}
	holders := make([]string, len(v.Reserved))
	for i, j := range v.Reserved {
		holders[i] = j.Job
	}
	e.Summary = fmt.Sprintf("pool %s: %d of %d slots held", v.Name, len(v.Reserved), v.Limit)
	if len(holders) > 0 {
		e.Summary += fmt.Sprintf(" (%s)", strings.Join(holders, ", "))
	}
	switch {
	case len(v.Queued) == 0:
		e.Summary += "; nobody waiting"
	default:
		e.Summary += fmt.Sprintf("; %d waiting, %s next", len(v.Queued), v.Queued[0].Job)
		for i, j := range v.Queued {
			e.BlockedBy = append(e.BlockedBy, blocker{What: j.Job, Detail: fmt.Sprintf("waits %d of %d for a slot held by %s (A3, A4)", i+1, len(v.Queued), strings.Join(holders, ", "))})
		}
	}
	writeJSON(w, http.StatusOK, e)
}

// envExplanation is an environment's explanation: its status, the
// verified steps that brought it where it is, what would move it now
// (environment.Machine.Awaiting: each input stepped on a copy) and what
// holds it.
type envExplanation struct {
	ID        string                `json:"id"`
	Summary   string                `json:"summary"`
	State     envExplainedState     `json:"state"`
	Because   []environment.Receipt `json:"because"`
	Awaiting  []environment.Input   `json:"awaiting"`
	BlockedBy []blocker             `json:"blocked_by"`
	Refused   []envRefused          `json:"refused"`
}

// envRefused is a worker's result the environment refused, newest first.
// Decided: an operator's command an environment refuses (an action its
// state does not allow) is answered with its reason and not recorded, as
// a refusal changes nothing; a stale worker's result is, as the audit
// keeps it (E7, I13).
type envRefused struct {
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Event  string    `json:"event"`
	Reason string    `json:"reason"`
}

type envExplainedState struct {
	State      environment.Phase      `json:"state"`
	Desired    string                 `json:"desired"`
	Generation uint64                 `json:"generation"`
	Attempt    *environment.Attempt   `json:"attempt,omitempty"`
	Failures   int                    `json:"failures"`
	RetryAt    time.Time              `json:"retry_at,omitzero"`
	ExpiresAt  *time.Time             `json:"expires_at"`
	Tombstone  *environment.Tombstone `json:"tombstone,omitempty"`
}

// explainEnv is GET /v1/environments/{id}/explain.
func (s *Server) explainEnv(w http.ResponseWriter, _ *http.Request, p httprouter.Params, _ Operator) {
	e, ok := s.envInPath(w, p)
	if !ok {
		return
	}
	m, now := s.sys.EnvMachine(), s.sys.Now()
	x := envExplanation{ID: e.ID, Summary: m.Status(e, now).Text,
		State: envExplainedState{State: e.State, Desired: e.Desired, Generation: e.Generation, Attempt: e.Attempt, Failures: e.Failures,
			RetryAt: e.RetryAt, ExpiresAt: expiresAt(e), Tombstone: e.Tombstone},
		Because: nonNil(e.Receipts[max(0, len(e.Receipts)-maxRefused):]), Awaiting: nonNil(m.Awaiting(e, now)), BlockedBy: envBlockers(e),
		Refused: envRefusedOf(e.Audit)}
	writeJSON(w, http.StatusOK, x)
}

// envRefusedOf is the newest refused results in the audit, at most
// maxRefused.
func envRefusedOf(audit []environment.AuditEntry) []envRefused {
	out := []envRefused{}
	for i := len(audit) - 1; i >= 0 && len(out) < maxRefused; i-- {
		if a := audit[i]; a.Action == environment.ActionRejectStaleResult {
			out = append(out, envRefused{At: a.At, Actor: a.Actor, Event: "driver result", Reason: a.Reason + ": its attempt or lease had moved on (E7)"})
		}
	}
	return out
}

// envBlockers are what holds an environment: drift waiting for an
// operator, a failure that needs one, a newer preview of its branch.
func envBlockers(e environment.Env) []blocker {
	out := []blocker{}
	for _, d := range e.Drift {
		if d.Outcome == "" {
			out = append(out, blocker{What: fmt.Sprintf("drift of %s %s", d.Capability, d.Identity),
				Detail: fmt.Sprintf("desired %s, observed %s: waits for an operator to repair, adopt or continue removal (E15)", d.Desired, d.Observed)})
		}
	}
	if f := e.LastFailure; f != nil && !f.Retryable {
		out = append(out, blocker{What: "failure", Detail: fmt.Sprintf("%s (%s): needs %s (E9)", f.Message, f.Category, f.Needs)})
	}
	if a := e.Attempt; a != nil {
		out = append(out, blocker{What: "attempt " + a.ID, Detail: fmt.Sprintf("%s %s %s, leased to %s (lease %d) until its expiry; another worker takes it over only after (E7)",
			a.Op, a.Capability, a.Identity, a.Lease.Owner, a.Lease.Generation), Until: a.Lease.ExpiresAt})
	}
	if e.SupersededBy != 0 {
		out = append(out, blocker{What: "a newer preview of its branch", Detail: fmt.Sprintf("generation %d holds the route; this one never activates it (E8, I14)", e.SupersededBy)})
	}
	return out
}
