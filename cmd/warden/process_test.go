package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/testports"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// wardenBinary builds the real binary once per test run (or takes the
// one make test built for every package).
func wardenBinary(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "warden-bin")
		if err == nil {
			binPath, err = testkit.BuildWarden(dir)
		}
		buildErr = err
	})
	require.NoError(t, buildErr, binPath)
	return binPath
}

// proc is one warden process on loopback.
type proc struct {
	t   *testing.T
	cmd *exec.Cmd
	url string
	log *syncBuffer
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort is a loopback address for a process a test starts later: below
// the ephemeral range (testports.StablePort), so that nothing connecting or
// listening on ":0" meanwhile takes it (CI: an etcd member's peer port,
// picked before a restore of several seconds, was taken by then).
func freePort(t *testing.T) string {
	addr, err := testports.StablePort()
	require.NoError(t, err)
	return addr
}

func startProc(t *testing.T, dataDir, addr string, extra ...string) *proc {
	t.Helper()
	return startProcEnv(t, dataDir, addr, nil, extra...)
}

// startProcEnv starts warden with env added to the test's environment.
func startProcEnv(t *testing.T, dataDir, addr string, env []string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--listen", addr, "--data", dataDir}, extra...)
	cmd := exec.Command(wardenBinary(t), args...)
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN=cb-secret", "WARDEN_OPERATOR_TOKEN=op-secret", "WARDEN_GITHUB_TOKEN=gh-secret")
	cmd.Env = append(cmd.Env, env...)
	return startCmd(t, cmd, addr, "warden")
}

// startCmd starts a command that runs warden on addr, its output kept,
// killed when the test ends, and waits until warden is ready.
func startCmd(t *testing.T, cmd *exec.Cmd, addr, what string) *proc {
	t.Helper()
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	p := &proc{t: t, cmd: cmd, url: "http://" + addr, log: log}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p.waitReady(20*time.Second, what)
	return p
}

// waitReady waits until the process answers /readyz with 200.
func (p *proc) waitReady(within time.Duration, what string) {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		resp, err := http.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, within, 20*time.Millisecond, "%s did not become ready: %s", what, p.log)
}

// waitDispatched waits until a marquee's attempt has been dispatched
// (its outcome recorded), the moment a test can call back for it.
func (p *proc) waitDispatched(id string, within time.Duration) {
	p.t.Helper()
	p.waitDispatchedAs(id, "op-secret", within)
}

// waitDispatchedAs is waitDispatched asking with another operator token.
func (p *proc) waitDispatchedAs(id, token string, within time.Duration) {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		_, v := p.do("GET", "/v1/marquees/"+id, token, nil)
		a, _ := v["attempt"].(map[string]any)
		return a != nil && a["dispatch"] == "sent"
	}, within, 20*time.Millisecond, "%s was not dispatched: %s", id, p.log)
}

// deployedCallback is the workflow's "deployed" callback for generation 1
// of a marquee, with a connection whose private key is sshKey (sealed in
// the store).
func deployedCallback(id, sshKey string) map[string]any {
	return map[string]any{"marquee_id": id, "verb": "deployed", "generation": 1,
		"connection": map[string]any{"host": "203.0.113.7", "port": 22, "user": "root", "ssh_private_key": sshKey, "free_domain": id + ".example.net",
			"acme_dns": map[string]any{"server_url": "https://acme.example.net", "username": "u", "password": "p", "subdomain": "s", "full_domain": "s.acme.example.net"}}}
}

func (p *proc) do(method, path, token string, body any) (int, map[string]any) {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, p.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// acceptingGitHub is a dispatch API that accepts every dispatch (204).
func acceptingGitHub(t *testing.T) *httptest.Server {
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(gh.Close)
	return gh
}

// okScript is an exec driver that reads its request and succeeds.
func okScript(t *testing.T) string {
	script := filepath.Join(t.TempDir(), "ok.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\necho '{\"ok\":true}'\n"), 0o755))
	return script
}

