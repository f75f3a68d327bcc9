package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/cluster"
)

// The console (O6-O8): server-rendered pages from templates and assets
// embedded in the binary, a little JavaScript for confirmations and live
// updates, signed in with an operator's or viewer's token that is kept
// server-side (the browser holds an HttpOnly, SameSite=Strict session
// cookie, never the token), every change confirmed, given a reason and
// carrying the session's CSRF token, under a Content-Security-Policy with
// no inline script or style.

//go:embed console
var consoleFS embed.FS

// contentSecurityPolicy allows only the console's own files.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

const (
	sessionCookie = "warden_session"
	sessionTTL    = 12 * time.Hour
	// maxSessions bounds the server-side session table; beyond it the
	// oldest session is signed out.
	maxSessions = 10_000
)

type session struct {
	op      Operator
	csrf    string
	expires time.Time
}

// console serves the pages; it is mounted beside the API router, not in
// it: its routes are pages, not API (the OpenAPI document covers the API).
type console struct {
	s        *Server
	pages    map[string]*template.Template
	static   http.Handler
	mu       sync.Mutex
	sessions map[string]*session // by the SHA-256 of the cookie value
}

func newConsole(s *Server) *console {
	c := &console{s: s, pages: consolePages(), sessions: map[string]*session{}}
	static, _ := fs.Sub(consoleFS, "console/static")
	c.static = http.StripPrefix("/ui/static/", http.FileServer(http.FS(static)))
	return c
}

// consolePages are the console's pages, parsed once per process: every
// server shares them (a template executes concurrently), and a process
// that starts many servers (the simulator restarts one per crash) parses
// them once.
var consolePages = sync.OnceValue(func() map[string]*template.Template {
	funcs := template.FuncMap{
		"when": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				if v.IsZero() {
					return "-"
				}
				return v.UTC().Format("2006-01-02 15:04:05")
			case *time.Time:
				if v == nil {
					return "-"
				}
				return v.UTC().Format("2006-01-02 15:04:05")
			}
			return fmt.Sprint(t)
		},
		"has":  slices.Contains[[]string, string],
		"list": func(s ...string) []string { return s },
		"left": func(until *time.Time, now time.Time) string {
			if until == nil {
				return "-"
			}
			return until.Sub(now).Round(time.Minute).String()
		},
		"since": func(from, now time.Time) string { return now.Sub(from).Round(time.Second).String() },
		"q": func(base url.Values, key, value string) string {
			v := url.Values{}
			for k, vs := range base {
				if k != "cursor" {
					v[k] = vs
				}
			}
			if value == "" {
				v.Del(key)
			} else {
				v.Set(key, value)
			}
			if len(v) == 0 {
				return "?"
			}
			return "?" + v.Encode()
		},
	}
	pages := map[string]*template.Template{}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(consoleFS, "console/templates/layout.html", "console/templates/explain.html"))
	for _, page := range []string{"login", "marquees", "marquee", "environments", "environment", "pools", "process", "cluster"} {
		pages[page] = template.Must(template.Must(layout.Clone()).ParseFS(consoleFS, "console/templates/"+page+".html"))
	}
	return pages
})

func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	path := r.URL.Path
	switch {
	case path == "/" || path == "/ui" || path == "/ui/":
		http.Redirect(w, r, "/ui/marquees", http.StatusSeeOther)
		return
	case strings.HasPrefix(path, "/ui/static/"):
		if name := strings.TrimPrefix(path, "/ui/static/"); !utf8.ValidString(name) || !fs.ValidPath(name) {
			// A name no file can have (an invalid byte was a 500).
			refuse(w, notFound, "no such file")
			return
		}
		h.Set("Cache-Control", "no-cache")
		c.static.ServeHTTP(w, r)
		return
	case path == "/ui/login":
		c.login(w, r)
		return
	}
	sess := c.session(r)
	if sess == nil {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		refuse(w, unauthenticated, "sign in first")
		return
	}
	if r.Method == http.MethodPost {
		c.post(w, r, sess, path)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		refuse(w, methodNotAllowed, "method not allowed on this page")
		return
	}
	if err := c.s.sys.Readable(); err != nil {
		c.s.writeErr(w, err)
		return
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(path, "/ui/"), "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "marquees":
		c.marquees(w, r, sess)
	case len(parts) == 2 && parts[0] == "marquees":
		c.marquee(w, r, sess, parts[1])
	case len(parts) == 1 && parts[0] == "environments":
		c.environments(w, r, sess)
	case len(parts) == 2 && parts[0] == "environments":
		c.environment(w, r, sess, parts[1])
	case len(parts) == 1 && parts[0] == "pools":
		c.pools(w, r, sess)
	case len(parts) == 1 && parts[0] == "cluster":
		c.cluster(w, r, sess)
	case len(parts) == 1 && parts[0] == "process":
		c.render(w, r, sess, "process", "Process", map[string]any{"Actors": c.s.sys.Actors(), "Ready": c.s.sys.Ready()})
	default:
		c.notFound(w, r, sess)
	}
}

