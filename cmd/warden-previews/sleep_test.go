package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
)

// TestE19P21OnMakePreviewsAPreviewSleepsAndAVisitWakesIt: on `make
// previews`, a preview created with a short sleep_after and not visited
// since is asleep after it: podman shows its container stopped,
// PostgreSQL still has its database with the row written before it
// slept, Caddy's route sends its host to the waker, and the API says
// sleeping. A visit to its host through Caddy gets the waking page, and
// within 10 s the host serves the application again, showing that row
// (E19, E20, P21).
func TestE19P21OnMakePreviewsAPreviewSleepsAndAVisitWakesIt(t *testing.T) {
	bin := t.TempDir()
	_, err := testkit.BuildWarden(bin)
	require.NoError(t, err)
	out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "warden-previews"), ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	data := filepath.Join(t.TempDir(), "data")
	abs, _ := filepath.Abs(filepath.Join(data, "previews"))
	if pgDir, _ := clusterDir(abs); !strings.HasPrefix(pgDir, abs) {
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(pgDir)) })
	}
	t.Cleanup(func() {
		for _, env := range []string{"env-sl", "env-2", "env-3"} {
			_ = exec.Command("podman", append(podmanHere, "rm", "--force", "app-"+env)...).Run()
		}
	})
	listen, preview, admin, pgListen := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	mp := startPreviews(t, bin, data, listen, preview, admin, pgListen)

	st, v := mp.api("POST", "/v1/environments", map[string]any{"id": "env-sl", "branch": "sleepy", "revision": "r1", "sleep_after": "3s"})
	require.Equal(t, http.StatusCreated, st, "%v", v)
	require.Eventually(t, func() bool { return mp.state("env-sl") == "ready" }, 90*time.Second, 200*time.Millisecond, "ready: %s", mp.out)
	db, err := pgx.Connect(context.Background(), "postgres://warden@"+pgListen+"/db-env-sl?sslmode=disable")
	require.NoError(t, err)
	defer db.Close(context.Background())
	_, err = db.Exec(context.Background(), "UPDATE greeting SET text = 'written before it slept' WHERE id = 1")
	require.NoError(t, err)
	_, body := page(t, preview, "sleepy.localhost")
	require.Contains(t, body, "written before it slept")

	require.Eventually(t, func() bool { return mp.state("env-sl") == "sleeping" }, 60*time.Second, 200*time.Millisecond,
		"asleep 3 s after its last visit: %s", mp.out)
	state, err := exec.Command("podman", append(podmanHere, "inspect", "--format", "{{.State.Running}}", "app-env-sl")...).Output()
	require.NoError(t, err, "its container is kept")
	require.Equal(t, "false", strings.TrimSpace(string(state)), "and stopped")
	var text string
	require.NoError(t, db.QueryRow(context.Background(), "SELECT text FROM greeting WHERE id = 1").Scan(&text))
	require.Equal(t, "written before it slept", text, "its database is kept")
	resp, err := http.Get("http://" + admin + "/id/preview-sleepy")
	require.NoError(t, err)
	route, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(route), `"uri":"/v1/waker"`, "Caddy's route sends the host to the waker")
	require.Contains(t, string(route), `"dial":"`+listen+`"`)
	_, v = mp.api("GET", "/v1/environments/env-sl", nil)
	require.Equal(t, "asleep", v["desired"])
	require.Contains(t, v["status"], "the next request to it wakes the preview")

	req, _ := http.NewRequest(http.MethodGet, "http://"+preview+"/", nil)
	req.Host, req.Header["Accept"] = "sleepy.localhost", []string{"text/html"}
	visited := time.Now()
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	waking, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", waking)
	require.Contains(t, string(waking), "Preview env-sl is waking")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	require.Eventually(t, func() bool {
		status, body := page(t, preview, "sleepy.localhost")
		return status == http.StatusOK && strings.Contains(body, "written before it slept")
	}, 10*time.Second, 50*time.Millisecond, "served again within 10 s of the visit: %s", mp.out)
	t.Logf("served again %s after the visit", time.Since(visited).Round(time.Millisecond))
	require.Eventually(t, func() bool { return mp.state("env-sl") == "ready" }, 10*time.Second, 100*time.Millisecond)

	// The previews guide's sleep block, as written, against this make
	// previews.
	printed := guideBlock(t, "sleep", bin, listen, preview)
	for _, want := range []string{"sleeping since", "Preview env-2 is waking", "Preview env-2", "own database"} {
		require.Contains(t, printed, want, "the guide's sleep block printed: %s", printed)
	}

	// P20 through warden: the guide's seed block makes a seed with the
	// CLI and a preview copied from it, served with the seed's row.
	printed = guideBlock(t, "seed", bin, listen, preview)
	for _, want := range []string{"seed demo made (fingerprint ", "hello from the demo seed", "env-3"} {
		require.Contains(t, printed, want, "the guide's seed block printed: %s", printed)
	}
	_, v = mp.api("GET", "/v1/environments/env-3?receipts=50", nil)
	require.Equal(t, "demo", v["data_from"])
	var fromSeed bool
	for _, r := range v["receipts"].([]any) {
		fromSeed = fromSeed || strings.Contains(r.(map[string]any)["detail"].(string), "from seed demo (fingerprint ")
	}
	require.True(t, fromSeed, "the database step's receipt names the seed and its fingerprint: %v", v["receipts"])
}

