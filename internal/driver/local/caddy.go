package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/internal/driver"
)

// Routes drives the "route" and "smoke" capabilities on Caddy (P7, P8):
// one route per branch in one of Caddy's servers, addressed by its @id,
// matching the branch's host name, tagging every answer with the
// environment and route generation it serves, and proxying to that
// environment's application. Every change is a compare-and-set on Caddy's
// ETag (If-Match), after reading the generation the route holds now: a
// route a newer generation holds is never overwritten (E8, I14).
type Routes struct {
	// Admin is Caddy's admin API, e.g. http://127.0.0.1:2019.
	Admin string
	// Server names the Caddy server holding the preview routes.
	Server string
	// Public is where that server listens, e.g. 127.0.0.1:8088; Domain is
	// the branches' parent name: a branch is at <branch>.<Domain>.
	Public, Domain string
	// Upstream is where an environment's application listens.
	Upstream func(env string) (string, error)
	// Console is warden's console, linked from the page a host with no
	// preview answers.
	Console string
	// Waker is where Caddy reaches warden's waker (host:port): a sleeping
	// preview's route sends its host there (E19). Empty: previews do not
	// sleep here.
	Waker string
	// Traffic reads the server's access log for the last request under
	// each host (nil: none is known).
	Traffic *AccessLog
	// Client asks Caddy's admin API (nil: adminClient); Checks asks
	// through Caddy's listener (smoke checks; nil: http.DefaultClient).
	// The platform gives both the drivers' share of descriptors.
	Client, Checks *http.Client
}

// The headers every answer through a preview route carries.
const (
	HeaderEnvironment     = "X-Warden-Environment"
	HeaderRouteGeneration = "X-Warden-Route-Generation"
)

// maxAdminBody bounds what is read from Caddy's admin API and from a
// smoke check's answer.
const maxAdminBody = 1 << 20

// casAttempts bounds the read-compare-write loop when another change to
// Caddy's config lands between the read and the write.
const casAttempts = 5

// caddyRoute is the part of a route this driver writes and reads back.
type caddyRoute struct {
	ID     string            `json:"@id"`
	Match  []caddyMatch      `json:"match"`
	Handle []json.RawMessage `json:"handle"`
	// Terminal: the first route that matches answers.
	Terminal bool `json:"terminal,omitempty"`
}

type caddyMatch struct {
	Host []string `json:"host"`
}

type caddyHandler struct {
	Handler  string `json:"handler"`
	Response *struct {
		Set map[string][]string `json:"set"`
	} `json:"response,omitempty"`
	Upstreams []struct {
		Dial string `json:"dial"`
	} `json:"upstreams,omitempty"`
	URI     string `json:"uri,omitempty"`
	Headers *struct {
		Request *struct {
			Set map[string][]string `json:"set"`
		} `json:"request,omitempty"`
	} `json:"headers,omitempty"`
}

// held is what a branch's route serves now; shaped: it matches the
// branch's host name alone and names its environment, generation and one
// upstream, as this driver writes it. A change or removal goes to the
// route's position when it was read (at), under its ETag, never through
// its @id (see read).
type held struct {
	exists     bool
	env        string
	generation uint64
	upstream   string
	shaped     bool
	etag       string
	// atWaker: the route sends its host, rewritten to driver.WakerPath and
	// naming its environment, to the waker (a sleeping preview's).
	atWaker bool
}

// at is the route's position in the server's list when it was read: the
// path its ETag names.
func (h held) at() string { return etagPath(h.etag) }

func (d *Routes) routeID(branch string) string { return "preview-" + branch }

func (d *Routes) host(branch string) string { return branch + "." + d.Domain }

// URL is where a branch's preview is served: its host name on Caddy's
// port (P3).
func (d *Routes) URL(branch string) string {
	_, port, _ := net.SplitHostPort(d.Public)
	return "http://" + net.JoinHostPort(d.host(branch), port) + "/"
}