func (c *console) notFound(w http.ResponseWriter, r *http.Request, sess *session) {
	w.WriteHeader(notFound.status())
	c.render(w, r, sess, "process", "Not found", map[string]any{"NotFound": r.URL.Path})
}

// render writes a page, or only its main part when the live-update
// script asks for it (X-Partial).
func (c *console) render(w http.ResponseWriter, r *http.Request, sess *session, page, title string, data map[string]any) {
	data["Title"], data["Page"] = title, page
	if sess != nil {
		data["Op"], data["CSRF"], data["CanAct"] = sess.op, sess.csrf, sess.op.Role == RoleOperator
	}
	name := "layout.html"
	if r.Header.Get("X-Partial") == "1" {
		name = "main"
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, name, data); err != nil {
		c.s.log.Error("console template", "page", page, "err", err)
		refuse(w, internal, "page could not be rendered")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// login signs in with a token: it is checked like an API token, and only
// a session id goes back to the browser. The form is read within 8 KiB
// before anything of it is looked at; it must carry the sign-in cookie's
// token (set with the form, SameSite=Strict), so that another site cannot
// sign a victim in as the attacker (login CSRF), and come from this
// origin when the browser says where it comes from; and failures from one
// address are limited.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost:
	default:
		refuse(w, methodNotAllowed, "method not allowed on this page")
		return
	}
	if r.Method != http.MethodPost {
		token := randomHex(32)
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: token, Path: "/ui/login", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: c.secure(r), MaxAge: int(loginTTL / time.Second)})
		c.render(w, r, nil, "login", "Sign in", map[string]any{"Next": SafeNext(r.URL.Query().Get("next")), "LoginCSRF": token,
			"DevToken": c.s.opts.DevTokenHint})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		refuse(w, tooLarge, "the sign-in form is at most 8 KiB")
		return
	}
	next := SafeNext(r.PostFormValue("next"))
	addr := clientAddr(r)
	if fail := c.s.limiter.refused(addr, "console"); fail != nil {
		fail.write(w)
		return
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || len(ck.Value) != 64 || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) != 1 || !c.sameOrigin(r) {
		refuse(w, forbidden, "the sign-in form must be sent from this console's own page (reload it and try again)")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	op, ok := c.s.operatorOf(sha256.Sum256([]byte(token)))
	if token == "" || !ok {
		c.s.limiter.failed(addr)
		w.WriteHeader(unauthenticated.status())
		fresh := randomHex(32)
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: fresh, Path: "/ui/login", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: c.secure(r), MaxAge: int(loginTTL / time.Second)})
		c.render(w, r, nil, "login", "Sign in", map[string]any{"Next": next, "Failed": true, "LoginCSRF": fresh, "DevToken": c.s.opts.DevTokenHint})
		return
	}
	id, sess := c.newSession(op)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/ui/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: c.secure(r), Expires: sess.expires})
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/ui/login", MaxAge: -1})
	c.s.log.Info("console sign-in", "operator", op.Name, "role", op.Role)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// The sign-in form's own cookie: its token must come back with the form.
const (
	loginCookie = "warden_login"
	loginTTL    = 30 * time.Minute
)

// secure is whether cookies must be Secure: the console is served over
// TLS, here or (behind a proxy) at its public URL.
func (c *console) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(c.s.opts.PublicURL), "https://")
}

// sameOrigin checks the browser's Origin (or Referer) header, where it
// sent one, against this server: the request's own host or the public
// URL's.
func (c *console) sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" {
		from = r.Header.Get("Referer")
	}
	if from == "" || from == "null" {
		// A browser that says nothing, or "null" (what it sends under the
		// console's no-referrer policy): the cookie's token still holds.
		return true
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" {
		return false
	}
	if u.Host == r.Host {
		return true
	}
	pub, err := url.Parse(c.s.opts.PublicURL)
	return err == nil && pub.Host != "" && strings.EqualFold(u.Host, pub.Host) && strings.EqualFold(u.Scheme, pub.Scheme)
}

