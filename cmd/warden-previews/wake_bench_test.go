package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/testports"
)

// BenchmarkP21WakeToFirstByte measures, on the real platform (make
// previews' PostgreSQL, Caddy and podman, warden as its own process),
// the time from a visit to a sleeping preview's host to the first byte
// of its application's page, over 20 wakes: each starts from a preview
// observed sleeping whose first answer is the waking page, and ends at
// the first 200 carrying the application's page (polled every 20 ms, so
// each figure is late by up to that). Beside it, in the same run: the
// first byte of the same page from the preview awake (the floor), and
// the time the preview took to be ready when it was created (a cold
// start, the ceiling a wake saves). Reported: wake median and p99 (the
// slowest of 20), awake median, create.
func BenchmarkP21WakeToFirstByte(b *testing.B) {
	bin := b.TempDir()
	_, err := testkit.BuildWarden(bin)
	require.NoError(b, err)
	release, err := testports.Hold("podman")
	require.NoError(b, err)
	b.Cleanup(release)
	data := filepath.Join(b.TempDir(), "data")
	base, _ := filepath.Abs(filepath.Join(data, "previews"))
	if pgDir, _ := clusterDir(base); !strings.HasPrefix(pgDir, base) {
		b.Cleanup(func() { os.RemoveAll(filepath.Dir(pgDir)) })
	}
	b.Cleanup(func() { _ = exec.Command("podman", append(podmanHere, "rm", "--force", "app-env-wk")...).Run() })
	addr := func() string { a, err := testports.StablePort(); require.NoError(b, err); return a }
	o := options{listen: addr(), previewListen: addr(), caddyAdmin: addr(), pgListen: addr(), data: data,
		warden: filepath.Join(bin, "warden"), source: "../../examples/previewapp",
		serve: []string{"--dispatch", "exec", "--dispatch-command", "/bin/true", "--env-reconcile-every", "1s"}}
	parts := &parts{out: io.Discard, instance: instanceOf(base)}
	b.Cleanup(parts.stop)
	serve, err := parts.start(base, o)
	require.NoError(b, err)
	warden := exec.Command(o.warden, serve...)
	warden.Env = append(os.Environ(), "WARDEN_OPERATOR_TOKEN=op-token", "WARDEN_CALLBACK_TOKEN=cb-token")
	warden.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &syncBuffer{}
	warden.Stdout, warden.Stderr = log, log
	require.NoError(b, warden.Start())
	b.Cleanup(func() { _ = syscall.Kill(-warden.Process.Pid, syscall.SIGTERM); _ = warden.Wait() })
	api := func(method, path string, body any) map[string]any {
		_, v, _ := testkit.Do(http.DefaultClient, "http://"+o.listen, method, path, "op-token", body, "")
		return v
	}
	require.Eventually(b, func() bool { return api("GET", "/v1/environments", nil)["items"] != nil }, 60*time.Second, 50*time.Millisecond, "%s", log)
	state := func() string { s, _ := api("GET", "/v1/environments/env-wk", nil)["state"].(string); return s }
	get := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+o.previewListen+"/", nil)
		req.Host = "wake-bench.localhost"
		req.Header.Set("Accept", "text/html")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	created := time.Now()
	require.NotNil(b, api("POST", "/v1/environments", map[string]any{"id": "env-wk", "branch": "wake-bench", "revision": "r1", "sleep_after": "1s"})["id"])
	require.Eventually(b, func() bool { return state() == "ready" }, 120*time.Second, 20*time.Millisecond, "%s", log)
	create := time.Since(created)

	var awake, wakes []time.Duration
	for range 20 {
		start := time.Now()
		status, page := get()
		require.Equal(b, http.StatusOK, status, page)
		awake = append(awake, time.Since(start))
		require.Eventually(b, func() bool { return state() == "sleeping" }, 60*time.Second, 20*time.Millisecond, "asleep: %s", log)
		visited := time.Now()
		status, page = get()
		require.Equal(b, http.StatusServiceUnavailable, status, "the first answer is the waking page: %s", page)
		require.Contains(b, page, "is waking")
		for {
			status, page = get()
			if status == http.StatusOK {
				break
			}
			require.Less(b, time.Since(visited), 30*time.Second, "woken within 30 s: %s", log)
			time.Sleep(20 * time.Millisecond)
		}
		wakes = append(wakes, time.Since(visited))
		require.Contains(b, page, "Preview env-wk", "the application's page")
	}
	slices.Sort(wakes)
	slices.Sort(awake)
	b.ReportMetric(float64(wakes[len(wakes)/2].Milliseconds()), "wake-median-ms")
	b.ReportMetric(float64(wakes[len(wakes)-1].Milliseconds()), "wake-p99-ms")
	b.ReportMetric(float64(awake[len(awake)/2].Microseconds())/1000, "awake-median-ms")
	b.ReportMetric(float64(create.Milliseconds()), "create-ms")
	b.ReportMetric(float64(len(wakes)), "wakes")
}