// Do performs one operation (see Data.Do for results and errors).
func (d *Routes) Do(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	if !validName(r.Branch) {
		return driver.CapabilityResult{Category: "configuration", Message: fmt.Sprintf("branch %q is not a host name this driver routes", r.Branch)}, nil
	}
	switch r.Capability + "/" + r.Op {
	case "route/observe":
		return d.observe(ctx, r)
	case "route/apply":
		return d.activate(ctx, r)
	case "route/remove":
		return d.detach(ctx, r)
	case "route/sleep":
		return d.sleep(ctx, r)
	case "smoke/observe", "smoke/apply":
		o, err := d.smoke(ctx, r)
		return observed(o, err)
	}
	return driver.CapabilityResult{Category: "configuration", Message: "caddy does not do " + r.Capability + "/" + r.Op}, nil
}

func (d *Routes) observe(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	h, err := d.read(ctx, r.Branch)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	return driver.CapabilityResult{OK: true, Observation: d.observation(h, r.Branch)}, nil
}

func (d *Routes) observation(h held, branch string) *driver.CapabilityObservation {
	if !h.exists {
		return &driver.CapabilityObservation{LastRequest: d.Traffic.Last(d.host(branch))}
	}
	// The route as it is: its generation, its environment, its upstream
	// (the provider id, which the controller compares with the one it
	// recorded), and whether it has the shape this driver writes. Whether
	// anything answers at the upstream is the application's business:
	// a dead upstream behind an unchanged route is not route drift.
	o := &driver.CapabilityObservation{Exists: true, Owner: h.env, RouteTarget: h.generation, ProviderID: h.upstream,
		URL: d.URL(branch), Matches: h.shaped, AtWaker: h.atWaker, Detail: fmt.Sprintf("generation %d of %s, upstream %s", h.generation, h.env, h.upstream)}
	if h.atWaker {
		o.Detail += " (the waker)"
	}
	o.LastRequest = d.Traffic.Last(d.host(branch))
	return o
}

// activate sets the branch's route to this generation if the route holds
// this generation already, the one it replaces, or an older one; a newer
// one is left in place and observed.
func (d *Routes) activate(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	up, err := d.Upstream(r.EnvID)
	if err != nil {
		return driver.CapabilityResult{Category: "transient", Message: "no application to route to: " + err.Error()}, nil
	}
	return d.setRoute(ctx, r, up, false, func(h held) bool {
		newer := h.exists && h.generation > r.ExpectedRoute && h.generation != r.Generation // newer work holds it
		return newer || h.exists && h.generation == r.Generation && h.env == r.EnvID && h.upstream == up
	})
}

// sleep sends the branch's host to the waker, under this generation,
// while the route is this environment's at this generation, or absent (a
// route removed by hand from a sleeping preview is put back, at the
// waker); any other is left and observed (E8, E19).
func (d *Routes) sleep(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	if d.Waker == "" {
		return driver.CapabilityResult{Category: "configuration", Message: "no waker is configured: previews do not sleep here"}, nil
	}
	return d.setRoute(ctx, r, d.Waker, true, func(h held) bool {
		ours := h.exists && h.generation == r.Generation && h.env == r.EnvID
		return h.exists && !ours || ours && h.atWaker
	})
}