// SafeNext is where a sign-in may go on to: a console page of this
// server, decided on the path as it will be followed (decoded, cleaned),
// never the raw string ("/ui/..%2F%5Cevil.example" passed a
// prefix check and became "/\evil.example", which browsers follow to
// another host).
func SafeNext(raw string) string {
	const home = "/ui/marquees"
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return home
	}
	p := u.Path
	if strings.ContainsAny(p, "\\\x00\r\n\t") {
		return home
	}
	clean := path.Clean(p)
	if !strings.HasPrefix(clean, "/ui/") || strings.HasPrefix(clean, "//") {
		return home
	}
	out := (&url.URL{Path: clean, RawQuery: u.RawQuery}).String()
	if !strings.HasPrefix(out, "/ui/") {
		return home
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (c *console) newSession(op Operator) (string, *session) {
	id := randomHex(32)
	sess := &session{op: op, csrf: randomHex(32), expires: c.s.sys.Clock().Now().Add(sessionTTL)}
	key := sha256.Sum256([]byte(id))
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= maxSessions {
		var oldest string
		for k, s := range c.sessions {
			if oldest == "" || s.expires.Before(c.sessions[oldest].expires) {
				oldest = k
			}
		}
		delete(c.sessions, oldest)
	}
	c.sessions[hex.EncodeToString(key[:])] = sess
	return id, sess
}

func (c *console) session(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || len(ck.Value) != 64 {
		return nil
	}
	key := sha256.Sum256([]byte(ck.Value))
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[hex.EncodeToString(key[:])]
	if s == nil || c.s.sys.Clock().Now().After(s.expires) {
		return nil
	}
	return s
}

func (c *console) endSession(r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		key := sha256.Sum256([]byte(ck.Value))
		c.mu.Lock()
		delete(c.sessions, hex.EncodeToString(key[:]))
		c.mu.Unlock()
	}
}

// post handles the console's changes: sign-out and actions. Each needs the
// session's CSRF token; actions need the operator role, a confirmation
// and a reason.
func (c *console) post(w http.ResponseWriter, r *http.Request, sess *session, path string) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		refuse(w, invalidRequest, "form: "+err.Error())
		return
	}
	csrf := r.PostFormValue("csrf")
	if csrf == "" {
		csrf = r.Header.Get("X-CSRF-Token")
	}
	if subtle.ConstantTimeCompare([]byte(csrf), []byte(sess.csrf)) != 1 {
		refuse(w, forbidden, "missing or wrong CSRF token; reload the page")
		return
	}
	if path == "/ui/logout" {
		c.endSession(r)
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	if path != "/ui/act" && path != "/ui/drain" {
		refuse(w, notFound, "no such action")
		return
	}
	if sess.op.Role != RoleOperator {
		refuse(w, forbidden, "a viewer changes nothing (T8)")
		return
	}
	if path == "/ui/drain" {
		c.drain(w, r, sess)
		return
	}
	c.act(w, r, sess)
}

// ownedHere answers, when this node of a cluster does not own the
// entity, where its action must be taken: a console session lives on one
// node, and an action for an entity another node owns is taken there.
func (c *console) ownedHere(w http.ResponseWriter, kind, id string) bool {
	node := c.s.opts.Cluster
	if node == nil || (kind != "marquee" && kind != "environment") {
		return true
	}
	shard := cluster.ShardOf(kind, id)
	if node.Owns(shard) {
		return true
	}
	owner, url := node.OwnerURL(shard)
	if url == "" {
		c.s.writeErr(w, fmt.Errorf("%w: %s %s: shard %d is moving; try again in a second", errs.Moving, kind, id, shard))
		return false
	}
	refuse(w, notOwner, fmt.Sprintf("%s %s is owned by node %s: act on its console, %s/ui/", kind, id, owner, url))
	return false
}

