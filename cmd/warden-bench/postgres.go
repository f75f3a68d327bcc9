package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wardenhq/warden/internal/driver/local/pgcluster"
)

// The PostgreSQL baseline: the same callback contract and the
// same decision as warden's durable path, made the way a team would make
// it on PostgreSQL 15: one transaction per callback (the dedup row first,
// the marquee row locked, the generation checked, the row updated, a
// history row, the answer stored with the dedup row), synchronous_commit
// on, against a throwaway cluster the bench starts itself.

// pgCluster is the baseline's throwaway cluster.
type pgCluster struct{ *pgcluster.Cluster }

// startPostgres starts a cluster under tmp, tuned as a team would for this
// load: synchronous commits, fsync on, room for the connections.
func startPostgres(tmp string) (*pgCluster, error) {
	c, err := pgcluster.Start(filepath.Join(tmp, "pg"), "bench", "synchronous_commit=on", "fsync=on", "max_connections=300", "shared_buffers=256MB")
	if err != nil {
		return nil, err
	}
	return &pgCluster{c}, nil
}

func (c *pgCluster) dsn() string { return c.DSN("postgres") }

func (c *pgCluster) stop() { _ = c.Stop() }

// cpu is the CPU time of the whole cluster: the postmaster and every
// backend it forked.
func (c *pgCluster) cpu() time.Duration {
	total := cpuTime(c.PID())
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(c.PID()) {
			total += cpuTime(pid)
		}
	}
	return total
}

const pgSchema = `
CREATE TABLE marquees (id text PRIMARY KEY, generation bigint NOT NULL, lifecycle text NOT NULL, progress int NOT NULL,
  last_callback_at timestamptz, updated_at timestamptz NOT NULL);
CREATE TABLE history (id text NOT NULL, seq bigserial, at timestamptz NOT NULL, verb text NOT NULL, generation bigint NOT NULL,
  received_generation bigint NOT NULL, result text NOT NULL, delivery_id text, PRIMARY KEY (id, seq));
CREATE TABLE dedup (marquee_id text NOT NULL, delivery_id text NOT NULL, body_sha256 bytea NOT NULL, status int, answer bytea,
  at timestamptz NOT NULL, PRIMARY KEY (marquee_id, delivery_id));`

// pgServer answers POST /v1/webhooks/terraform like warden's durable path,
// deciding in one PostgreSQL transaction, and serves the deduplicated
// answer count at /metrics as warden does, so the bench's duplicate check
// holds for it too.
type pgServer struct {
	pool   *pgxpool.Pool
	token  [32]byte
	dupes  atomic.Int64
	failed atomic.Int64
}

var stepOrder = map[string]int{"vm_starting": 1, "ssh_configuring": 2, "tls_provisioning": 3, "app_deploying": 4}

