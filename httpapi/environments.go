package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/internal/driver"
)

// wireEnvCreate is POST /v1/environments.
type wireEnvCreate struct {
	ID       string `json:"id"`
	Branch   string `json:"branch"`
	Revision string `json:"revision"`
	Data     string `json:"data"`
	DataFrom string `json:"data_from"`
	TTL      string `json:"ttl"`
	// SleepAfter: absent, the server's --preview-sleep-after; "never" or
	// "0s", never.
	SleepAfter string `json:"sleep_after"`
}

// DecodeEnvCreate validates an environment create body.
func DecodeEnvCreate(body []byte) (environment.Create, error) {
	var w wireEnvCreate
	if err := strictDecode(body, &w); err != nil {
		return environment.Create{}, err
	}
	c := environment.Create{ID: w.ID, Branch: w.Branch, Revision: w.Revision, Data: environment.DataPolicy(w.Data), DataFrom: w.DataFrom}
	if !environment.ValidID(w.ID) {
		return c, invalidf("field id: must match [a-z0-9][a-z0-9-]{0,62}")
	}
	if !environment.ValidID(w.Branch) {
		return c, invalidf("field branch: must match [a-z0-9][a-z0-9-]{0,62}")
	}
	if !environment.ValidRevision(w.Revision) {
		return c, invalidf("field revision: must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}")
	}
	if w.Data != "" && w.Data != "disposable" && w.Data != "preserve" {
		return c, invalidf("field data: disposable or preserve")
	}
	if w.DataFrom != "" && !environment.ValidSeed(w.DataFrom) {
		return c, invalidf("field data_from: a seed's name, [a-z0-9][a-z0-9-]{0,57}")
	}
	if w.TTL != "" {
		d, err := time.ParseDuration(w.TTL)
		if err != nil || d <= 0 || d > 90*24*time.Hour {
			return c, invalidf("field ttl: a duration up to 2160h")
		}
		c.TTL = d
	}
	switch w.SleepAfter {
	case "":
		c.SleepAfter = environment.SleepAfterDefault
	case "never":
	default:
		d, err := time.ParseDuration(w.SleepAfter)
		if err != nil || d != 0 && (d < environment.MinSleepAfter || d > environment.MaxSleepAfter) {
			return c, invalidf("field sleep_after: a duration from 1s to 2160h, or never")
		}
		c.SleepAfter = d
	}
	return c, nil
}

func decodeReason(body []byte) (struct{ Reason, Actor string }, error) {
	var w struct {
		Reason string `json:"reason"`
		Actor  string `json:"actor"`
	}
	if len(body) > 0 {
		if err := strictDecode(body, &w); err != nil {
			return struct{ Reason, Actor string }{}, err
		}
	}
	if len(w.Reason) > maxReason || len(w.Actor) > maxField {
		return struct{ Reason, Actor string }{}, invalidf("field reason or actor: too long")
	}
	return struct{ Reason, Actor string }{w.Reason, w.Actor}, nil
}

// envDryRunBody is what POST /v1/environments/{id}/dry-run takes: an
// action with its reason, or a removal with its reason.
type envDryRunBody struct {
	Action string `json:"action"`
	Reason string `json:"reason"`
	Remove *struct {
		Reason string `json:"reason"`
	} `json:"remove"`
}

// decodeEnvDryRun reads a dry run's body: exactly one of action (a known
// action, with its reason) and remove, strictly, within the limits every
// body has.
func decodeEnvDryRun(body []byte) (envDryRunBody, error) {
	var b envDryRunBody
	if err := strictDecode(body, &b); err != nil {
		return envDryRunBody{}, err
	}
	switch {
	case (b.Action == "") == (b.Remove == nil):
		return envDryRunBody{}, invalidf("give exactly one of action and remove")
	case len(b.Reason) > maxReason || b.Remove != nil && len(b.Remove.Reason) > maxReason:
		return envDryRunBody{}, invalidf("field reason: too long")
	case b.Action != "" && !slices.Contains(environment.ActionNames, b.Action):
		return envDryRunBody{}, invalidf("field action: %q is not one of %s", b.Action, strings.Join(environment.ActionNames, ", "))
	}
	return b, nil
}

// envDryRunAnswer is what a removal or an action would do now (O18).
type envDryRunAnswer struct {
	Result   string               `json:"result"`
	Reason   string               `json:"reason,omitempty"`
	Changes  []environment.Change `json:"changes"`
	Effects  []string             `json:"effects"`
	Messages []string             `json:"messages"`
	Awaiting []environment.Input  `json:"awaiting"`
}

