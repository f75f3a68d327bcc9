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
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stubWarden answers callbacks from a script of statuses and records what
// it received.
type stubWarden struct {
	mu       sync.Mutex
	answers  []stubAnswer
	received []*http.Request
	bodies   []string
	srv      *httptest.Server
}

type stubAnswer struct {
	status     int
	body       string
	retryAfter string
}

func newStubWarden(t *testing.T, answers ...stubAnswer) *stubWarden {
	s := &stubWarden{answers: answers}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.received = append(s.received, r)
		s.bodies = append(s.bodies, string(b))
		a := s.answers[min(len(s.received)-1, len(s.answers)-1)]
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func callbackEnv(url string) map[string]string {
	return map[string]string{"WARDEN_CALLBACK_URL": url, "WARDEN_MARQUEE_ID": "m-1", "WARDEN_GENERATION": "4",
		"WARDEN_CALLBACK_TOKEN": "wcb1.k.m-1.4.9.secretmac", "GITHUB_RUN_ID": "777", "GITHUB_RUN_ATTEMPT": "2"}
}

// call runs `warden callback` in process with no real sleeping: the
// waits it asks for are recorded instead.
func call(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string, waits []time.Duration) {
	t.Helper()
	var out, errb bytes.Buffer
	o, err := parseCallback(args, func(k string) string { return env[k] }, &errb)
	if err != nil {
		return exitUsage, "", err.Error(), nil
	}
	o.sleep = func(d time.Duration) { waits = append(waits, d) }
	o.jitter = func(d time.Duration) time.Duration { return d } // the cap, for a test that reads the waits
	code = o.send(&out, &errb)
	return code, out.String(), errb.String(), waits
}

// TestW1ConfiguredFromTheEnvironment: everything comes from the variables a
// workflow sets; the credential only ever travels in the header.
func TestW1ConfiguredFromTheEnvironment(t *testing.T) {
	s := newStubWarden(t, stubAnswer{200, `{"result":"applied","marquee_id":"m-1","generation":4,"received_generation":4}`, ""})
	code, out, _, _ := call(t, callbackEnv(s.srv.URL), "--verb", "step", "--step", "vm_starting")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, `"applied"`, "the answer, on one line")
	require.Len(t, s.received, 1)
	r := s.received[0]
	require.Equal(t, "Bearer wcb1.k.m-1.4.9.secretmac", r.Header.Get("Authorization"))
	require.NotContains(t, r.URL.String(), "secretmac", "never in a URL")
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(s.bodies[0]), &body))
	require.Equal(t, map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 4.0, "step": "vm_starting"}, body)

	env := callbackEnv(s.srv.URL)
	delete(env, "WARDEN_CALLBACK_TOKEN")
	code, _, errs, _ := call(t, env, "--verb", "null")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "WARDEN_CALLBACK_TOKEN")
	code, _, errs, _ = call(t, callbackEnv(s.srv.URL), "--verb", "null", "wcb1.some.token")
	require.Equal(t, exitUsage, code, "a credential on the command line is refused, not used")
	require.Contains(t, errs, "never from the command line")
}

// TestW2DeliveryIDsAreOnePerRun: every try of one callback of one run has
// one id; another run (GitHub's run or attempt, another CI's WARDEN_RUN_ID)
// has another; without a run id the marquee and generation stand in.
func TestW2DeliveryIDsAreOnePerRun(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	gh := deliveryID(env("GITHUB_RUN_ID", "777", "GITHUB_RUN_ATTEMPT", "2", "WARDEN_RUN_ID", "ignored"), "m-1", 3, "step", "vm_starting")
	require.Equal(t, "gh-777-2-step-vm_starting", gh, "GitHub's run comes first")
	require.NotEqual(t, gh, deliveryID(env("GITHUB_RUN_ID", "777", "GITHUB_RUN_ATTEMPT", "3"), "m-1", 3, "step", "vm_starting"), "a re-run attempt is another run")

	a := deliveryID(env("WARDEN_RUN_ID", "pipeline 41"), "m-1", 3, "deployed", "")
	require.Equal(t, a, deliveryID(env("WARDEN_RUN_ID", "pipeline 41"), "m-1", 3, "deployed", ""), "stable across tries")
	require.NotEqual(t, a, deliveryID(env("WARDEN_RUN_ID", "pipeline 42"), "m-1", 3, "deployed", ""), "another CI run, another id")
	require.Regexp(t, `^run-[0-9a-f]{16}-deployed$`, a, "the caller's run id is digested, never sent as is")

	require.Regexp(t, `^wc-m-1-3-null-[0-9a-f]{8}$`, deliveryID(env(), "m-1", 3, "null", ""))
}

