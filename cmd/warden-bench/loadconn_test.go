package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestLoadConnSendsTheRequestNetHTTPWould: the lean client must say
// exactly what the net/http client said (method, path, credential,
// headers, body), read each whole answer, keep one connection alive, and
// dial again after a server closes it; else the bench would measure
// another load than the one it reports.
func TestLoadConnSendsTheRequestNetHTTPWould(t *testing.T) {
	type seen struct {
		method, path, auth, id, ctype, body, remote string
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Webhook-Id"), r.Header.Get("Content-Type"), string(body), r.RemoteAddr})
		n := len(got)
		mu.Unlock()
		if n == 2 {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(200 + n - 1)
		_, _ = io.WriteString(w, `{"status":"applied"}`)
	}))
	defer srv.Close()

	lc, err := newLoadConn(srv.URL + "/v1/webhooks/terraform")
	if err != nil {
		t.Fatal(err)
	}
	defer lc.close()
	for i, id := range []string{"d-1", "d-2", "d-3"} {
		st, err := lc.post("tok", `{"marquee_id":"m-000"}`, []string{"Webhook-Id", id})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if st != 200+i {
			t.Fatalf("request %d: status %d, want %d", i, st, 200+i)
		}
	}
	if len(got) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(got))
	}
	for i, s := range got {
		want := seen{"POST", "/v1/webhooks/terraform", "Bearer tok", []string{"d-1", "d-2", "d-3"}[i], "application/json", `{"marquee_id":"m-000"}`, s.remote}
		if s != want {
			t.Errorf("request %d: server saw %+v, want %+v", i, s, want)
		}
	}
	if got[0].remote != got[1].remote {
		t.Errorf("the connection was not kept alive: %s then %s", got[0].remote, got[1].remote)
	}
	if got[1].remote == got[2].remote {
		t.Errorf("a connection the server closed was used again: %s", got[2].remote)
	}
	if _, err := newLoadConn("https://example.invalid/x"); err == nil {
		t.Error("an https URL was accepted; the lean client speaks plain HTTP only")
	}
}

// TestAnUnknownLoadGeneratorIsRefused: a -load the bench does not know
// must stop it, not measure through some other client under its name.
func TestAnUnknownLoadGeneratorIsRefused(t *testing.T) {
	defer func(g string) { loadGen = g }(loadGen)
	for gen, known := range map[string]bool{"go": true, "nethttp": true, "wrk": true, "gonet": false, "": false} {
		loadGen = gen
		_, _, err := parseRun("64", []string{"terraform"})
		if known != (err == nil) {
			t.Errorf("-load %q: err %v", gen, err)
		}
	}
}