// dryRunEnv is POST /v1/environments/{id}/dry-run: operators only; the
// same event the real command would send, stepped in the environment's
// turn on a copy of its record. A refusal is the real one's error.
func (s *Server) dryRunEnv(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
	body, ok := readBody(w, r, false)
	if !ok {
		return
	}
	b, err := decodeEnvDryRun(body)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	if !environment.ValidID(p.ByName("id")) {
		refuse(w, notFound, "no such environment")
		return
	}
	var ev environment.Event = environment.Action{Name: b.Action, Actor: op.Name, Reason: b.Reason}
	if b.Remove != nil {
		reason := b.Remove.Reason
		if reason == "" {
			reason = "requested by an operator"
		}
		ev = environment.RemoveEnv{Reason: reason, By: op.Name}
	}
	d, err := s.sys.EnvironmentDryRun(r.Context(), p.ByName("id"), ev)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	a := envDryRunAnswer{Result: "applied", Reason: d.Outcome.Answer.Note, Changes: environment.Changes(d.Before, d.After),
		Effects: inWords(d.Outcome.Effects), Messages: nonNil(d.Messages), Awaiting: nonNil(s.sys.EnvMachine().Awaiting(d.After, s.sys.Now()))}
	if !d.Outcome.Changed {
		a.Result = "unchanged"
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) routeEnvironments() {
	r := s.routes
	none := []queryRule{}
	envInPath := pathEntity("environment", "id")
	r.POST("/v1/environments", s.query(none, s.owned(bodyEntity("environment", func(b []byte) (string, error) {
		c, err := DecodeEnvCreate(b)
		return c.ID, err
	}), s.admitOperator, s.write(s.readyOp(s.createEnv)))))
	r.GET("/v1/environments", s.query(envListRules(), s.read(s.readableOp(s.listEnvs))))
	r.GET("/v1/environments/:id", s.query([]queryRule{{name: "receipts"}}, s.read(s.readableOp(s.getEnv))))
	r.GET("/v1/environments/:id/explain", s.query([]queryRule{}, s.read(s.readableOp(s.explainEnv))))
	r.POST("/v1/environments/:id/remove", s.query(none, s.owned(envInPath, s.admitOperator, s.write(s.readyOp(s.removeEnv)))))
	r.POST("/v1/environments/:id/actions/:action", s.query(none, s.owned(envInPath, s.admitOperator, s.write(s.readyOp(s.envAction)))))
	r.POST("/v1/environments/:id/dry-run", s.query(none, s.owned(envInPath, s.admitOperator, s.write(s.readyOp(s.dryRunEnv)))))
	for _, method := range wakerMethods {
		r.handle(method, driver.WakerPath, s.waker)
	}
}

func (s *Server) createEnv(w http.ResponseWriter, r *http.Request, _ httprouter.Params, op Operator) {
	body, ok := readBody(w, r, false)
	if !ok {
		return
	}
	c, err := DecodeEnvCreate(body)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	c.By = op.Name
	e, err := s.sys.CreateEnvironment(r.Context(), c)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.envView(e, defaultReceipts))
}

func (s *Server) getEnv(w http.ResponseWriter, r *http.Request, p httprouter.Params, _ Operator) {
	receipts := defaultReceipts
	if v := r.URL.Query().Get("receipts"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > environment.MaxReceipts {
			s.badRequest(w, invalidf("query receipts: 0..%d", environment.MaxReceipts))
			return
		}
		receipts = n
	}
	e, ok := s.envInPath(w, p)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.envView(e, receipts))
}

// envInPath reads the environment the path names, or answers why not.
func (s *Server) envInPath(w http.ResponseWriter, p httprouter.Params) (environment.Env, bool) {
	if !environment.ValidID(p.ByName("id")) {
		refuse(w, notFound, "no such environment")
		return environment.Env{}, false
	}
	e, err := s.sys.Environment(p.ByName("id"))
	if err != nil {
		s.writeErr(w, err)
		return environment.Env{}, false
	}
	return e, true
}

func (s *Server) removeEnv(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
	s.envCommand(w, r, p, func(reason string) environment.Event {
		if reason == "" {
			reason = "requested by an operator"
		}
		return environment.RemoveEnv{Reason: reason, By: op.Name}
	})
}

func (s *Server) envAction(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
	s.envCommand(w, r, p, func(reason string) environment.Event {
		return environment.Action{Name: p.ByName("action"), Actor: op.Name, Reason: reason}
	})
}

// envCommand decodes {"reason"}, sends the event the handler builds from
// it to the environment, and answers 202 with the view. The body's
// "actor", if any, is accepted for older clients and ignored: the token
// says who acted.
func (s *Server) envCommand(w http.ResponseWriter, r *http.Request, p httprouter.Params, build func(reason string) environment.Event) {
	body, ok := readBody(w, r, true)
	if !ok {
		return
	}
	in, err := decodeReason(body)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	if !environment.ValidID(p.ByName("id")) {
		refuse(w, notFound, "no such environment")
		return
	}
	e, err := s.sys.EnvironmentCommand(r.Context(), p.ByName("id"), build(in.Reason))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.envView(e, defaultReceipts))
}