func (s *pgServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/metrics":
		fmt.Fprintf(w, "warden_callbacks_total{result=\"duplicate_delivery\",verb=\"step\"} %d\n", s.dupes.Load())
		return
	case r.Method == http.MethodGet && r.URL.Path == "/readyz":
		_, _ = io.WriteString(w, `{"status":"ready"}`)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/webhooks/terraform":
		http.Error(w, `{"error":{"code":"not_found"}}`, http.StatusNotFound)
		return
	}
	got := sha256.Sum256([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
	if subtle.ConstantTimeCompare(got[:], s.token[:]) != 1 {
		http.Error(w, `{"error":{"code":"unauthorized"}}`, http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		http.Error(w, `{"error":{"code":"invalid_request"}}`, http.StatusBadRequest)
		return
	}
	var cb struct {
		MarqueeID  string `json:"marquee_id"`
		Verb       string `json:"verb"`
		Generation uint64 `json:"generation"`
		Step       string `json:"step"`
	}
	if err := json.Unmarshal(body, &cb); err != nil || cb.MarqueeID == "" || cb.Verb != "step" || stepOrder[cb.Step] == 0 {
		http.Error(w, `{"error":{"code":"invalid_request"}}`, http.StatusBadRequest)
		return
	}
	delivery, sum := r.Header.Get("Webhook-Id"), sha256.Sum256(body)
	answer, dup, err := s.decide(r.Context(), cb.MarqueeID, cb.Generation, stepOrder[cb.Step], delivery, sum[:])
	if err != nil {
		s.failed.Add(1)
		http.Error(w, `{"error":{"code":"unavailable"}}`, http.StatusServiceUnavailable)
		return
	}
	if dup {
		s.dupes.Add(1)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

// decide is the transaction: dedup, lock, check, update, history, answer.
func (s *pgServer) decide(ctx context.Context, id string, received uint64, step int, delivery string, sum []byte) ([]byte, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	now := time.Now()
	tag, err := tx.Exec(ctx, `INSERT INTO dedup (marquee_id, delivery_id, body_sha256, at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		id, delivery, sum, now)
	if err != nil {
		return nil, false, err
	}
	if tag.RowsAffected() == 0 {
		var answer []byte
		if err := tx.QueryRow(ctx, `SELECT answer FROM dedup WHERE marquee_id = $1 AND delivery_id = $2`, id, delivery).Scan(&answer); err != nil {
			return nil, false, err
		}
		return answer, true, tx.Commit(ctx)
	}
	var generation uint64
	var lifecycle string
	var progress int
	err = tx.QueryRow(ctx, `SELECT generation, lifecycle, progress FROM marquees WHERE id = $1 FOR UPDATE`, id).Scan(&generation, &lifecycle, &progress)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("no marquee %s", id)
	} else if err != nil {
		return nil, false, err
	}
	result := "stale"
	if received == 0 || received == generation {
		result = "ignored"
		if lifecycle == "provisioning" && step > progress {
			progress, result = step, "applied"
		}
		if _, err := tx.Exec(ctx, `UPDATE marquees SET progress = $2, last_callback_at = $3, updated_at = $3 WHERE id = $1`, id, progress, now); err != nil {
			return nil, false, err
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO history (id, at, verb, generation, received_generation, result, delivery_id) VALUES ($1, $2, 'step', $3, $4, $5, $6)`,
		id, now, generation, received, result, delivery); err != nil {
		return nil, false, err
	}
	answer, _ := json.Marshal(map[string]any{"result": result, "marquee_id": id, "generation": generation, "received_generation": received})
	if _, err := tx.Exec(ctx, `UPDATE dedup SET status = 200, answer = $3 WHERE marquee_id = $1 AND delivery_id = $2`, id, delivery, answer); err != nil {
		return nil, false, err
	}
	return answer, false, tx.Commit(ctx)
}

// startPGServer starts a cluster, loads the schema and the bench's
// marquees, and serves the baseline on loopback. stop ends both.
func startPGServer(tmp string, marquees, conns int) (base string, cpu func() time.Duration, stop func(), err error) {
	cluster, err := startPostgres(tmp)
	if err != nil {
		return "", nil, nil, err
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(cluster.dsn())
	if err != nil {
		cluster.stop()
		return "", nil, nil, err
	}
	cfg.MaxConns = int32(max(conns, 4))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		cluster.stop()
		return "", nil, nil, err
	}
	if _, err := pool.Exec(ctx, pgSchema); err != nil {
		pool.Close()
		cluster.stop()
		return "", nil, nil, err
	}
	for i := 0; i < marquees; i++ {
		if _, err := pool.Exec(ctx, `INSERT INTO marquees VALUES ($1, 1, 'provisioning', 0, NULL, now())`, fmt.Sprintf("m-%03d", i)); err != nil {
			pool.Close()
			cluster.stop()
			return "", nil, nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		pool.Close()
		cluster.stop()
		return "", nil, nil, err
	}
	srv := &http.Server{Handler: &pgServer{pool: pool, token: sha256.Sum256([]byte(callbackToken))}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	// The handler runs in this process: the bench's own CPU is not the
	// server's, so the baseline's CPU figure is the cluster's alone
	// (PostgreSQL's processes), a lower bound of its cost per request.
	return "http://" + ln.Addr().String(), cluster.cpu, func() {
		_ = srv.Close()
		pool.Close()
		cluster.stop()
	}, nil
}
