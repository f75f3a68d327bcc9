package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	t.Cleanup(func() { _ = exec.Command("podman", append(podmanHere, "rm", "--force", "app-env-sl")...).Run() })
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
}
