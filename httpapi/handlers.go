package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors/marquee"
)

func (s *Server) badRequest(w http.ResponseWriter, err error) {
	var iv *invalid
	if errors.As(err, &iv) {
		refuse(w, invalidRequest, iv.msg)
		return
	}
	s.writeErr(w, err)
}

func (s *Server) createMarquee(w http.ResponseWriter, r *http.Request, _ httprouter.Params, op Operator) {
	body, ok := readBody(w, r, false)
	if !ok {
		return
	}
	c, err := DecodeCreate(body)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	c.By = op.Name
	st, err := s.sys.Create(r.Context(), c)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, viewOf(st, s.sys.Machine(), s.sys.Now()))
}

func (s *Server) command(status int, decode func(body []byte, by string) (marquee.Event, error)) opHandle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
		body, ok := readBody(w, r, true)
		if !ok {
			return
		}
		ev, err := decode(body, op.Name)
		if err != nil {
			s.badRequest(w, err)
			return
		}
		id := p.ByName("id")
		if !marquee.ValidID(id) {
			refuse(w, notFound, "no such marquee")
			return
		}
		st, did, err := s.sys.Operate(r.Context(), id, ev)
		if err != nil {
			s.writeErr(w, err)
			return
		}
		v := viewOf(st, s.sys.Machine(), s.sys.Now())
		if did.Answer != "" && did.Answer != marquee.Applied {
			v.Result, v.Reason = string(did.Answer), did.Reason // O16: not applied, and why
		}
		writeJSON(w, status, v)
	}
}

func (s *Server) getMarquee(w http.ResponseWriter, _ *http.Request, p httprouter.Params, _ Operator) {
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
	writeJSON(w, http.StatusOK, viewOf(st, s.sys.Machine(), s.sys.Now()))
}

// queryLimit reads ?limit=, default def, at most maxLimit.
func queryLimit(r *http.Request, def, maxLimit int) (int, error) {
	return limitFrom(r.URL.Query(), def, maxLimit)
}