// setRoute writes the branch's route to upstream (at the waker, or not)
// by compare-and-set, unless leave says the route as read stays as it is;
// either way it answers with the route as observed after.
func (d *Routes) setRoute(ctx context.Context, r driver.CapabilityRequest, upstream string, atWaker bool, leave func(held) bool) (driver.CapabilityResult, error) {
	if err := d.EnsureFallback(ctx); err != nil {
		return driver.CapabilityResult{}, err
	}
	if err := d.EnsureAccessLog(ctx); err != nil {
		return driver.CapabilityResult{}, err
	}
	for range casAttempts {
		h, err := d.read(ctx, r.Branch)
		if err != nil {
			return driver.CapabilityResult{}, err
		}
		if leave(h) {
			return driver.CapabilityResult{OK: true, Observation: d.observation(h, r.Branch)}, nil
		}
		ok, err := d.write(ctx, r, upstream, atWaker, h)
		if err != nil {
			return driver.CapabilityResult{}, err
		}
		if ok {
			return d.observe(ctx, r)
		}
	}
	return driver.CapabilityResult{Category: "transient", Message: fmt.Sprintf("caddy's config kept changing under the route of %s", r.Branch)}, nil
}

// detach removes the route only while it is this environment's at this
// generation; a newer one's is not ours to remove (E11).
func (d *Routes) detach(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	for range casAttempts {
		h, err := d.read(ctx, r.Branch)
		if err != nil {
			return driver.CapabilityResult{}, err
		}
		if !h.exists || h.env != r.EnvID || h.generation != r.Generation {
			return driver.CapabilityResult{OK: true, Observation: d.observation(h, r.Branch)}, nil
		}
		var answer []byte
		status, _, err := d.callBody(ctx, http.MethodDelete, h.at(), h.etag, nil, &answer)
		if err != nil {
			return driver.CapabilityResult{}, err
		}
		if status == http.StatusOK {
			return d.observe(ctx, r)
		}
		if !changedUnder(status, answer) {
			return driver.CapabilityResult{}, fmt.Errorf("caddy: delete route of %s: %d", r.Branch, status)
		}
	}
	return driver.CapabilityResult{Category: "transient", Message: fmt.Sprintf("caddy's config kept changing under the route of %s", r.Branch)}, nil
}

// write puts the route, guarded by the ETag read with h: false when
// another change came first (changedUnder), to be read and decided again.
// A route at the waker rewrites the request to driver.WakerPath and names its
// environment and the path asked for in headers the route sets over the
// client's own.
func (d *Routes) write(ctx context.Context, r driver.CapabilityRequest, upstream string, atWaker bool, h held) (bool, error) {
	headers, _ := json.Marshal(map[string]any{"handler": "headers", "response": map[string]any{"set": map[string][]string{
		HeaderEnvironment: {r.EnvID}, HeaderRouteGeneration: {strconv.FormatUint(r.Generation, 10)}}}})
	proxy, _ := json.Marshal(map[string]any{"handler": "reverse_proxy", "upstreams": []map[string]string{{"dial": upstream}}})
	handle := []json.RawMessage{headers, proxy}
	if atWaker {
		rewrite, _ := json.Marshal(map[string]any{"handler": "rewrite", "uri": driver.WakerPath})
		proxy, _ = json.Marshal(map[string]any{"handler": "reverse_proxy", "upstreams": []map[string]string{{"dial": upstream}},
			"headers": map[string]any{"request": map[string]any{"set": map[string][]string{
				driver.HeaderWake: {r.EnvID}, driver.HeaderWakePath: {"{http.request.orig_uri.path}"}}}}})
		handle = []json.RawMessage{headers, rewrite, proxy}
	}
	body, _ := json.Marshal(caddyRoute{ID: d.routeID(r.Branch), Match: []caddyMatch{{Host: []string{d.host(r.Branch)}}},
		Handle: handle, Terminal: true})
	method, path, etag := http.MethodPatch, h.at(), h.etag
	if !h.exists {
		// A new route goes first, before the catch-all that answers 404
		// for every other host: Caddy answers with the first route
		// that matches. It goes in only while the list read for its ETag
		// lacks it: another activation of the branch may have put it
		// there since it was found missing.
		present, tag, err := d.listed(ctx, d.routeID(r.Branch))
		if err != nil || present {
			return false, err
		}
		method, path, etag = http.MethodPut, d.routesPath()+"/0", tag
	}
	var answer []byte
	status, _, err := d.callBody(ctx, method, path, etag, body, &answer)
	switch {
	case err != nil:
		return false, err
	case changedUnder(status, answer):
		return false, nil
	case status != http.StatusOK:
		return false, fmt.Errorf("caddy: %s %s: %d", method, path, status)
	}
	return true, nil
}

