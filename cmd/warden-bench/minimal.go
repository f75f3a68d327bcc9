package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// startMinimalFloor serves the second floor the goals name: a minimal
// net/http server whose callback is one synced Pebble Set of the body,
// under the delivery id (unique per request, so every request writes a
// new key). No authentication, no decision, no dedup: what no design on
// this machine can beat. It runs in the bench's process, so its CPU per
// request is not separable from the load generator's and is not reported.
func startMinimalFloor(tmp string) (base string, stop func(), err error) {
	db, err := pebble.Open(filepath.Join(tmp, "minimal-floor"), &pebble.Options{})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		db.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: minimalFloor{db}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); _ = db.Close() }, nil
}

type minimalFloor struct{ db *pebble.DB }

func (m minimalFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/metrics":
		return // nothing is deduplicated here: the count stays 0
	case r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/webhooks/"):
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	id := r.Header.Get("Webhook-Id")
	if err != nil || id == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if err := m.db.Set([]byte("d/"+id), body, pebble.Sync); err != nil {
		http.Error(w, "write failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}
