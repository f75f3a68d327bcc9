package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	p := startOwnPlatform(b, "env-wk")
	o := p.options
	warden := startWarden(b, o.warden, p.serve, o.listen)
	api, log := warden.api, warden.log
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

// BenchmarkP20PreviewReadyFromASeedThroughWarden: a whole preview of
// 100,000 rows made ready through warden on the real platform, its data
// copied from a seed, against the same preview whose last migration is
// the seed's SQL. Two wardens on the same PostgreSQL, Caddy and podman
// (one given the application's migrations and a seed made from the rows
// beforehand, untimed; the other given the migrations with the rows as
// further migrations, split to the platform's 1 MiB bound on one),
// creates alternated between them after an untimed warm-up
// (the first image build): the time from the create to `ready`, polled
// every 20 ms, each preview checked to hold 100,001 rows. Reported: the
// median of three each.
func BenchmarkP20PreviewReadyFromASeedThroughWarden(b *testing.B) {
	p := startOwnPlatform(b)
	o, serve := p.options, p.serve
	rows := dumpRows(100000)
	withRows := b.TempDir()
	entries, err := os.ReadDir(filepath.Join(o.source, "migrations"))
	require.NoError(b, err)
	for _, e := range entries {
		sql, err := os.ReadFile(filepath.Join(o.source, "migrations", e.Name()))
		require.NoError(b, err)
		require.NoError(b, os.WriteFile(filepath.Join(withRows, e.Name()), sql, 0o644))
	}
	// The same SQL as migrations of the application's own, each within the
	// platform's bound on a migration (1 MiB): a dump's statements, a
	// dozen to a file.
	statements := strings.SplitAfter(rows, ";\n")
	for i := 0; i < len(statements); i += 12 {
		chunk := strings.Join(statements[i:min(i+12, len(statements))], "")
		if strings.TrimSpace(chunk) != "" {
			require.NoError(b, os.WriteFile(filepath.Join(withRows, fmt.Sprintf("900_rows_%03d.sql", i/12)), []byte(chunk), 0o644))
		}
	}

	start := func(name, migrations string) *wardenProc {
		args := slices.Clone(serve)
		listen := freeAddr(b)
		for i := range args {
			switch {
			case i > 0 && args[i-1] == "--listen":
				args[i] = listen
			case i > 0 && args[i-1] == "--data":
				args[i] = filepath.Join(b.TempDir(), name)
			case i > 0 && args[i-1] == "--platform-migrations":
				args[i] = migrations
			}
		}
		return startWarden(b, o.warden, args, listen)
	}
	seeded, plain := start("seeded", filepath.Join(o.source, "migrations")), start("plain", withRows)
	req, _ := http.NewRequest(http.MethodPost, seeded.url+"/v1/seeds/rows", strings.NewReader(rows))
	req.Header.Set("Authorization", "Bearer op-token")
	req.Header.Set("Content-Type", "application/sql")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	resp.Body.Close()
	require.Equal(b, http.StatusCreated, resp.StatusCode)

	ready := func(w *wardenProc, id string, body map[string]any) time.Duration {
		body["id"], body["revision"] = id, "r1"
		b.Cleanup(func() { _ = exec.Command("podman", append(podmanHere, "rm", "--force", "app-"+id)...).Run() })
		began := time.Now()
		st, v, _ := testkit.Do(http.DefaultClient, w.url, "POST", "/v1/environments", "op-token", body, "")
		require.Equal(b, http.StatusCreated, st, "%v", v)
		require.Eventually(b, func() bool {
			_, v, _ := testkit.Do(http.DefaultClient, w.url, "GET", "/v1/environments/"+id, "op-token", nil, "")
			return v["state"] == "ready"
		}, 120*time.Second, 20*time.Millisecond, "%s ready", id)
		took := time.Since(began)
		db, err := pgx.Connect(context.Background(), "postgres://warden@"+o.pgListen+"/db-"+id+"?sslmode=disable")
		require.NoError(b, err)
		defer db.Close(context.Background())
		var n int
		require.NoError(b, db.QueryRow(context.Background(), "SELECT count(*) FROM greeting").Scan(&n))
		require.Equal(b, 100001, n, "%s holds the rows", id)
		return took
	}
	ready(seeded, "warm", map[string]any{"branch": "warm", "data_from": "rows"}) // the first image build, untimed
	var fromSeed, fromSQL []time.Duration
	for i := range 3 {
		fromSeed = append(fromSeed, ready(seeded, fmt.Sprintf("seeded-%d", i), map[string]any{"branch": fmt.Sprintf("seeded-%d", i), "data_from": "rows"}))
		fromSQL = append(fromSQL, ready(plain, fmt.Sprintf("plain-%d", i), map[string]any{"branch": fmt.Sprintf("plain-%d", i)}))
	}
	slices.Sort(fromSeed)
	slices.Sort(fromSQL)
	b.ReportMetric(float64(fromSeed[1].Milliseconds()), "seed-ready-ms")
	b.ReportMetric(float64(fromSQL[1].Milliseconds()), "sql-ready-ms")
	b.Logf("from a seed: %v; from its SQL: %v", fromSeed, fromSQL)
}

// dumpRows is n rows of the example's table as a dump writes them:
// INSERT statements of a thousand literal rows each.
func dumpRows(n int) string {
	var b strings.Builder
	for i := 2; i <= n+1; i++ {
		if (i-2)%1000 == 0 {
			if i > 2 {
				b.WriteString(";\n")
			}
			b.WriteString("INSERT INTO greeting (id, text) VALUES ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, 'seeded row %d, a line of text as an application keeps')", i, i)
	}
	b.WriteString(";\n")
	return b.String()
}