// limitFrom reads limit from q: def when absent, 1..maxLimit otherwise.
func limitFrom(q url.Values, def, maxLimit int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, invalidf("query limit: 1..%d", maxLimit)
	}
	return n, nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, p httprouter.Params, _ Operator) {
	limit, err := queryLimit(r, 50, 200)
	if err != nil {
		s.badRequest(w, err)
		return
	}
	id := p.ByName("id")
	if _, err := s.sys.Marquee(id); err != nil {
		s.writeErr(w, err)
		return
	}
	items, err := s.sys.History(id, limit)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) pools(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ Operator) {
	ps, err := s.sys.Pools(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": ps})
}

func (s *Server) pool(w http.ResponseWriter, r *http.Request, p httprouter.Params, _ Operator) {
	v, err := s.sys.Pool(r.Context(), p.ByName("name"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) actors(w http.ResponseWriter, _ *http.Request, _ httprouter.Params, _ Operator) {
	writeJSON(w, http.StatusOK, map[string]any{"items": s.sys.Actors(), "ready": s.sys.Ready()})
}

// View is the operator's view of a marquee (docs/rules/http-api.md). Secrets are
// replaced by "[redacted]".
type View struct {
	ID        string          `json:"id"`
	Kind      marquee.Origin  `json:"kind"`
	Serving   marquee.Serving `json:"serving"`
	Lifecycle string          `json:"lifecycle,omitempty"`
	// Progress is the workflow's last step while an attempt is under way.
	Progress   string `json:"progress,omitempty"`
	Generation uint64 `json:"generation"`
	// Status, Next and Classes say what it is doing and why, and what
	// warden does next.
	Status  string        `json:"status"`
	Next    *marquee.Next `json:"next"`
	Classes []string      `json:"classes"`
	// Failure: why a failed marquee failed.
	Failure *marquee.Failure `json:"failure,omitempty"`
	// LastVeto: the last downgrade live chats held off.
	LastVeto *marquee.Veto `json:"last_veto,omitempty"`
	// Tombstone: a reaped marquee stays readable.
	Tombstone        *marquee.Tombstone `json:"tombstone,omitempty"`
	Attempt          *AttemptView       `json:"attempt"`
	Connection       *ConnectionView    `json:"connection"`
	NullConfirmation *NullView          `json:"null_confirmation"`
	Retry            *RetryView         `json:"retry"`
	Admission        *AdmissionView     `json:"admission"`
	Downgrade        *DowngradeView     `json:"downgrade,omitempty"`
	UpdatedAt        time.Time          `json:"updated_at"`
	// Result and Reason answer an operator command that was not applied
	// (ignored): its result and why.
	Result string `json:"result,omitempty"`
	Reason string `json:"reason,omitempty"`
}

type AttemptView struct {
	Generation     uint64     `json:"generation"`
	Action         string     `json:"action"`
	Dispatch       string     `json:"dispatch"`
	DispatchedAt   *time.Time `json:"dispatched_at"`
	LastCallbackAt *time.Time `json:"last_callback_at"`
	// RunID and RunURL: the workflow run, where the dispatch returned it.
	RunID  uint64 `json:"run_id,omitempty"`
	RunURL string `json:"run_url,omitempty"`
}

type ConnectionView struct {
	Host          string      `json:"host"`
	Port          int         `json:"port"`
	User          string      `json:"user"`
	FreeDomain    string      `json:"free_domain"`
	SSHPrivateKey string      `json:"ssh_private_key"`
	ACMEDNS       ACMEDNSView `json:"acme_dns"`
}

type ACMEDNSView struct {
	ServerURL  string `json:"server_url"`
	Username   string `json:"username"`
	Password   string `json:"password"`
	Subdomain  string `json:"subdomain"`
	FullDomain string `json:"full_domain"`
}

type NullView struct {
	Pending   bool      `json:"pending"`
	ExpiresAt time.Time `json:"expires_at"`
}

// RetryView is shown once a stuck retry has happened: how many,
// and when the next one is due.
type RetryView struct {
	Count  int        `json:"count"`
	NextAt *time.Time `json:"next_at"`
}

type AdmissionView struct {
	Pool     string `json:"pool"`
	Status   string `json:"status"`
	Sequence uint64 `json:"sequence"`
}

type DowngradeView struct {
	Verb   string `json:"verb"`
	Asking bool   `json:"asking"`
	// RecheckAt: when the control plane is asked again, while unanswered.
	RecheckAt  *time.Time `json:"recheck_at"`
	Unanswered int        `json:"unanswered"`
}

const redacted = "[redacted]"

// redact hides a secret's value but not whether there is one.
func redact(v string) string {
	if v == "" {
		return ""
	}
	return redacted
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func viewOf(st marquee.State, m marquee.Machine, now time.Time) View {
	status := m.Status(st, now)
	v := View{ID: st.ID, Kind: st.Kind, Serving: st.Serving, Generation: st.Generation, UpdatedAt: st.UpdatedAt,
		Status: status.Text, Next: status.Next, Classes: nonNil(status.Classes), Failure: st.Failure, LastVeto: st.LastVeto, Tombstone: st.Tombstone}
	if st.Kind == marquee.Tutorial {
		v.Lifecycle, v.Progress = lifecycleOf(st), progressOf(st)
	}
	if a := st.Attempt; a != nil {
		v.Attempt = &AttemptView{Generation: a.Generation, Action: string(a.Action), Dispatch: string(a.Dispatch),
			DispatchedAt: timePtr(a.DispatchedAt), LastCallbackAt: timePtr(a.LastCallbackAt), RunID: a.RunID, RunURL: a.RunURL}
	}
	if c := st.Connection; c != nil {
		v.Connection = &ConnectionView{Host: c.Host, Port: c.Port, User: c.User, FreeDomain: c.FreeDomain, SSHPrivateKey: redact(c.SSHPrivateKey),
			ACMEDNS: ACMEDNSView{ServerURL: c.ACMEDNS.ServerURL, Username: redact(c.ACMEDNS.Username), Password: redact(c.ACMEDNS.Password),
				Subdomain: c.ACMEDNS.Subdomain, FullDomain: c.ACMEDNS.FullDomain}}
	}
	if st.NullPending(now) {
		v.NullConfirmation = &NullView{Pending: true, ExpiresAt: st.NullPendingUntil}
	}
	// A healthy attempt's stuck deadline is not a planned retry: it is
	// `next`. The retry block appears once a retry has happened.
	if st.RetryCount > 0 && !st.Lifecycle.Settled() {
		rv := &RetryView{Count: st.RetryCount}
		for _, d := range m.Deadlines(st) {
			if _, ok := d.Event.(marquee.RetryDue); ok {
				rv.NextAt = timePtr(d.At)
			}
		}
		v.Retry = rv
	}
	if a := st.Admission; a != nil {
		v.Admission = &AdmissionView{Pool: a.Pool, Status: string(a.Status), Sequence: a.Sequence}
	}
	if d := st.Downgrade; d != nil {
		v.Downgrade = &DowngradeView{Verb: string(d.Verb), Asking: d.Asking, RecheckAt: timePtr(d.RecheckAt), Unanswered: d.Unanswered}
	}
	return v
}