// TestW2RetriesWhatShouldBeRetried: 503 with Retry-After, 429 and a 502 are
// sent again under the same delivery id, with growing waits; a 400 is not
// retried; stale and locked exit with the "obsolete run" status.
func TestW2RetriesWhatShouldBeRetried(t *testing.T) {
	s := newStubWarden(t, stubAnswer{503, `{"error":{"code":"unavailable"}}`, "7"}, stubAnswer{429, "", ""}, stubAnswer{502, "", ""},
		stubAnswer{200, `{"result":"duplicate"}`, ""})
	code, _, _, waits := call(t, callbackEnv(s.srv.URL), "--verb", "step", "--step", "ssh_configuring")
	require.Equal(t, exitOK, code)
	require.Len(t, s.received, 4)
	for _, r := range s.received {
		require.Equal(t, "gh-777-2-step-ssh_configuring", r.Header.Get("Webhook-Id"), "one delivery id for every try (M20)")
	}
	require.Equal(t, []time.Duration{7 * time.Second, 2 * time.Second, 4 * time.Second}, waits, "Retry-After honoured, then doubling")

	refused := newStubWarden(t, stubAnswer{400, `{"error":{"code":"invalid_request","message":"field step"}}`, ""})
	code, out, _, _ := call(t, callbackEnv(refused.srv.URL), "--verb", "step", "--step", "vm_starting")
	require.Equal(t, exitRefused, code)
	require.Len(t, refused.received, 1, "no retry on a 4xx")
	require.Contains(t, out, "invalid_request", "the server's message")

	for _, result := range []string{"stale", "locked"} {
		obsolete := newStubWarden(t, stubAnswer{200, `{"result":"` + result + `"}`, ""})
		code, _, _, _ = call(t, callbackEnv(obsolete.srv.URL), "--verb", "deployed", "--connection-from", terraformOutput(t, nil))
		require.Equal(t, exitObsolete, code, result)
	}
	for _, result := range []string{"applied", "duplicate", "ignored", "pending_confirmation", "checking", "vetoed"} {
		ok := newStubWarden(t, stubAnswer{200, `{"result":"` + result + `"}`, ""})
		code, _, _, _ = call(t, callbackEnv(ok.srv.URL), "--verb", "null")
		require.Equal(t, exitOK, code, result)
	}

	down := newStubWarden(t, stubAnswer{503, "", ""})
	o, err := parseCallback([]string{"--verb", "null", "--retry-for", "3s"}, func(k string) string { return callbackEnv(down.srv.URL)[k] }, io.Discard)
	require.NoError(t, err)
	o.sleep = func(time.Duration) {}
	var errb bytes.Buffer
	require.Equal(t, exitGaveUp, o.send(io.Discard, &errb), "a bounded total time")
	require.Contains(t, errb.String(), "giving up")
	require.NotContains(t, errb.String(), "secretmac")
}

