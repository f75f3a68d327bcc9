package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
)

// Lists that scale: limit (default 100, at most 1000), an opaque
// cursor, filters on every state axis and on status class, unknown names
// or values refused (checkQuery), and summaries; the full view is per id.

const (
	listDefault = 100
	listMax     = 1000
	// maxScan bounds the records one page reads: a filter that matches
	// little returns a short (even empty) page and a cursor to go on, so
	// no request reads the whole store (BENCHMARKS.md times a full scan).
	// Follow next_cursor until it is empty.
	maxScan = 5000
)

// A cursor is the last id of the page, prefixed by its kind and encoded,
// so that a client treats it as opaque and a marquee cursor is not an
// environment one.
func encodeCursor(kind, lastID string) string {
	if lastID == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + lastID))
}

func decodeCursor(kind, cursor string, valid func(string) bool) (string, error) {
	if cursor == "" {
		return "", nil
	}
	// Strict: a cursor has one spelling (non-zero trailing bits would be
	// another, found by FuzzDecodeCursor).
	raw, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	id, ok := strings.CutPrefix(string(raw), kind+":")
	// One spelling per cursor: the decoder skips newlines, so only a
	// cursor that encodes back to itself is one this server gave.
	if err != nil || !ok || !valid(id) || encodeCursor(kind, id) != cursor {
		return "", invalidf("query cursor: not a cursor this server gave for %ss", kind)
	}
	return id, nil
}

// Status classes of marquees; parked is the actor's, the rest the
// machine's.
var marqueeClasses = []string{marquee.ClassRetrying, marquee.ClassWaitingConfirmation, marquee.ClassVetoed, marquee.ClassFailed, "parked"}

