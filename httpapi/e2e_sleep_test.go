package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/driver"
)

// sleepingWorld is a world whose platform sleeps previews, with a server
// default sleep_after.
func sleepingWorld(t *testing.T, sleepAfter time.Duration) *world {
	return newWorldWith(t, defaultPools, func(c *actors.Config, _ *httpapi.Options) {
		c.Env.Machine.Config = environment.DefaultConfig()
		c.Env.Machine.Config.Sleeps = true
		c.Env.SleepAfter = sleepAfter
	})
}

// wake asks the waker as a sleeping preview's route does: the preview in
// the route's header, the path asked for beside it.
func (w *world) wake(method, env, path string, accept string) (int, http.Header, string) {
	w.t.Helper()
	headers := []string{driver.HeaderWake, env, driver.HeaderWakePath, path}
	if accept != "" {
		headers = append(headers, "Accept", accept)
	}
	return w.raw(method, driver.WakerPath, "", headers...)
}

// raw sends body as it is with the headers given (name and value pairs),
// and answers the status, the headers and the body: a request that is not
// JSON, or an answer that is not.
func (w *world) raw(method, path, body string, headers ...string) (int, http.Header, string) {
	w.t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	require.NoError(w.t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(w.t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// TestE19APreviewNobodyVisitsSleepsAndAVisitWakesIt: created with a short
// sleep_after, a ready preview the proxy reports no visit to goes to sleep
// (its route at the waker, its application stopped) and its view says
// sleeping, since when, and that the next visit wakes it; a HEAD and a
// health check through the waker leave it asleep; a visit gets the waking
// page (503, Retry-After) and the preview goes through its application's
// start back to ready; visits during the wake make one wake (E19, E20).
func TestE19APreviewNobodyVisitsSleepsAndAVisitWakesIt(t *testing.T) {
	w := sleepingWorld(t, 0)
	st, v, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{
		"id": "env-s1", "branch": "sleepy", "revision": "r1", "sleep_after": "1s"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Equal(t, "1s", v["sleep_after"])
	w.waitForEnv("env-s1", "sleeping")
	require.True(t, w.preview.asleep("sleepy", "app-env-s1"), "the route at the waker, the application stopped")
	v = w.envView("env-s1")
	require.Equal(t, "asleep", v["desired"])
	require.NotNil(t, v["asleep_since"])
	require.Contains(t, v["status"], "the next request to it wakes the preview")
	require.Contains(t, v["actions"], "wake")
	st, x, raw := w.do("GET", "/v1/environments/env-s1/explain", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Contains(t, x["summary"], "sleeping since", "explain says since when")
	var awaiting []string
	for _, a := range x["awaiting"].([]any) {
		awaiting = append(awaiting, a.(map[string]any)["event"].(string))
	}
	require.Contains(t, awaiting, "request to its host", "and that a visit wakes it")

	for _, probe := range [][2]string{{http.MethodHead, "/"}, {http.MethodGet, "/healthz"}} {
		status, hdr, _ := w.wake(probe[0], "env-s1", probe[1], "")
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Equal(t, "2", hdr.Get("Retry-After"))
	}
	require.Equal(t, "sleeping", w.envView("env-s1")["state"], "a HEAD and a health check wake nothing")

	// The visits, as the proxy will log them: once awake, it stays so.
	w.preview.visit("sleepy", time.Now().Add(time.Hour))
	status, hdr, page := w.wake(http.MethodGet, "env-s1", "/orders", "text/html")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "2", hdr.Get("Retry-After"))
	require.Contains(t, page, `<meta http-equiv="refresh"`)
	require.Contains(t, page, "Preview env-s1 is waking")
	for range 5 {
		w.wake(http.MethodGet, "env-s1", "/", "")
	}
	w.waitForEnv("env-s1", "ready")
	require.False(t, w.preview.asleep("sleepy", "app-env-s1"))
	wakes := 0
	for _, a := range w.envView("env-s1")["audit"].([]any) {
		if a.(map[string]any)["action"] == "wake" {
			wakes++
		}
	}
	require.Equal(t, 1, wakes, "many visits make one wake")
}

// TestE21AnOperatorSleepsAndWakesAPreviewByHand: sleep and wake are
// audited actions, offered only when they apply; a preview never asked
// to sleep by itself does not (no default); sleep_after is checked.
func TestE21AnOperatorSleepsAndWakesAPreviewByHand(t *testing.T) {
	w := sleepingWorld(t, 0)
	st, v, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-s2", "branch": "hand", "revision": "r1"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Nil(t, v["sleep_after"], "no server default: it does not sleep by itself")
	w.waitForEnv("env-s2", "ready")
	st, _, _ = w.do("POST", "/v1/environments/env-s2/actions/wake", operatorToken, map[string]any{"reason": "x"})
	require.Equal(t, http.StatusConflict, st, "wake is not offered to a preview that is awake")
	st, _, raw = w.do("POST", "/v1/environments/env-s2/actions/sleep", operatorToken, map[string]any{"reason": "the demo is over"})
	require.Equal(t, http.StatusAccepted, st, string(raw))
	w.waitForEnv("env-s2", "sleeping")
	st, _, raw = w.do("POST", "/v1/environments/env-s2/actions/wake", operatorToken, map[string]any{"reason": "review again"})
	require.Equal(t, http.StatusAccepted, st, string(raw))
	w.waitForEnv("env-s2", "ready")
	var acts []string
	for _, a := range w.envView("env-s2")["audit"].([]any) {
		acts = append(acts, a.(map[string]any)["actor"].(string)+" "+a.(map[string]any)["action"].(string))
	}
	require.Contains(t, acts, "operator sleep")
	require.Contains(t, acts, "operator wake")

	for _, bad := range []string{"1ms", "forever", "-1s", "2161h"} {
		st, _, raw = w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-s3", "branch": "b", "revision": "r", "sleep_after": bad})
		require.Equal(t, http.StatusBadRequest, st, "%s: %s", bad, raw)
	}
	st, _, raw = w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-s3", "branch": "b", "revision": "r", "sleep_after": "never"})
	require.Equal(t, http.StatusCreated, st, string(raw))
}

// TestE19SleepAfterNeedsAPlatformThatSleeps: where previews cannot sleep,
// a create asking for it is refused with why, and the waker wakes nothing.
func TestE19SleepAfterNeedsAPlatformThatSleeps(t *testing.T) {
	w := newWorld(t, defaultPools)
	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-s4", "branch": "b", "revision": "r", "sleep_after": "30m"})
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, string(raw), "sleep_after needs a platform whose previews can sleep")
	st, _, _ = w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-s4", "branch": "b", "revision": "r"})
	require.Equal(t, http.StatusCreated, st, "no sleep_after: the server's default, none here")
	status, _, _ := w.wake(http.MethodGet, "env-s4", "/", "")
	require.Equal(t, http.StatusServiceUnavailable, status)
	status, _, body := w.wake(http.MethodGet, "env-none", "/", "")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Contains(t, body, "no preview has that name")
	status, _, _ = w.wake(http.MethodGet, "Not An Id", "/", "")
	require.Equal(t, http.StatusBadRequest, status)
}

// TestE19TheServerDefaultSleepAfterApplies: a create that gives no
// sleep_after takes the server's --preview-sleep-after.
func TestE19TheServerDefaultSleepAfterApplies(t *testing.T) {
	w := sleepingWorld(t, 45*time.Minute)
	st, v, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-s5", "branch": "b", "revision": "r"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	require.Equal(t, "45m0s", v["sleep_after"])
}

// TestE21TheConsoleShowsASleepingPreview: the console's environment page
// says sleeping, since when, that the next visit wakes it, and its
// application's desired state is stopped (not a difference).
func TestE21TheConsoleShowsASleepingPreview(t *testing.T) {
	w := sleepingWorld(t, 0)
	st, _, raw := w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-c1", "branch": "console-nap", "revision": "r1", "sleep_after": "1s"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	w.waitForEnv("env-c1", "sleeping")
	c, _ := consoleClient(t, w.url, operatorToken)
	page := get(t, c, w.url+"/ui/environments/env-c1")
	require.Contains(t, page, "sleeping (desired asleep)")
	require.Contains(t, page, "the next request to it wakes the preview")
	require.Contains(t, page, `<tr class=""><td>app</td><td>app-env-c1</td><td>stopped</td><td>stopped</td></tr>`)
}