// fallbackID is the catch-all route: last in the server, it answers every
// host no preview route matches with a 404 page (P17), where Caddy alone
// would answer an empty 200 that looks like a blank page that works.
const fallbackID = "preview-none"

// EnsureFallback adds the catch-all route at the end of the server's
// routes if it is not there (Caddy started without it, or restarted
// without its config). Preview routes are inserted before it.
func (d *Routes) EnsureFallback(ctx context.Context) error {
	// Every activation asks, so the usual answer is the cheap one: Caddy's
	// index knows the @id. Only a missing catch-all reads the whole list.
	status, _, err := d.call(ctx, http.MethodGet, "/id/"+fallbackID, "", nil)
	if err != nil || status == http.StatusOK {
		return err
	}
	for range casAttempts {
		present, tag, err := d.listed(ctx, fallbackID)
		if err != nil || present {
			return err
		}
		status, _, err := d.call(ctx, http.MethodPost, d.routesPath(), tag, d.fallback())
		switch {
		case err != nil:
			return err
		case status == http.StatusOK:
			return nil
		case status != http.StatusPreconditionFailed:
			return fmt.Errorf("caddy: add the catch-all route: %d", status)
		}
	}
	return fmt.Errorf("caddy's config kept changing while the catch-all route was added")
}

// listed reads the server's routes: whether one has the @id, and the
// list's ETag. A route is added only under the ETag of the read that
// found it missing: two activations that each found it missing by its @id
// would otherwise both add it (found with the catch-all, added twice when
// previews activated together).
func (d *Routes) listed(ctx context.Context, id string) (bool, string, error) {
	var body []byte
	status, tag, err := d.callBody(ctx, http.MethodGet, d.routesPath(), "", nil, &body)
	if err != nil {
		return false, "", err
	}
	if status != http.StatusOK {
		return false, "", fmt.Errorf("caddy: read the routes of server %s: %d", d.Server, status)
	}
	var routes []struct {
		ID string `json:"@id"`
	}
	if err := json.Unmarshal(body, &routes); err != nil { // a server without routes answers null
		return false, "", fmt.Errorf("caddy: the routes of server %s do not decode: %w", d.Server, err)
	}
	for _, r := range routes {
		if r.ID == id {
			return true, tag, nil
		}
	}
	return false, tag, nil
}

// fallback is the catch-all route: a small page naming the host (Caddy's
// placeholder; net/http refuses a Host with markup in it, and it stands in
// a text node), saying no preview is there, and linking to the console.
func (d *Routes) fallback() []byte {
	console := ""
	if d.Console != "" {
		console = `<p>The previews and their state are in <a href="` + html.EscapeString(d.Console) + `">warden's console</a>.</p>`
	}
	page := `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>No preview here</title></head><body>` +
		`<h1>No preview here</h1><p>Nothing is served at <code>{http.request.host}</code>: no preview has that name, or it was removed.</p>` +
		console + "</body></html>\n"
	b, _ := json.Marshal(map[string]any{"@id": fallbackID, "handle": []any{map[string]any{"handler": "static_response", "status_code": 404,
		"headers": map[string][]string{"Content-Type": {"text/html; charset=utf-8"}, "X-Content-Type-Options": {"nosniff"}, "Cache-Control": {"no-store"}},
		"body":    page}}})
	return b
}

func (d *Routes) routesPath() string { return "/config/apps/http/servers/" + d.Server + "/routes" }