// act takes an operator's confirmed action on a marquee or an
// environment, with its reason.
func (c *console) act(w http.ResponseWriter, r *http.Request, sess *session) {
	kind, id, action, reason := r.PostFormValue("kind"), r.PostFormValue("id"), r.PostFormValue("action"), strings.TrimSpace(r.PostFormValue("reason"))
	if r.PostFormValue("confirm") != "yes" {
		refuse(w, invalidRequest, "confirm the action")
		return
	}
	if reason == "" || len(reason) > maxReason {
		refuse(w, invalidRequest, fmt.Sprintf("give a reason (1..%d bytes)", maxReason))
		return
	}
	if !c.ownedHere(w, kind, id) {
		return
	}
	var status string
	var err error
	switch kind {
	case "marquee":
		ev, ok := map[string]marquee.Event{"redeploy": marquee.Redeploy{By: sess.op.Name}, "destroy": marquee.Destroy{By: sess.op.Name},
			"disable": marquee.Disable{By: sess.op.Name}, "enable": marquee.Enable{By: sess.op.Name}, "run-now": marquee.RunNow{By: sess.op.Name}}[action]
		if !ok || !marquee.ValidID(id) {
			refuse(w, invalidRequest, "unknown marquee action")
			return
		}
		var st marquee.State
		if st, err = c.s.sys.Command(r.Context(), id, ev); err == nil {
			status = c.s.sys.Machine().Status(st, c.s.sys.Now()).Text
		}
	case "environment":
		if !environment.ValidID(id) {
			refuse(w, invalidRequest, "unknown environment")
			return
		}
		var ev environment.Event = environment.Action{Name: action, Actor: sess.op.Name, Reason: reason}
		if action == "remove" {
			ev = environment.RemoveEnv{Reason: reason, By: sess.op.Name}
		}
		var e environment.Env
		if e, err = c.s.sys.EnvironmentCommand(r.Context(), id, ev); err == nil {
			status = c.s.sys.EnvMachine().Status(e, c.s.sys.Now()).Text
		}
	default:
		refuse(w, invalidRequest, "kind: marquee or environment")
		return
	}
	if err != nil {
		c.s.writeErr(w, err)
		return
	}
	c.s.log.Info("console action", "operator", sess.op.Name, "kind", kind, "id", id, "action", action, "reason", reason)
	writeJSON(w, http.StatusOK, map[string]string{"status": status})
}

func (c *console) marquees(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	if err := checkQuery(q, marqueeListRules()...); err != nil {
		refuse(w, invalidRequest, err.Error())
		return
	}
	q.Set("limit", "50")
	rows, next, err := c.s.marqueeRows(q)
	if err != nil {
		c.s.writeErr(w, err)
		return
	}
	q.Del("limit")
	// The counts are the system's census (one count of the store for the
	// metrics and the console, at most every ten seconds).
	census := c.s.sys.Census()
	c.render(w, r, sess, "marquees", "Marquees", map[string]any{"Rows": rows, "Next": next, "Query": q,
		"Classes": marqueeClasses, "Counts": census.Classes, "Total": census.Live, "Filter": q.Get("status")})
}

// timelineEntry is one history line, banded by generation, with the
// callbacks that changed nothing set apart.
type timelineEntry struct {
	marquee.Entry
	NewBand bool
	Aside   bool
}

func (c *console) marquee(w http.ResponseWriter, r *http.Request, sess *session, id string) {
	if !marquee.ValidID(id) {
		c.notFound(w, r, sess)
		return
	}
	st, err := c.s.sys.Marquee(id)
	if err != nil {
		c.notFound(w, r, sess)
		return
	}
	hist, err := c.s.sys.History(id, 200)
	if err != nil {
		c.s.writeErr(w, err)
		return
	}
	var timeline []timelineEntry
	band := ^uint64(0)
	for i := len(hist) - 1; i >= 0; i-- { // oldest first
		e := hist[i]
		te := timelineEntry{Entry: e, NewBand: e.Generation != band,
			Aside: e.Result == marquee.Stale || e.Result == marquee.Duplicate || e.Result == marquee.Locked}
		band = e.Generation
		timeline = append(timeline, te)
	}
	v := viewOf(st, c.s.sys.Machine(), c.s.sys.Now())
	actions := []string{}
	if st.Tombstone == nil {
		if st.Kind == marquee.Tutorial {
			actions = append(actions, "redeploy", "destroy", "run-now")
		}
		actions = append(actions, "disable", "enable")
	}
	now := c.s.sys.Now()
	x := consoleExplain{Awaiting: c.s.sys.Machine().Awaiting(st, now), BlockedBy: c.s.blockers(r, st, now)}
	c.render(w, r, sess, "marquee", "Marquee "+id, map[string]any{"V": v, "Timeline": timeline, "Actions": actions, "ShowProgress": progressShown(st), "Explain": x})
}

// consoleExplain is an entity's explanation as its console page shows it
// at the top: what would move it now, and what holds it.
type consoleExplain struct {
	Awaiting  []entity.Input
	BlockedBy []blocker
}