// MarqueeSummary is one row of a marquee list.
type MarqueeSummary struct {
	ID         string          `json:"id"`
	Kind       marquee.Origin  `json:"kind"`
	Serving    marquee.Serving `json:"serving"`
	Lifecycle  string          `json:"lifecycle,omitempty"`
	Progress   string          `json:"progress,omitempty"`
	Pool       string          `json:"pool,omitempty"`
	Generation uint64          `json:"generation"`
	Status     string          `json:"status"`
	Next       *marquee.Next   `json:"next"`
	Classes    []string        `json:"classes"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

func marqueeListRules() []queryRule {
	return []queryRule{{name: "kind", values: []string{"byo", "tutorial"}},
		{name: "serving", values: []string{"disabled", "active", "errored"}},
		{name: "lifecycle", values: []string{"provisioning", "provisioned", "destroying", "destroyed", "failed", "tombstone"}},
		{name: "progress", values: []string{"queued", "vm_starting", "ssh_configuring", "tls_provisioning", "app_deploying"}},
		{name: "pool"}, {name: "status", values: marqueeClasses},
		{name: "limit"}, {name: "cursor"}}
}

// lifecycleOf is the list's lifecycle axis: a reaped marquee is a
// tombstone whatever it was before.
func lifecycleOf(st marquee.State) string {
	if st.Tombstone != nil {
		return "tombstone"
	}
	return string(st.Lifecycle)
}

// progressOf is a tutorial marquee's progress, always: the contract
// shows it (a null while provisioning leaves it queued beside
// lifecycle failed), and a field of the contract does not come and go.
// The console hides it where it is noise (a settled marquee).
func progressOf(st marquee.State) string {
	if st.Kind != marquee.Tutorial || st.Tombstone != nil {
		return ""
	}
	return st.Progress.String()
}

// progressShown is whether the console shows the progress: only while an
// attempt is under way.
func progressShown(st marquee.State) bool {
	return progressOf(st) != "" && !st.Lifecycle.Settled()
}

func (s *Server) listMarquees(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ Operator) {
	rows, next, err := s.marqueeRows(r.URL.Query())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": rows, "next_cursor": next})
}

// limitOf reads limit from q: default listDefault, at most listMax.
func limitOf(q url.Values) (int, error) { return limitFrom(q, listDefault, listMax) }

// marqueeRows is one page of marquee summaries for the filters in q (the
// API's list and the console's); the next cursor is "" on the last page.
// Malformed records are logged and skipped.
func (s *Server) marqueeRows(q url.Values) ([]MarqueeSummary, string, error) {
	limit, err := limitOf(q)
	if err != nil {
		return nil, "", err
	}
	after, err := decodeCursor("marquee", q.Get("cursor"), marquee.ValidID)
	if err != nil {
		return nil, "", err
	}
	kind, serving, lifecycle, progress, pool, class := q.Get("kind"), q.Get("serving"), q.Get("lifecycle"), q.Get("progress"), q.Get("pool"), q.Get("status")
	parked := map[string]bool{}
	if class == "parked" {
		for _, a := range s.sys.Actors() {
			if a.Kind == "marquee" && a.Parked {
				parked[a.ID] = true
			}
		}
	}
	m, now := s.sys.Machine(), s.sys.Now()
	statuses := map[string]marquee.Status{}
	page, err := s.sys.Marquees(after, limit, maxScan, func(st marquee.State) bool {
		if (kind != "" && string(st.Kind) != kind) || (serving != "" && string(st.Serving) != serving) ||
			(pool != "" && st.Pool != pool) || (progress != "" && progressOf(st) != progress) {
			return false
		}
		// Tombstones are listed only when asked for.
		if lc := lifecycleOf(st); (lifecycle == "" && lc == "tombstone") || (lifecycle != "" && lc != lifecycle) {
			return false
		}
		if class == "" {
			return true
		}
		if class == "parked" {
			return parked[st.ID]
		}
		status := m.Status(st, now)
		statuses[st.ID] = status
		return slices.Contains(status.Classes, class)
	})
	if err != nil {
		return nil, "", err
	}
	for _, b := range page.Malformed {
		s.log.Error("malformed marquee record", "key", b.Key, "reason", b.Reason)
	}
	rows := make([]MarqueeSummary, 0, len(page.Items))
	for _, st := range page.Items {
		status, ok := statuses[st.ID]
		if !ok {
			status = m.Status(st, now)
		}
		rows = append(rows, MarqueeSummary{ID: st.ID, Kind: st.Kind, Serving: st.Serving, Lifecycle: lifecycleOf(st), Progress: progressOf(st),
			Pool: st.Pool, Generation: st.Generation, Status: status.Text, Next: status.Next, Classes: nonNil(status.Classes), UpdatedAt: st.UpdatedAt})
	}
	return rows, encodeCursor("marquee", page.Next), nil
}

// Status classes of environments.
var envClasses = []string{environment.ClassRetrying, environment.ClassWaitingOperator, environment.ClassDriftOpen, environment.ClassFailed}

// EnvSummary is one row of an environment list.
type EnvSummary struct {
	ID           string            `json:"id"`
	Branch       string            `json:"branch"`
	Revision     string            `json:"revision"`
	Generation   uint64            `json:"generation"`
	Desired      string            `json:"desired"`
	State        environment.Phase `json:"state"`
	URL          string            `json:"url,omitempty"`
	SupersededBy uint64            `json:"superseded_by,omitempty"`
	ExpiresAt    *time.Time        `json:"expires_at"`
	Status       string            `json:"status"`
	Next         *environment.Next `json:"next"`
	Classes      []string          `json:"classes"`
	UpdatedAt    time.Time         `json:"updated_at"`
}

func envListRules() []queryRule {
	phases := make([]string, 0, len(environment.Phases))
	for _, p := range environment.Phases {
		phases = append(phases, string(p))
	}
	return []queryRule{{name: "state", values: phases}, {name: "desired", values: []string{"ready", "removed"}},
		{name: "branch"}, {name: "status", values: envClasses}, {name: "limit"}, {name: "cursor"}}
}

func (s *Server) listEnvs(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ Operator) {
	rows, next, err := s.envRows(r.URL.Query())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": rows, "next_cursor": next})
}

// envRows is one page of environment summaries for the filters in q.
func (s *Server) envRows(q url.Values) ([]EnvSummary, string, error) {
	limit, err := limitOf(q)
	if err != nil {
		return nil, "", err
	}
	after, err := decodeCursor("environment", q.Get("cursor"), environment.ValidID)
	if err != nil {
		return nil, "", err
	}
	state, desired, branch, class := q.Get("state"), q.Get("desired"), q.Get("branch"), q.Get("status")
	m, now := s.sys.EnvMachine(), s.sys.Now()
	statuses := map[string]environment.Status{}
	page, err := s.sys.Environments(after, limit, maxScan, func(e environment.Env) bool {
		if (state != "" && string(e.State) != state) || (desired != "" && e.Desired != desired) || (branch != "" && e.Branch != branch) {
			return false
		}
		if class == "" {
			return true
		}
		st := m.Status(e, now)
		statuses[e.ID] = st
		return slices.Contains(st.Classes, class)
	})
	if err != nil {
		return nil, "", err
	}
	for _, b := range page.Malformed {
		s.log.Error("malformed environment record", "key", b.Key, "reason", b.Reason)
	}
	rows := make([]EnvSummary, 0, len(page.Items))
	for _, e := range page.Items {
		st, ok := statuses[e.ID]
		if !ok {
			st = m.Status(e, now)
		}
		rows = append(rows, EnvSummary{ID: e.ID, Branch: e.Branch, Revision: e.Revision, Generation: e.Generation, Desired: e.Desired, State: e.State,
			URL: servedURL(m, e), SupersededBy: e.SupersededBy, ExpiresAt: expiresAt(e), Status: st.Text, Next: st.Next, Classes: nonNil(st.Classes),
			UpdatedAt: e.UpdatedAt})
	}
	return rows, encodeCursor("environment", page.Next), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ViewValues are the values a field of a marquee's ("marquees") or an
// environment's ("environments") view may take, for the fields whose
// values are a fixed list that the lists' filters take too: what `warden
// wait --for` checks before it waits, so that a typo of a value is refused
// as `get` refuses it.
func ViewValues(kind string) map[string][]string {
	rules := marqueeListRules()
	fields := []string{"kind", "serving", "lifecycle", "progress"}
	if kind == "environments" {
		rules, fields = envListRules(), []string{"state", "desired"}
	}
	out := map[string][]string{}
	for _, r := range rules {
		if slices.Contains(fields, r.name) {
			out[r.name] = r.values
		}
	}
	return out
}