// EnvView is the operator's view of an environment: durable state,
// the active attempt, observed resources, the last failure, the actions
// available now, desired and observed side by side, and the audit trail.
type EnvView struct {
	ID string `json:"id"`
	// Status, Next and Classes say what it is doing and why, and what
	// warden does next.
	Status     string            `json:"status"`
	Next       *environment.Next `json:"next"`
	Classes    []string          `json:"classes"`
	Branch     string            `json:"branch"`
	Revision   string            `json:"revision"`
	Generation uint64            `json:"generation"`
	// DataFrom is the seed its database is a copy of, when it is one.
	DataFrom string `json:"data_from,omitempty"`
	// SleepAfter: it sleeps once no visit reached it for this long;
	// LastVisit is when it was last known in use; AsleepSince is when it
	// was put to sleep, while it is desired asleep (E19, E20).
	SleepAfter  string     `json:"sleep_after,omitempty"`
	LastVisit   *time.Time `json:"last_visit,omitempty"`
	AsleepSince *time.Time `json:"asleep_since,omitempty"`
	// URL is the preview's public URL, when known.
	URL string `json:"url,omitempty"`
	// SupersededBy: a newer preview of the branch holds its route.
	SupersededBy uint64 `json:"superseded_by,omitempty"`
	// Trimmed: old receipts and audit entries dropped to bound the record.
	Trimmed int                  `json:"trimmed,omitempty"`
	Desired string               `json:"desired"`
	State   environment.Phase    `json:"state"`
	Attempt *environment.Attempt `json:"attempt"`
	// Receipts are the newest ?receipts=N (default 20); ReceiptsTotal
	// counts those kept.
	Receipts      []environment.Receipt    `json:"receipts"`
	ReceiptsTotal int                      `json:"receipts_total"`
	Resources     []environment.Resource   `json:"resources"`
	Drift         []environment.Drift      `json:"drift"`
	LastFailure   *environment.Failure     `json:"last_failure"`
	Actions       []string                 `json:"actions"`
	Audit         []environment.AuditEntry `json:"audit"`
	Outbox        []NotificationView       `json:"outbox"`
	ExpiresAt     *time.Time               `json:"expires_at"`
	Tombstone     *environment.Tombstone   `json:"tombstone"`
	UpdatedAt     time.Time                `json:"updated_at"`
}

// NotificationView is an outbox record and, while it is not delivered,
// why (O2).
type NotificationView struct {
	environment.Notification
	Why string `json:"why,omitempty"`
}

// defaultReceipts is how many receipts a view shows unless asked.
const defaultReceipts = 20

// goingAway says the environment is removed or being removed: it has no
// preview to open and no time left to live, so its view shows neither
// (a removed preview showed "TTL left 71h59m" and its URL).
func goingAway(e environment.Env) bool { return e.Desired == "removed" || e.Tombstone != nil }

// servedURL is the preview's URL while it is one.
func servedURL(m environment.Machine, e environment.Env) string {
	if goingAway(e) {
		return ""
	}
	return m.URLOf(e)
}

// expiresAt is when the preview expires, while it can.
func expiresAt(e environment.Env) *time.Time {
	if goingAway(e) {
		return nil
	}
	return timePtr(e.ExpiresAt)
}

func (s *Server) envView(e environment.Env, receipts int) EnvView {
	m, now := s.sys.EnvMachine(), s.sys.Now()
	st := m.Status(e, now)
	v := EnvView{ID: e.ID, Status: st.Text, Next: st.Next, Classes: nonNil(st.Classes), Branch: e.Branch, Revision: e.Revision, Generation: e.Generation, DataFrom: e.DataFrom,
		URL: servedURL(m, e), SupersededBy: e.SupersededBy, Trimmed: e.Trimmed, Desired: e.Desired, State: e.State, Attempt: e.Attempt,
		Receipts: e.Receipts[max(0, len(e.Receipts)-receipts):], ReceiptsTotal: len(e.Receipts), Resources: e.Resources, Drift: e.Drift,
		LastFailure: e.LastFailure, Actions: m.Actions(e), Audit: e.Audit, Outbox: []NotificationView{}, ExpiresAt: expiresAt(e),
		Tombstone: e.Tombstone, UpdatedAt: e.UpdatedAt, LastVisit: timePtr(e.ActiveAt), AsleepSince: timePtr(e.AsleepSince)}
	if e.SleepAfter > 0 {
		v.SleepAfter = e.SleepAfter.String()
	}
	for _, n := range e.Outbox {
		nv := NotificationView{Notification: n}
		switch {
		case n.Delivered:
		case !s.sys.Notifies():
			nv.Why = "not sent: no notifier is configured (warden serve --notify, --notify-url)"
		case n.LastError != "":
			nv.Why = "delivery failed: " + n.LastError
		case n.Attempts >= actors.MaxNotifyAttempts:
			nv.Why = "gave up after the last attempt"
		default:
			nv.Why = "being sent"
		}
		v.Outbox = append(v.Outbox, nv)
	}
	if v.Receipts == nil {
		v.Receipts = []environment.Receipt{}
	}
	if v.Actions == nil {
		v.Actions = []string{}
	}
	if v.Drift == nil {
		v.Drift = []environment.Drift{}
	}
	if v.Audit == nil {
		v.Audit = []environment.AuditEntry{}
	}
	return v
}