// read is what the branch's route holds now, with its ETag and position.
//
// Caddy resolves an @id to a position in the server's list outside the
// lock its read then takes, so a route inserted before this one (another
// preview's activation) can move it in between: the answer is then
// another route. Found by CI: a preview's activation was read back as its
// neighbour's route and recorded as its own. So an answer counts only if
// it carries this route's @id, and is asked again otherwise; and a write
// goes to the position the ETag names, where Caddy checks the ETag under
// the same lock as the write (TestP19ARouteIsReadAsItselfWhileOthersAreInsertedBeforeIt).
func (d *Routes) read(ctx context.Context, branch string) (held, error) {
	for range casAttempts {
		h, moved, err := d.readOnce(ctx, branch)
		if err != nil || !moved {
			return h, err
		}
	}
	return held{}, fmt.Errorf("caddy: route of %s kept moving while it was read", branch)
}

// readOnce reads the branch's route by its @id; moved: the answer was
// another route, the list having changed under the read.
func (d *Routes) readOnce(ctx context.Context, branch string) (h held, moved bool, err error) {
	var body []byte
	status, etag, err := d.callBody(ctx, http.MethodGet, "/id/"+d.routeID(branch), "", nil, &body)
	if err != nil {
		return held{}, false, err
	}
	if status == http.StatusNotFound {
		return held{}, false, nil
	}
	if outOfBounds(status, body) {
		return held{}, true, nil
	}
	if status != http.StatusOK {
		return held{}, false, fmt.Errorf("caddy: read route of %s: %d", branch, status)
	}
	var rt caddyRoute
	if err := json.Unmarshal(body, &rt); err != nil {
		return held{}, false, fmt.Errorf("caddy: route of %s does not decode: %w", branch, err)
	}
	if rt.ID != d.routeID(branch) {
		return held{}, true, nil
	}
	h = held{exists: true, etag: etag}
	if !strings.HasPrefix(h.at(), d.routesPath()+"/") {
		return held{}, false, fmt.Errorf("caddy: route of %s answered without an ETag naming its place (%q): Caddy 2.6 or later is needed", branch, etag)
	}
	hostOnly := len(rt.Match) == 1 && len(rt.Match[0].Host) == 1 && rt.Match[0].Host[0] == d.host(branch)
	var rewrites []string
	for _, raw := range rt.Handle {
		var hd caddyHandler
		if json.Unmarshal(raw, &hd) != nil {
			continue
		}
		switch {
		case hd.Handler == "headers" && hd.Response != nil:
			if v := hd.Response.Set[HeaderEnvironment]; len(v) == 1 {
				h.env = v[0]
			}
			if v := hd.Response.Set[HeaderRouteGeneration]; len(v) == 1 {
				h.generation, _ = strconv.ParseUint(v[0], 10, 64)
			}
		case hd.Handler == "reverse_proxy" && len(hd.Upstreams) == 1:
			h.upstream = hd.Upstreams[0].Dial
			if hd.Headers != nil && hd.Headers.Request != nil {
				wake := hd.Headers.Request.Set[driver.HeaderWake]
				h.atWaker = len(wake) == 1 && wake[0] != "" && wake[0] == h.env
			}
		case hd.Handler == "rewrite":
			rewrites = append(rewrites, hd.URI)
		}
	}
	// A route at the waker is shaped as sleep writes it: the waker its
	// upstream, the request rewritten to driver.WakerPath, naming its
	// environment; any other is not at the waker.
	h.atWaker = h.atWaker && d.Waker != "" && h.upstream == d.Waker && len(rewrites) == 1 && rewrites[0] == driver.WakerPath
	handlers := 2
	if h.atWaker {
		handlers = 3
	}
	h.shaped = hostOnly && h.env != "" && h.generation > 0 && h.upstream != "" && len(rt.Handle) == handlers
	return h, false, nil
}

// changedUnder reports whether a change guarded by an ETag was refused
// because the config changed since its read: 412, or the position the
// read found no longer exists (routes removed before it since; Caddy
// answers 500 then). Either way the route is read and decided again.
func changedUnder(status int, answer []byte) bool {
	return status == http.StatusPreconditionFailed || outOfBounds(status, answer)
}