// terraformOutput writes a `terraform output -json` file, without the
// outputs named in drop.
func terraformOutput(t *testing.T, drop map[string]bool) string {
	outputs := map[string]any{
		"host":            map[string]any{"sensitive": false, "type": "string", "value": "203.0.113.7"},
		"port":            map[string]any{"sensitive": false, "type": "number", "value": 22},
		"user":            map[string]any{"sensitive": false, "type": "string", "value": "root"},
		"ssh_private_key": map[string]any{"sensitive": true, "type": "string", "value": "-----BEGIN OPENSSH PRIVATE KEY-----x"},
		"free_domain":     map[string]any{"sensitive": false, "type": "string", "value": "m-1.example.net"},
		"acme_dns": map[string]any{"sensitive": true, "type": []any{"object", map[string]any{}}, "value": map[string]any{
			"server_url": "https://acme.example.net", "username": "u", "password": "p", "subdomain": "s", "full_domain": "s.acme.example.net"}},
	}
	for k := range drop {
		delete(outputs, k)
	}
	b, _ := json.Marshal(outputs)
	p := filepath.Join(t.TempDir(), "outputs.json")
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

// TestW3ConnectionFromTerraformOutput: deployed carries the connection read
// from `terraform output -json`; a missing output is an error before
// anything is sent.
func TestW3ConnectionFromTerraformOutput(t *testing.T) {
	s := newStubWarden(t, stubAnswer{200, `{"result":"applied"}`, ""})
	code, _, _, _ := call(t, callbackEnv(s.srv.URL), "--verb", "deployed", "--connection-from", terraformOutput(t, nil))
	require.Equal(t, exitOK, code)
	var body struct {
		Connection map[string]any `json:"connection"`
	}
	require.NoError(t, json.Unmarshal([]byte(s.bodies[0]), &body))
	require.Equal(t, "203.0.113.7", body.Connection["host"])
	require.Equal(t, 22.0, body.Connection["port"])
	require.Equal(t, "p", body.Connection["acme_dns"].(map[string]any)["password"])

	code, _, errs, _ := call(t, callbackEnv(s.srv.URL), "--verb", "deployed", "--connection-from", terraformOutput(t, map[string]bool{"ssh_private_key": true, "port": true}))
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "port, ssh_private_key")
	require.Len(t, s.received, 1, "nothing sent")
}

// TestW1W2AgainstARealWarden: the built binary calls back to a real warden
// with the scoped credential its dispatch received: applied, then a
// redeploy makes the same run's next callback stale (exit 3).
func TestW1W2AgainstARealWarden(t *testing.T) {
	out := t.TempDir()
	script := filepath.Join(out, "dispatch.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\ncat > "+out+"/request-$$.json\necho '{\"ok\":true}'\n"), 0o755))
	dir := filepath.Join(t.TempDir(), "data")
	p := startProc(t, dir, freePort(t), "--dispatch", "exec", "--dispatch-command", script, "--bootstrap", "exec", "--bootstrap-command", script)
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	var req struct {
		Generation    uint64 `json:"generation"`
		CallbackURL   string `json:"callback_url"`
		CallbackToken string `json:"callback_token"`
	}
	require.Eventually(t, func() bool {
		files, _ := filepath.Glob(filepath.Join(out, "request-*.json"))
		if len(files) == 0 {
			return false
		}
		b, _ := os.ReadFile(files[0])
		return json.Unmarshal(b, &req) == nil && req.CallbackToken != ""
	}, 10*time.Second, 20*time.Millisecond)
	run := func(args ...string) (int, string) {
		cmd := exec.Command(wardenBinary(t), append([]string{"callback"}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "WARDEN_CALLBACK_URL=" + req.CallbackURL, "WARDEN_MARQUEE_ID=m-1",
			"WARDEN_GENERATION=" + strconv.FormatUint(req.Generation, 10),
			"WARDEN_CALLBACK_TOKEN=" + req.CallbackToken, "GITHUB_RUN_ID=42", "GITHUB_RUN_ATTEMPT=1"}
		b, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, string(b)
	}
	code, answer := run("--verb", "step", "--step", "vm_starting")
	require.Equal(t, exitOK, code, answer)
	require.Contains(t, answer, `"result":"applied"`)
	code, answer = run("--verb", "step", "--step", "vm_starting")
	require.Equal(t, exitOK, code)
	require.Contains(t, answer, `"result":"applied"`, "a retried callback is the same delivery: the first answer again")

	st, _ = p.do("POST", "/v1/marquees/m-1/redeploy", "op-secret", nil)
	require.Equal(t, 202, st)
	code, answer = run("--verb", "step", "--step", "ssh_configuring")
	require.Equal(t, exitObsolete, code, "the superseded run learns it is obsolete: %s", answer)
	require.Contains(t, answer, `"result":"stale"`)
}