func (c *console) environments(w http.ResponseWriter, r *http.Request, sess *session) {
	q := r.URL.Query()
	if err := checkQuery(q, envListRules()...); err != nil {
		refuse(w, invalidRequest, err.Error())
		return
	}
	q.Set("limit", "50")
	rows, next, err := c.s.envRows(q)
	if err != nil {
		c.s.writeErr(w, err)
		return
	}
	q.Del("limit")
	c.render(w, r, sess, "environments", "Environments", map[string]any{"Rows": rows, "Next": next, "Query": q, "Classes": envClasses,
		"Filter": q.Get("status"), "Now": c.s.sys.Now()})
}

// resourceRow puts an environment resource's desired and observed values
// side by side.
type resourceRow struct {
	environment.Resource
	Desired string
	Matches bool
}

func (c *console) environment(w http.ResponseWriter, r *http.Request, sess *session, id string) {
	if !environment.ValidID(id) {
		c.notFound(w, r, sess)
		return
	}
	e, err := c.s.sys.Environment(id)
	if err != nil {
		c.notFound(w, r, sess)
		return
	}
	v := c.s.envView(e, defaultReceipts)
	var rows []resourceRow
	for _, res := range e.Resources {
		desired := desiredOf(e, res.Capability)
		rows = append(rows, resourceRow{Resource: res, Desired: desired, Matches: desired == "kept" || (desired == "present") == (res.Status == "present")})
	}
	x := consoleExplain{Awaiting: c.s.sys.EnvMachine().Awaiting(e, c.s.sys.Now()), BlockedBy: envBlockers(e)}
	c.render(w, r, sess, "environment", "Environment "+id, map[string]any{"V": v, "Resources": rows, "Rules": actionRules, "Explain": x})
}

// desiredOf is what an environment wants of one of its resources:
// present while it is wanted (its application stopped while it is
// asleep), absent once removed, except its artifact,
// a shared and immutable build output that removal keeps on purpose
// (a removed environment's artifact showed as a mismatch).
func desiredOf(e environment.Env, c environment.Capability) string {
	switch {
	case e.Asleep() && c == environment.App:
		return "stopped" // asleep, as E19 leaves it
	case e.Desired != "removed" && e.Tombstone == nil:
		return "present"
	case c == environment.Artifact:
		return "kept"
	}
	return "absent"
}

// actionRules names the rule behind each environment action.
var actionRules = map[string]string{"resume": "E9, E16", "repair": "E15", "adopt": "E15", "continue-removal": "E11, E15",
	"abandon": "E16", "rollback-route": "E15, I14", "remove": "E11", "sleep": "E19", "wake": "E20"}

func (c *console) pools(w http.ResponseWriter, r *http.Request, sess *session) {
	ps, err := c.s.sys.Pools(r.Context())
	if err != nil {
		c.s.writeErr(w, err)
		return
	}
	explain := map[string]consoleExplain{}
	for _, p := range ps {
		explain[p.Name] = consoleExplain{Awaiting: p.Awaiting(c.s.sys.Now())}
	}
	c.render(w, r, sess, "pools", "Pools", map[string]any{"Pools": ps, "Now": c.s.sys.Now(), "Explain": explain})
}

// cluster is the cluster page: members, shard owners and epochs, and
// the drain button.
func (c *console) cluster(w http.ResponseWriter, r *http.Request, sess *session) {
	data := map[string]any{}
	if node := c.s.opts.Cluster; node != nil {
		v := node.View()
		owned := map[string]int{}
		for _, s := range v.Shards {
			owned[s.Owner]++
		}
		data["Cluster"], data["Owned"] = v, owned
	}
	c.render(w, r, sess, "cluster", "Cluster", data)
}

// drain is the console's drain button: confirmed, then as POST
// /v1/cluster/drain.
func (c *console) drain(w http.ResponseWriter, r *http.Request, sess *session) {
	node := c.s.opts.Cluster
	if node == nil {
		refuse(w, notFound, "this warden is a single node")
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		refuse(w, invalidRequest, "confirm the drain")
		return
	}
	if err := node.Drain(r.Context()); err != nil {
		c.s.writeErr(w, fmt.Errorf("%w: drain: %v", errs.Unavailable, err))
		return
	}
	c.s.log.Info("console drain", "operator", sess.op.Name, "node", node.Name())
	http.Redirect(w, r, "/ui/cluster", http.StatusSeeOther)
}