// outOfBounds reports Caddy's answer for a position past the end of a
// list: an @id resolved to a position the list no longer reaches, or a
// position read earlier. Caddy says so only in its message (400 for a
// read, 500 for a change).
func outOfBounds(status int, answer []byte) bool {
	return (status == http.StatusBadRequest || status == http.StatusInternalServerError) &&
		bytes.Contains(answer, []byte("array index out of bounds"))
}

// etagPath is the config path a Caddy ETag names ("" if none): it is
// "<path> <hash>", quoted.
func etagPath(etag string) string {
	if f := strings.Fields(strings.Trim(etag, `"`)); len(f) == 2 {
		return f[0]
	}
	return ""
}

func (d *Routes) call(ctx context.Context, method, path, ifMatch string, body []byte) (int, string, error) {
	return d.callBody(ctx, method, path, ifMatch, body, nil)
}

// callBody makes one admin API call; the ETag arrives as a trailer. A
// call that is safe to send again (a read, or a change guarded by an
// ETag, which Caddy refuses once it has landed) is sent again when the
// connection fails: Caddy replaces its admin server at every config
// change, and a connection it had accepted can be reset then.
func (d *Routes) callBody(ctx context.Context, method, path, ifMatch string, body []byte, out *[]byte) (status int, etag string, err error) {
	safe := method == http.MethodGet || ifMatch != ""
	resend(ctx, func() bool {
		var failed bool
		status, etag, failed, err = d.callOnce(ctx, method, path, ifMatch, body, out)
		return failed && safe
	})
	return status, etag, err
}

// connAttempts bounds the sends of one call to Caddy (admin or smoke
// check) whose connection fails: five, 10 to 40 ms apart, span 100 ms,
// so that routes changing back to back (each change replaces Caddy's
// servers) are outlasted. With three, 30 ms in all, one smoke check in
// 500 was still reset every time under TestP19's churn in a full make
// test (2026-12-05).
const connAttempts = 5

// resend sends a call to Caddy, again while send says it failed in a way
// worth sending again, at most connAttempts times in all.
func resend(ctx context.Context, send func() (again bool)) {
	for i := 1; send() && i < connAttempts && ctx.Err() == nil; i++ {
		time.Sleep(time.Duration(i) * 10 * time.Millisecond)
	}
}

