package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/httpapi"
)

// signIn opens the sign-in page, as a browser does (it sets the form's
// cookie and token), and sends the form with a token.
func signIn(t *testing.T, c *http.Client, base, token string) *http.Response {
	t.Helper()
	page := get(t, c, base+"/ui/login")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	require.NotNil(t, m, "the sign-in form carries its token")
	resp, err := c.PostForm(base+"/ui/login", url.Values{"token": {token}, "next": {"/ui/marquees"}, "csrf": {m[1]}})
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func browserLike() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// consoleClient signs in to the console with a token and keeps the
// session cookie, as a browser would.
func consoleClient(t *testing.T, base, token string) (*http.Client, string) {
	c := browserLike()
	resp := signIn(t, c, base, token)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed in")
	page := get(t, c, base+"/ui/marquees")
	m := regexp.MustCompile(`data-csrf="([0-9a-f]{64})"`).FindStringSubmatch(page)
	require.NotNil(t, m, "the page carries the session's CSRF token")
	return c, m[1]
}

func get(t *testing.T, c *http.Client, u string) string {
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", u, b)
	return string(b)
}

// TestO6ConsoleSignInSessionsAndCSRF: the console is served by warden
// itself under a Content-Security-Policy without unsafe-inline; the token
// signs in and stays on the server (the cookie is an HttpOnly,
// SameSite=Strict session id); every change needs the CSRF token, a
// confirmation and a reason; a viewer sees no action and is refused.
func TestO6ConsoleSignInSessionsAndCSRF(t *testing.T) {
	w := newWorldWith(t, defaultPools, func(_ *actors.Config, o *httpapi.Options) {
		ops, err := httpapi.ParseOperators([]byte(fmt.Sprintf("vic viewer %x\n", sha("vic-token"))))
		require.NoError(t, err)
		o.Operators = ops
	})
	w.provisioned("m-1")

	resp, err := http.Get(w.url + "/ui/marquees")
	require.NoError(t, err)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self'")
	require.NotContains(t, csp, "unsafe-inline")
	require.Equal(t, "/ui/login?next=%2Fui%2Fmarquees", strings.TrimPrefix(resp.Request.URL.RequestURI(), ""), "signed out: to the sign-in page")

	resp = signIn(t, browserLike(), w.url, "wrong")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp = signIn(t, browserLike(), w.url, operatorToken)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	cookie := strings.Join(resp.Header.Values("Set-Cookie"), "\n")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	require.NotContains(t, cookie, operatorToken, "the token never goes back to the browser")

	op, csrf := consoleClient(t, w.url, operatorToken)
	page := get(t, op, w.url+"/ui/marquees/m-1")
	require.Contains(t, page, `id="act-disable"`, "an operator sees the actions")
	require.NotContains(t, page, "<script>", "no inline script")
	require.NotContains(t, page, "style=", "no inline style")

	act := func(c *http.Client, form url.Values) (int, string) {
		resp, err := c.PostForm(w.url+"/ui/act", form)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	base := url.Values{"kind": {"marquee"}, "id": {"m-1"}, "action": {"disable"}, "reason": {"maintenance"}, "confirm": {"yes"}}
	st, body := act(op, base)
	require.Equal(t, http.StatusForbidden, st, "no CSRF token")
	require.Contains(t, body, "CSRF")
	withCSRF := func(v url.Values, k, val string) url.Values {
		out := url.Values{"csrf": {csrf}}
		for kk, vv := range v {
			out[kk] = vv
		}
		if k != "" {
			out.Set(k, val)
		}
		return out
	}
	st, body = act(op, withCSRF(base, "reason", ""))
	require.Equal(t, http.StatusBadRequest, st, body)
	require.Contains(t, body, "reason")
	st, _ = act(op, withCSRF(base, "confirm", ""))
	require.Equal(t, http.StatusBadRequest, st, "no confirmation")
	st, body = act(op, withCSRF(base, "", ""))
	require.Equal(t, http.StatusOK, st, body)
	require.Equal(t, "disabled", w.view("m-1")["serving"])
	_, h, _ := w.do("GET", "/v1/marquees/m-1/history?limit=1", operatorToken, nil)
	require.Equal(t, "operator", h["items"].([]any)[0].(map[string]any)["actor"], "recorded with who acted")

	viewer, vcsrf := consoleClient(t, w.url, "vic-token")
	page = get(t, viewer, w.url+"/ui/marquees/m-1")
	require.NotContains(t, page, `class="act"`, "a viewer sees no action buttons")
	resp, err = viewer.PostForm(w.url+"/ui/act", url.Values{"csrf": {vcsrf}, "kind": {"marquee"}, "id": {"m-1"}, "action": {"enable"},
		"reason": {"x"}, "confirm": {"yes"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "and is refused if it posts one anyway")
}

// TestO7O8ConsoleInChromium drives Debian's Chromium through every page:
// signs in, filters, opens a marquee and an environment, performs an
// action with its confirmation and sees the result without a reload, and
// saves a screenshot of each page under testoutput/console.
func TestO7O8ConsoleInChromium(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no Chromium on this machine (.ci/run installs Debian's chromium)")
	}
	w := newWorld(t, map[string]int{"default": 2})
	g := w.provisioned("m-1")
	require.Equal(t, "stale", w.result(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": g + 5, "step": "vm_starting"}))
	w.create("m-2")
	w.waitFor("m-2", "dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	require.Equal(t, "applied", w.result(map[string]any{"marquee_id": "m-2", "verb": "failed", "generation": 1, "reason": "quota exceeded"}))
	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-271", "branch": "feature-search", "revision": "3f2c9e1", "ttl": "72h"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Eventually(t, func() bool { return w.envView("env-271")["state"] == "ready" }, 10*time.Second, 10*time.Millisecond)

	shots, err := filepath.Abs(filepath.Join("testoutput", "console"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(shots, 0o755))
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first Run starts the browser and must not carry a timeout
	// (chromedp.Run); the test's own deadline bounds the rest.
	shot := func(name string) error {
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644)
	}
	text := func(sel string) string {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	eval := func(expr string) any {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
		require.NoError(t, err, expr)
		return v
	}
	audit := axeAudit(t, ctx)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.url+"/"), chromedp.WaitVisible(chromedp.ID("token"))))
	require.NoError(t, shot("login"))
	audit("login")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("marquee-list")),
	))
	list := text("#marquee-list")
	require.Contains(t, list, "m-1")
	require.Contains(t, list, "m-2")
	require.NoError(t, shot("marquees"))
	audit("marquees")

	// Filter: failed marquees only.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("class-failed")), chromedp.WaitVisible(chromedp.CSS("#class-failed.here"))))
	require.Equal(t, "?status=failed", eval(`location.search`))
	list = text("#marquee-list tbody")
	require.Contains(t, list, "m-2")
	require.NotContains(t, list, "m-1")

	// A marquee: the timeline bands generations and sets the stale
	// callback apart; then disable it with its confirmation and see the
	// result appear without a reload.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.url+"/ui/marquees/m-1"), chromedp.WaitVisible(chromedp.ID("timeline"))))
	require.EqualValues(t, 1, eval(`document.querySelectorAll("#timeline li.aside").length`), "the stale callback is set apart")
	require.GreaterOrEqual(t, eval(`document.querySelectorAll("#timeline li.band").length`).(float64), 1.0)
	// O17: the explanation at the top: what moves it now, from its machine.
	require.Contains(t, text("section.explain"), "What moves it now")
	require.Contains(t, text("section.explain ul.awaiting"), "operator disable")
	require.Equal(t, true, eval(`document.querySelector("section.explain").compareDocumentPosition(document.getElementById("timeline")) & Node.DOCUMENT_POSITION_FOLLOWING ? true : false`), "above the timeline")
	require.NoError(t, shot("marquee"))
	audit("marquee")
	eval(`window.__notReloaded = true`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("act-disable")),
		chromedp.WaitVisible(chromedp.ID("confirm-reason")),
		chromedp.SendKeys(chromedp.ID("confirm-reason"), "maintenance window"),
	))
	require.NoError(t, shot("marquee-confirm"))
	audit("marquee's confirmation")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("confirm-ok"))))
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("serving").textContent.trim() === "disabled"`,
		chromedp.WithPollingTimeout(10*time.Second)))
	require.NoError(t, err, "the disabled state shows")
	require.Equal(t, true, eval(`window.__notReloaded === true`), "the result shows without a reload")
	require.Equal(t, "disabled", w.view("m-1")["serving"])

	// The other pages, each with a screenshot.
	for _, p := range []struct{ path, wait, name string }{
		{"/ui/environments", "env-list", "environments"},
		{"/ui/environments/env-271", "resources", "environment"},
		{"/ui/pools", "pool-default", "pools"},
		{"/ui/process", "actors", "process"},
	} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.url+p.path), chromedp.WaitVisible(chromedp.ID(p.wait))), p.path)
		require.NoError(t, shot(p.name))
		audit(p.name)
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.url+"/ui/environments/env-271"), chromedp.WaitVisible(chromedp.ID("resources"))))
	require.Contains(t, text("#resources"), "route-feature-search-1", "desired and observed side by side")
	require.Contains(t, text("section.explain ul.awaiting"), "timer ttl", "the environment's explanation")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.url+"/ui/pools"), chromedp.WaitVisible(chromedp.ID("pool-default"))))
	require.Contains(t, text("#pool-default section.explain"), "ask by a new job", "the pool's explanation")
	for _, name := range []string{"login", "marquees", "marquee", "marquee-confirm", "environments", "environment", "pools", "process"} {
		fi, err := os.Stat(filepath.Join(shots, name+".png"))
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(1000), name)
	}
	saveDocsScreenshots(t, shots)
}

// axeViolation is what the audit reports of one axe rule a page breaks.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeAudit returns a check that runs axe-core (testdata/axe-core, as
// published) on the page the browser shows and fails on any violation
// rated serious or critical: the console must be usable with a screen
// reader and a keyboard, not only look right (O8).
func axeAudit(t *testing.T, ctx context.Context) func(page string) {
	src, err := os.ReadFile(filepath.Join("testdata", "axe-core", "axe.min.js"))
	require.NoError(t, err)
	const run = `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))})))`
	return func(page string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[any](string(src)+";true"))
		require.NoError(t, err, "axe-core loads on the %s page", page)
		found, err := chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](run, chromedp.EvalAwaitPromise))
		require.NoError(t, err, "axe runs on the %s page", page)
		for _, v := range found {
			t.Errorf("%s page: axe %s (%s): %s, at %s", page, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "; "))
		}
	}
}