// TestI5I10ProcessRestartKeepsPoolsAndMarquees kills the real process with
// SIGKILL and starts a new one on the same data directory: every answered
// callback (I5) and admission (I10) is still there, the pool is rebuilt
// with its queue in order (A7, I8), and work resumes.
func TestI5I10ProcessRestartKeepsPoolsAndMarquees(t *testing.T) {
	gh := acceptingGitHub(t)
	script := okScript(t)
	dir := filepath.Join(t.TempDir(), "data") // created 0700 by warden (T11)
	addr := freePort(t)
	flags := []string{"--dispatch", "github", "--github-api-url", gh.URL, "--github-repo", "acme/infra",
		"--bootstrap", "exec", "--bootstrap-command", script, "--pool", "default=1"}

	p := startProc(t, dir, addr, flags...)
	for _, id := range []string{"m-1", "m-2", "m-3"} {
		st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": id, "kind": "tutorial"})
		require.Equal(t, 201, st, "%v", v)
	}
	// Wait until the dispatch's outcome is recorded: a kill before that
	// leaves it unknown, and recovery would supersede it (a new generation).
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
		a, _ := v["attempt"].(map[string]any)
		return v["generation"] == 1.0 && a != nil && a["dispatch"] == "sent"
	}, 5*time.Second, 10*time.Millisecond)
	st, v := p.do("POST", "/v1/webhooks/terraform", "cb-secret", map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "ssh_configuring"})
	require.Equal(t, 200, st)
	require.Equal(t, "applied", v["result"])

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()

	p2 := startProc(t, dir, addr, flags...)
	_, m1 := p2.do("GET", "/v1/marquees/m-1", "op-secret", nil)
	require.Equal(t, "ssh_configuring", m1["progress"], "I5: the applied callback survived SIGKILL")
	_, pool := p2.do("GET", "/v1/pools/default", "op-secret", nil)
	require.Equal(t, "m-1", pool["reserved"].([]any)[0].(map[string]any)["job"], "I10: the admission survived")
	queued := pool["queued"].([]any)
	require.Len(t, queued, 2)
	require.Equal(t, "m-2", queued[0].(map[string]any)["job"], "A7, I8: queue rebuilt in sequence order")
	require.Equal(t, "m-3", queued[1].(map[string]any)["job"])

	st, v = p2.do("POST", "/v1/webhooks/terraform", "cb-secret", map[string]any{"marquee_id": "m-1", "verb": "failed", "generation": 1, "reason": "x"})
	require.Equal(t, 200, st)
	require.Equal(t, "applied", v["result"])
	require.Eventually(t, func() bool {
		_, v := p2.do("GET", "/v1/marquees/m-2", "op-secret", nil)
		return v["generation"] == 1.0
	}, 5*time.Second, 10*time.Millisecond, "the next queued job is admitted after the restart")

	// SIGTERM: graceful, exit 0.
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p2.cmd.Wait(), p2.log.String())
	require.Contains(t, p2.log.String(), "stopped")
	require.NotContains(t, p2.log.String(), "cb-secret")
	require.NotContains(t, p2.log.String(), "gh-secret")
}

func TestConfigSecretsNeverFromFlags(t *testing.T) {
	env := map[string]string{"WARDEN_CALLBACK_TOKEN": "a", "WARDEN_OPERATOR_TOKEN": "b", "WARDEN_DISPATCH": "exec", "WARDEN_DISPATCH_COMMAND": "echo hi"}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig([]string{"--pool", "default=2", "--pool", "gpu=1"}, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"default": 2, "gpu": 1}, c.Pools)
	require.Equal(t, []string{"echo", "hi"}, c.DispatchCommand, "WARDEN_* env fills flags not given")
	_, err = parseConfig([]string{"--callback-token", "x"}, getenv, io.Discard)
	require.Error(t, err, "there is no flag for a secret")
	env["WARDEN_OPERATOR_TOKEN"] = "a"
	_, err = parseConfig(nil, getenv, io.Discard)
	require.ErrorContains(t, err, "must differ")
	env["WARDEN_OPERATOR_TOKEN"] = ""
	file := filepath.Join(t.TempDir(), "op")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	c, err = parseConfig([]string{"--operator-token-file", file}, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "from-file", c.OperatorToken)
	_, err = parseConfig([]string{"--pool", "bad name=1"}, getenv, io.Discard)
	require.Error(t, err)
	_, err = parseConfig([]string{"--dedup-retention", "1h"}, getenv, io.Discard)
	require.ErrorContains(t, err, "72h")
}