// callOnce sends one admin call; failed: the connection failed.
func (d *Routes) callOnce(ctx context.Context, method, path, ifMatch string, body []byte, out *[]byte) (int, string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, method, d.Admin+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", false, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := d.client().Do(req)
	if err != nil {
		return 0, "", true, fmt.Errorf("caddy: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody+1))
	if err != nil {
		return 0, "", true, fmt.Errorf("caddy: %w", err)
	}
	if len(b) > maxAdminBody {
		return 0, "", false, errors.New("caddy: admin answer over 1 MiB")
	}
	if out != nil {
		*out = b
	}
	etag := resp.Trailer.Get("Etag")
	if etag == "" {
		etag = resp.Header.Get("Etag")
	}
	return resp.StatusCode, etag, false, nil
}

func (d *Routes) client() *http.Client {
	if d.Client != nil {
		return d.Client
	}
	return adminClient
}

// adminClient opens a connection per call: Caddy replaces its admin
// server at every config change, closing the connections a client keeps
// alive, and a change sent on one of those is lost with its outcome
// unknown (seen as "connection reset by peer" with routes changing fast).
var adminClient = newAdminClient(nil)

// newAdminClient is adminClient dialing through the drivers' share of
// descriptors (S13; nil: unbounded). Caddy's admin API is asked directly,
// never through a proxy named in the environment.
func newAdminClient(share *driver.Descriptors) *http.Client {
	t := share.Transport()
	t.DisableKeepAlives, t.Proxy = true, nil
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}

// health is what a preview's application answers on /healthz (P6, P13):
// who it is (environment, generation, revision) and whether each of its
// dependencies answers ("ok", or why not). It answers 200 only when every
// one does.
type health struct {
	Environment  string            `json:"environment"`
	Revision     string            `json:"revision"`
	Generation   uint64            `json:"generation"`
	Dependencies map[string]string `json:"dependencies,omitempty"`
	status       int
}

// answers reports whether the answer is the requested instance's, with
// its dependencies reachable.
func (h health) answers(r driver.CapabilityRequest) bool {
	if h.status != http.StatusOK || h.Environment != r.EnvID || h.Revision != r.Revision || h.Generation != r.Generation {
		return false
	}
	for _, v := range h.Dependencies {
		if v != "ok" {
			return false
		}
	}
	return true
}

// String says what answered, naming each dependency that did not.
func (h health) String() string {
	s := fmt.Sprintf("answered %d as %s generation %d revision %s", h.status, orUnknown(h.Environment), h.Generation, orUnknown(h.Revision))
	names := make([]string, 0, len(h.Dependencies))
	for n := range h.Dependencies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s += fmt.Sprintf("; %s %s", n, clip(h.Dependencies[n]))
	}
	return s
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// maxHealthBody bounds a health answer.
const maxHealthBody = 1 << 16

// askHealth asks url for a health answer, under host if one is given;
// the response comes back too (its headers name the route that served
// it). A transport failure is an error; an answer that is not a health
// answer has the status only.
func askHealth(ctx context.Context, client *http.Client, url, host string) (health, *http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return health{}, nil, err
	}
	if host != "" {
		req.Host = host
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return health{}, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxHealthBody))
	var h health
	if json.Unmarshal(b, &h) != nil {
		h = health{}
	}
	h.status = resp.StatusCode
	return h, resp, nil
}

// smoke asks the branch's host name through Caddy: who answers,
// at which route generation (the route's headers), as which instance. At
// rest (observe) a Caddy that does not answer at all is an observation
// too, that nothing serves the host; during provisioning (apply) it is an
// error, retried with back-off.
func (d *Routes) smoke(ctx context.Context, r driver.CapabilityRequest) (*driver.CapabilityObservation, error) {
	host := d.host(r.Branch)
	h, resp, err := d.askThrough(ctx, host)
	if err != nil {
		if r.Op == "observe" && ctx.Err() == nil {
			return &driver.CapabilityObservation{Detail: fmt.Sprintf("nothing answers for %s at %s: %v", host, d.Public, err)}, nil
		}
		return nil, fmt.Errorf("smoke %s: %w", host, err)
	}
	o := &driver.CapabilityObservation{Owner: resp.Header.Get(HeaderEnvironment), Detail: host + " " + h.String()}
	o.RouteTarget, _ = strconv.ParseUint(resp.Header.Get(HeaderRouteGeneration), 10, 64)
	if h.Environment != "" {
		o.Exists = true
		o.Matches = o.Owner == r.EnvID && h.answers(r)
	}
	return o, nil
}

// askThrough asks the host's health through Caddy, again when the
// connection fails: Caddy replaces its servers at every config change (a
// route added for another preview), and a connection can be reset then.
// A reset is not an observation that nothing serves the host; a preview
// taken for unserved each time another activated would leave ready for
// nothing (6 smoke checks in 500 said so while routes changed). A
// timeout is not asked again: it took its whole patience already.
func (d *Routes) askThrough(ctx context.Context, host string) (h health, resp *http.Response, err error) {
	resend(ctx, func() bool {
		h, resp, err = askHealth(ctx, d.Checks, "http://"+d.Public+"/healthz", host)
		var timeout net.Error
		return err != nil && !(errors.As(err, &timeout) && timeout.Timeout())
	})
	return h, resp, err
}
