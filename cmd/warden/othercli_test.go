package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// curlLoop runs examples/other-ci/callback.sh (W9) with env and args.
func curlLoop(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (.ci/run installs it)")
	}
	script, err := filepath.Abs("../../examples/other-ci/callback.sh")
	require.NoError(t, err)
	cmd := exec.Command(script, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "WARDEN_RETRY_FOR=20"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, string(out)
}

func otherCIEnv(url string) map[string]string {
	return map[string]string{"WARDEN_CALLBACK_URL": url, "WARDEN_MARQUEE_ID": "m-1", "WARDEN_GENERATION": "4",
		"WARDEN_CALLBACK_TOKEN": "wcb1.k.m-1.4.9.secretmac", "WARDEN_RUN_ID": "pipeline 41"}
}

// TestW9CurlLoopRetriesAndStops: the documented curl loop sends one
// delivery id on every try, the credential only in its header (never on
// curl's command line), retries a 503 after its Retry-After, and stops on
// stale (3) and on a refusal (4) without retrying.
func TestW9CurlLoopRetriesAndStops(t *testing.T) {
	s := newStubWarden(t, stubAnswer{503, `{"error":{"code":"unavailable"}}`, "1"}, stubAnswer{200, `{"result":"applied"}`, ""})
	code, out := curlLoop(t, otherCIEnv(s.srv.URL), "step", "vm_starting")
	require.Equal(t, 0, code, out)
	require.Len(t, s.received, 2)
	for i, r := range s.received {
		require.Equal(t, "ci-pipeline-41-step-vm_starting", r.Header.Get("Webhook-Id"), "one delivery id for every try")
		require.Equal(t, "Bearer wcb1.k.m-1.4.9.secretmac", r.Header.Get("Authorization"))
		require.JSONEq(t, `{"marquee_id":"m-1","verb":"step","generation":4,"step":"vm_starting"}`, s.bodies[i])
	}
	require.Contains(t, out, `{"result":"applied"}`)

	stale := newStubWarden(t, stubAnswer{200, `{"result":"stale","generation":5}`, ""})
	code, _ = curlLoop(t, otherCIEnv(stale.srv.URL), "destroyed")
	require.Equal(t, 3, code, "an obsolete run")

	refused := newStubWarden(t, stubAnswer{400, `{"error":{"code":"invalid_request"}}`, ""})
	code, out = curlLoop(t, otherCIEnv(refused.srv.URL), "failed", `terraform said "no" \ twice`)
	require.Equal(t, 4, code)
	require.Len(t, refused.received, 1, "no retry on a 4xx")
	require.JSONEq(t, `{"marquee_id":"m-1","verb":"failed","generation":4,"reason":"terraform said \"no\" \\ twice"}`, refused.bodies[0])
	require.Contains(t, out, "invalid_request")

	code, out = curlLoop(t, map[string]string{"WARDEN_CALLBACK_URL": s.srv.URL}, "null")
	require.Equal(t, 2, code, out)
}

// TestW9CurlLoopAgainstARealWarden: the same loop against a real warden
// with a scoped credential: applied, then the repeat is answered from the
// first delivery (duplicate, nothing applied twice).
func TestW9CurlLoopAgainstARealWarden(t *testing.T) {
	ok := okScript(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startProc(t, data, freePort(t), "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	token, err := exec.Command(wardenBinary(t), "mint-callback-token", "--data", data, "--marquee", "m-1", "--generation", "1").Output()
	require.NoError(t, err)
	env := map[string]string{"WARDEN_CALLBACK_URL": p.url + "/v1/webhooks/terraform", "WARDEN_MARQUEE_ID": "m-1", "WARDEN_GENERATION": "1",
		"WARDEN_CALLBACK_TOKEN": strings.TrimSpace(string(token)), "WARDEN_RUN_ID": "gitlab-pipeline-9"}
	code, out := curlLoop(t, env, "step", "vm_starting")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"result":"applied"`)
	code, again := curlLoop(t, env, "step", "vm_starting")
	require.Equal(t, 0, code, again)
	require.Equal(t, strings.TrimSpace(out), strings.TrimSpace(again), "the repeat hears the first answer's bytes (M20)")
	_, view := p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
	require.Equal(t, "vm_starting", view["progress"])
}
