package driver

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGitHubDispatchContractAndErrorKinds(t *testing.T) {
	var status int
	var got struct {
		path, auth, accept, version string
		body                        map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.path, got.auth = r.URL.Path, r.Header.Get("Authorization")
		got.accept, got.version = r.Header.Get("Accept"), r.Header.Get("X-GitHub-Api-Version")
		_ = json.NewDecoder(r.Body).Decode(&got.body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"message":"nope"}`)
	}))
	defer srv.Close()
	g := &GitHub{APIURL: srv.URL, Repo: "acme/infra", Workflow: "terraform.yml", Ref: "main", Token: "tok-secret", Client: srv.Client()}
	req := DispatchRequest{MarqueeID: "m-1", Generation: 6, Action: "apply", CallbackURL: "https://w/v1/webhooks/terraform"}
	for _, tc := range []struct {
		status int
		kind   FailureClass
	}{{204, ""}, {429, Transient}, {500, Transient}, {503, Transient}, {404, Configuration}, {401, Configuration}, {422, Configuration}} {
		status = tc.status
		_, err := g.Dispatch(context.Background(), req)
		if tc.kind == "" {
			require.NoError(t, err)
		} else {
			require.Error(t, err)
			require.Equal(t, tc.kind, ClassOf(err), "status %d", tc.status)
			require.NotContains(t, err.Error(), "tok-secret")
		}
	}
	require.Equal(t, "/repos/acme/infra/actions/workflows/terraform.yml/dispatches", got.path)
	require.Equal(t, "Bearer tok-secret", got.auth)
	require.Equal(t, "application/vnd.github+json", got.accept)
	require.Equal(t, "2022-11-28", got.version)
	require.Equal(t, map[string]any{"ref": "main", "return_run_details": true, "inputs": map[string]any{"marquee_id": "m-1", "generation": "6", "action": "apply",
		"callback_url": "https://w/v1/webhooks/terraform"}}, got.body, "input values are strings")

	dead := &GitHub{APIURL: "http://127.0.0.1:1", Repo: "a/b", Workflow: "w", Ref: "main", Token: "tok-secret"}
	_, err := dead.Dispatch(context.Background(), req)
	require.Equal(t, Transient, ClassOf(err))
	require.NotContains(t, err.Error(), "tok-secret")
}

func script(t *testing.T, body string) []string {
	p := filepath.Join(t.TempDir(), "driver.sh")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return []string{p}
}

func TestExecDriverContract(t *testing.T) {
	ctx := context.Background()
	// The request arrives as one JSON object on stdin; the result is one on stdout.
	d := &ExecDispatcher{Exec{Command: script(t, `read line; case "$line" in *'"generation":6'*) echo '{"ok":true}';; *) echo '{"ok":false,"detail":"bad input"}';; esac`)}}
	_, err := d.Dispatch(ctx, DispatchRequest{MarqueeID: "m-1", Generation: 6})
	require.NoError(t, err)
	_, err = d.Dispatch(ctx, DispatchRequest{MarqueeID: "m-1", Generation: 7})
	require.ErrorContains(t, err, "bad input")

	// Non-zero exit: one scoped failure, with stderr as the diagnostic.
	fail := &ExecDispatcher{Exec{Command: script(t, "cat >/dev/null; echo 'quota exceeded' >&2; exit 3")}}
	_, err = fail.Dispatch(ctx, DispatchRequest{})
	require.Equal(t, Scoped, ClassOf(err))
	require.ErrorContains(t, err, "exited 3: quota exceeded")

	// Garbage on stdout is not success.
	garbage := &ExecDispatcher{Exec{Command: script(t, "cat >/dev/null; echo 'done!'")}}
	_, err = garbage.Dispatch(ctx, DispatchRequest{})
	require.ErrorContains(t, err, "not one JSON object")

	// A timeout kills the whole process group and is transient.
	slow := &ExecDispatcher{Exec{Command: script(t, "sleep 30 & sleep 30"), Timeout: 200 * time.Millisecond}}
	start := time.Now()
	_, err = slow.Dispatch(ctx, DispatchRequest{})
	require.Equal(t, Transient, ClassOf(err))
	require.Less(t, time.Since(start), 5*time.Second)

	missing := &ExecDispatcher{Exec{Command: []string{"/nonexistent/driver"}}}
	_, err = missing.Dispatch(ctx, DispatchRequest{})
	require.Error(t, err)
	none := &ExecDispatcher{}
	_, err = none.Dispatch(ctx, DispatchRequest{})
	require.Equal(t, Configuration, ClassOf(err))

	// Secrets travel on stdin, never on argv.
	b := &ExecBootstrapper{Exec{Command: script(t, `grep -q '"ssh_private_key":"s3cret"' && echo '{"ok":true}' || echo '{"ok":false}'`)}}
	require.NoError(t, b.Bootstrap(ctx, BootstrapRequest{SSHKey: "s3cret"}))
}

func TestHTTPSProbeVerifiesTheCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	ok := &HTTPSProbe{RootCAs: roots, Port: port, Timeout: 2 * time.Second}
	require.NoError(t, ok.Bootstrap(context.Background(), BootstrapRequest{FreeDomain: "127.0.0.1"}))
	untrusted := &HTTPSProbe{Port: port, Timeout: 2 * time.Second}
	err := untrusted.Bootstrap(context.Background(), BootstrapRequest{FreeDomain: "127.0.0.1"})
	require.Error(t, err, "a certificate that does not verify is not a bootstrap")
	require.Contains(t, strings.ToLower(err.Error()), "certificate")
	require.Error(t, ok.Bootstrap(context.Background(), BootstrapRequest{}))
}

func TestControlPlaneChats(t *testing.T) {
	answer := `{"live": 2, "reachable": 1}`
	code := 200
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/marquees/m-1/chats", r.URL.Path)
		w.WriteHeader(code)
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	cp := &HTTPControlPlane{URL: srv.URL}
	c, err := cp.Chats(context.Background(), "m-1")
	require.NoError(t, err)
	require.Equal(t, Chats{Live: 2, Reachable: 1}, c)
	for _, bad := range []string{`{"live": 1}`, `{"live": -1, "reachable": 0}`, `garbage`, `{"live":1,"reachable":1,"x":2}`, strings.Repeat(" ", 5000) + "{}"} {
		answer = bad
		_, err := cp.Chats(context.Background(), "m-1")
		require.Error(t, err, bad)
	}
	answer, code = `{"live": 0, "reachable": 0}`, 502
	_, err = cp.Chats(context.Background(), "m-1")
	require.Error(t, err)
	_, err = (&HTTPControlPlane{}).Chats(context.Background(), "m-1")
	require.Error(t, err, "no control plane configured means unknown, never zero")
}

func FuzzDecodeChats(f *testing.F) {
	f.Add([]byte(`{"live": 1, "reachable": 1}`))
	f.Add([]byte(`{"live": 0}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := DecodeChats(raw)
		if err == nil {
			require.GreaterOrEqual(t, c.Live, 0)
			require.GreaterOrEqual(t, c.Reachable, 0)
		}
	})
}

func FuzzDecodeExecResult(f *testing.F) {
	f.Add([]byte(`{"ok":true,"detail":"x"}`))
	f.Add([]byte(`{"ok":true} {"ok":false}`))
	f.Add([]byte(`{"ok":false,"category":"permission","observation":{"exists":true,"route_target":3}}`))
	f.Fuzz(func(t *testing.T, out []byte) {
		// Accepted output is exactly one JSON value; anything else is an
		// error, never a panic or a half-read result.
		var r ExecResult
		if decodeResult(out, &r) == nil {
			require.True(t, json.Valid(bytes.TrimSpace(out)), "accepted %q", out)
		}
		var c CapabilityResult
		if decodeResult(out, &c) == nil {
			require.True(t, json.Valid(bytes.TrimSpace(out)), "accepted %q", out)
		}
	})
}

func TestDecodeExecResultIsOneObject(t *testing.T) {
	var r ExecResult
	require.NoError(t, decodeResult([]byte("{\"ok\":true}\n"), &r))
	require.True(t, r.OK)
	require.Error(t, decodeResult([]byte(`{"ok":true} {"ok":false}`), &r))
	require.Error(t, decodeResult([]byte(`ok`), &r))
}