// TestC10SingleNodeStaysTheDefault: without --node, warden is the
// single-node process on Pebble and the cluster flags are refused; a node
// needs etcd (embedded or external, not both), a cluster token and the
// shared keys, and `warden keygen` makes those.
func TestC10SingleNodeStaysTheDefault(t *testing.T) {
	env := map[string]string{"WARDEN_OPERATOR_TOKEN": "b", "WARDEN_DISPATCH": "exec", "WARDEN_DISPATCH_COMMAND": "echo hi"}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig(nil, getenv, io.Discard)
	require.NoError(t, err)
	require.Empty(t, c.Node, "a lone warden serve is a single node")
	_, err = parseConfig([]string{"--etcd-embed"}, getenv, io.Discard)
	require.ErrorContains(t, err, "need --node")

	_, err = parseConfig([]string{"--node", "n1"}, getenv, io.Discard)
	require.ErrorContains(t, err, "exactly one of --etcd-embed or --etcd-endpoints")
	require.ErrorContains(t, err, "cluster token")
	require.ErrorContains(t, err, "shares its keys")
	_, err = parseConfig([]string{"--node", "N 1", "--etcd-endpoints", "http://127.0.0.1:2379"}, getenv, io.Discard)
	require.ErrorContains(t, err, "--node: 1..32")

	dir := filepath.Join(t.TempDir(), "shared")
	var out strings.Builder
	require.NoError(t, keygen([]string{dir}, &out))
	require.Contains(t, out.String(), "cluster token written")
	out.Reset()
	require.NoError(t, keygen([]string{dir}, &out), "run again, it keeps what is there")
	require.Empty(t, out.String())
	c, err = parseConfig([]string{"--node", "n1", "--etcd-embed", "--etcd-plaintext", "--etcd-peer-url", "http://127.0.0.1:2380", "--etcd-client-url", "http://127.0.0.1:2379",
		"--etcd-initial-cluster", "n1=http://127.0.0.1:2380", "--cluster-token-file", filepath.Join(dir, "cluster.token"),
		"--seal-key-file", filepath.Join(dir, "seal.key"), "--callback-signing-key-file", filepath.Join(dir, "callback-signing.key")}, getenv, io.Discard)
	require.NoError(t, err)
	require.Len(t, c.ClusterToken, 64)
}

// TestServeKeepsCollectionsApartUnlessGOGCIsSet: warden serve raises the
// GC percent while its live heap is small (internal/gcheadroom), and an
// operator's GOGC wins; go_gc_gogc_percent says which is in force.
func TestServeKeepsCollectionsApartUnlessGOGCIsSet(t *testing.T) {
	ok := okScript(t)
	percent := regexp.MustCompile(`(?m)^go_gc_gogc_percent (\d+)$`)
	gogc := func(env ...string) string {
		p := startProcEnv(t, t.TempDir()+"/data", freePort(t), env, "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
		var line string
		require.Eventually(t, func() bool {
			resp, err := http.Get(p.url + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			line = percent.FindString(string(body))
			return line != "" && line != "go_gc_gogc_percent 100"
		}, 10*time.Second, 100*time.Millisecond)
		return line
	}
	require.Regexp(t, `^go_gc_gogc_percent \d{3,}$`, gogc(), "a small heap gets more than Go's 100")
	require.Equal(t, "go_gc_gogc_percent 250", gogc("GOGC=250"), "the operator's GOGC is left alone")
}
