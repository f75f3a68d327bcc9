package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestW5WorkflowScriptsWithRealTerraform runs the GitHub workflow's own
// scripts (examples/github/scripts) against a real warden, dispatched
// through the exec driver by the example runner, with a real Terraform on
// the local flavour (examples/terraform/local): the marquee walks to
// provisioned with the connection Terraform output, a redeploy makes the
// old generation's run stop quietly on a stale answer (W2, W5), and a
// destroy ends in destroyed with the Terraform state empty.
func TestW5WorkflowScriptsWithRealTerraform(t *testing.T) {
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform is not on the PATH: W5's end-to-end run needs it (Terraform 1.5 or later, as examples/terraform requires; no provider downloads)")
	}
	if testing.Short() {
		t.Skip("runs real terraform init/apply/destroy")
	}
	bin := wardenBinary(t)
	runner := filepath.Join(t.TempDir(), "example-workflow")
	out, err := exec.Command("go", "build", "-o", runner, "../../examples/workflow").CombinedOutput()
	require.NoError(t, err, "%s", out)
	scripts, err := filepath.Abs("../../examples/github/scripts")
	require.NoError(t, err)
	tfWork := t.TempDir()
	runLog := filepath.Join(t.TempDir(), "runs.log")

	data, addr := filepath.Join(t.TempDir(), "data"), freePort(t)
	p := startProcEnv(t, data, addr,
		[]string{"WARDEN_EXAMPLE_SCRIPTS=" + scripts, "WARDEN_BIN=" + bin, "WARDEN_TF_WORK=" + tfWork, "WARDEN_EXAMPLE_LOG=" + runLog},
		"--dispatch", "exec", "--dispatch-command", runner,
		"--bootstrap", "exec", "--bootstrap-command", runner+" bootstrap",
		"--driver-env", "WARDEN_EXAMPLE_SCRIPTS,WARDEN_BIN,WARDEN_TF_WORK,WARDEN_EXAMPLE_LOG,TF_CLI_CONFIG_FILE")
	logs := func() string {
		b, _ := os.ReadFile(runLog)
		return fmt.Sprintf("runs:\n%s\nwarden:\n%s", b, p.log)
	}
	view := func() map[string]any {
		_, v := p.do("GET", "/v1/marquees/m-tf", "op-secret", nil)
		return v
	}
	waitFor := func(lifecycle string, generation float64) map[string]any {
		t.Helper()
		var v map[string]any
		require.Eventually(t, func() bool {
			v = view()
			return v["lifecycle"] == lifecycle && v["generation"] == generation
		}, 3*time.Minute, 200*time.Millisecond, "marquee never reached %s at generation %v; last view %v\n%s", lifecycle, generation, v, logs)
		return v
	}

	status, _ := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-tf", "kind": "tutorial"})
	require.Equal(t, 201, status)
	v := waitFor("provisioned", 1)
	conn, _ := v["connection"].(map[string]any)
	require.Equal(t, "127.0.0.1", conn["host"], "the connection is Terraform's output (W3)")
	require.Equal(t, "m-tf.localhost", conn["free_domain"])
	_, hist := p.do("GET", "/v1/marquees/m-tf/history?limit=50", "op-secret", nil)
	var steps []string
	for _, e := range hist["items"].([]any) {
		e := e.(map[string]any)
		if e["source"] == "callback" && e["result"] == "applied" {
			steps = append(steps, fmt.Sprint(e["verb"]))
			require.True(t, strings.HasPrefix(fmt.Sprint(e["delivery_id"]), "run-"), "delivery ids derived from the run (W2): %v", e)
		}
	}
	require.Contains(t, steps, "step")
	require.Contains(t, steps, "deployed")

	// A redeploy: generation 2's run provisions again; generation 1's run,
	// were it still going, is told stale and stops quietly (exit 0 from the
	// script, exit 3 from warden callback).
	status, _ = p.do("POST", "/v1/marquees/m-tf/redeploy", "op-secret", nil)
	require.Equal(t, 202, status)
	waitFor("provisioned", 2)

	mint := exec.Command(bin, "mint-callback-token", "--data", data, "--marquee", "m-tf", "--generation", "1")
	oldToken, err := mint.Output()
	require.NoError(t, err)
	oldRun := exec.Command(filepath.Join(scripts, "provision.sh"), "apply")
	oldRun.Env = append(os.Environ(), "WARDEN_BIN="+bin, "WARDEN_TF_WORK="+t.TempDir(),
		"WARDEN_CALLBACK_URL="+p.url+"/v1/webhooks/terraform", "WARDEN_MARQUEE_ID=m-tf", "WARDEN_GENERATION=1", "WARDEN_RUN_ID=a-late-run-of-generation-1",
		"WARDEN_CALLBACK_TOKEN="+strings.TrimSpace(string(oldToken)))
	var oldOut bytes.Buffer
	oldRun.Stdout, oldRun.Stderr = &oldOut, &oldOut
	require.NoError(t, oldRun.Run(), "an obsolete run stops with status 0: %s", oldOut.String())
	require.Contains(t, oldOut.String(), `"result":"stale"`)
	require.Contains(t, oldOut.String(), "obsolete")
	require.NotContains(t, oldOut.String(), "terraform apply", "it stopped at its first callback, before touching the infrastructure")
	require.EqualValues(t, 2, view()["generation"])
	// The status the old run's script branched on: warden callback says
	// "obsolete run" with its own exit status (3), not a failure.
	late := exec.Command(bin, "callback", "--verb", "step", "--step", "ssh_configuring")
	late.Env = oldRun.Env
	err = late.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, exitObsolete, exit.ExitCode())

	status, _ = p.do("POST", "/v1/marquees/m-tf/destroy", "op-secret", map[string]any{})
	require.Equal(t, 202, status)
	waitFor("destroyed", 3)
	state := exec.Command("terraform", "-chdir="+filepath.Join(tfWork, "m-tf"), "state", "list")
	left, err := state.Output()
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(left)), "terraform destroy left resources")
}