// slowAdmin stands before Caddy's admin API and holds every change to
// the preview server's routes for delay before it goes on, whether or
// not warden is still there to read the answer: a route's sleep or
// activation stays in flight long enough to be killed in, and may land
// after warden died, its answer lost.
func slowAdmin(t *testing.T, caddyAdmin string, delay time.Duration) string {
	target, _ := url.Parse("http://" + caddyAdmin)
	proxy := httputil.NewSingleHostReverseProxy(target)
	addr := freeAddr(t)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/config/apps/http/servers/previews/routes") {
			time.Sleep(delay)
			r = r.WithContext(context.WithoutCancel(r.Context()))
		}
		r.Host = caddyAdmin                // Caddy's admin API answers only under its own address
		proxy.ServeHTTP(plainWriter{w}, r) // no CloseNotifier: warden's death cancels nothing
	})}
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return addr
}

// plainWriter is a ResponseWriter and nothing more.
type plainWriter struct{ http.ResponseWriter }

// TestE21P21AKillAtEachSleepAndWakeBoundaryEndsAsObserved: warden on the
// real platform is killed with SIGKILL with each new step in flight (a
// route's switch to the waker, an application's stop, a wake's start of
// the application, a wake's activation of the route; the route changes
// held at Caddy's admin API so that each lands after the kill) and
// started again: each time the preview ends sleeping or ready as its
// parts show it (the container stopped or running, the route at the
// waker or at the application), with one container, one route and its
// row (E7, E8, E19-E21, I11). It runs in make check, with the other
// crash runs.
func TestE21P21AKillAtEachSleepAndWakeBoundaryEndsAsObserved(t *testing.T) {
	if !testkit.Check() {
		t.Skip("make check runs it (WARDEN_CHECK=1): the real platform killed four times, beside make check's other crash runs")
	}
	p := startOwnPlatform(t, "env-kz")
	o := p.options
	slow := slowAdmin(t, o.caddyAdmin, 1500*time.Millisecond)
	serve := slices.Clone(p.serve)
	for i, a := range serve {
		if a == "http://"+o.caddyAdmin {
			serve[i] = "http://" + slow
		}
	}
	warden := startWarden(t, o.warden, serve, o.listen)
	state := func() string { s, _ := warden.api("GET", "/v1/environments/env-kz", nil)["state"].(string); return s }
	killIn := func(capability, op string) {
		t.Helper()
		require.Eventually(t, func() bool {
			a, _ := warden.api("GET", "/v1/environments/env-kz", nil)["attempt"].(map[string]any)
			return a != nil && a["capability"] == capability && a["op"] == op
		}, 60*time.Second, 10*time.Millisecond, "%s %s in flight: %s", capability, op, warden.log)
		warden.kill() // warden killed -9 with the step in flight
		warden = startWarden(t, o.warden, serve, o.listen)
	}
	observe := func() (containers []string, running bool, route string) {
		out, err := exec.Command("podman", append(podmanHere, "ps", "--all", "--format", "{{.Names}} {{.State}}")...).Output()
		require.NoError(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "app-env-kz" {
				containers = append(containers, f[0])
				running = strings.EqualFold(f[1], "running") || strings.EqualFold(f[1], "up")
			}
		}
		resp, err := http.Get("http://" + o.caddyAdmin + "/id/preview-kill-zone")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return containers, running, string(b)
	}
	settles := func(want string) {
		t.Helper()
		require.Eventually(t, func() bool { return state() == want }, 60*time.Second, 100*time.Millisecond, "%s after the restart: %s", want, warden.log)
		containers, running, route := observe()
		if len(containers) != 1 {
			all, _ := exec.Command("podman", append(podmanHere, "ps", "--all")...).CombinedOutput()
			t.Fatalf("one container app-env-kz, not %v: podman ps --all:\n%s\nwarden:\n%s", containers, all, warden.log)
		}
		require.Equal(t, want == "ready", running, "the container %s", map[bool]string{true: "running", false: "stopped"}[want == "ready"])
		require.Equal(t, want == "sleeping", strings.Contains(route, `"uri":"/v1/waker"`), "the route as the state says: %s", route)
		if want == "ready" {
			status, body := page(t, o.previewListen, "kill-zone.localhost")
			require.Equal(t, http.StatusOK, status)
			require.Contains(t, body, "own database")
		}
	}
	visit := func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+o.previewListen+"/", nil)
		req.Host = "kill-zone.localhost"
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}

	require.NotNil(t, warden.api("POST", "/v1/environments", map[string]any{"id": "env-kz", "branch": "kill-zone", "revision": "r1", "sleep_after": "2s"})["id"])
	require.Eventually(t, func() bool { return state() == "ready" }, 90*time.Second, 100*time.Millisecond, "ready: %s", warden.log)

	killIn("route", "sleep") // the route's switch to the waker
	settles("sleeping")
	visit()
	killIn("app", "apply") // the wake's start of the application
	settles("ready")
	killIn("app", "sleep") // asleep again 2 s on: the application's stop
	settles("sleeping")
	visit()
	killIn("route", "apply") // the wake's activation of the route
	settles("ready")
}
