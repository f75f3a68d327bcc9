package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestW7EnvCommandsAgainstARealWarden: the preview workflow's client asks a
// real warden for an environment and its removal; a repeated create with
// --if-absent and a removal of a missing one with --if-present are
// success (a re-run job), without them warden's refusal is the exit status
// and its message is printed.
func TestW7EnvCommandsAgainstARealWarden(t *testing.T) {
	ok := okScript(t)
	p := startProc(t, t.TempDir()+"/data", freePort(t), "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": p.url, "WARDEN_OPERATOR_TOKEN": "op-secret"}[k]
	}
	run := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := runEnv(args, env, &out, &errs)
		return code, out.String(), errs.String()
	}
	create := []string{"create", "--id", "pr-7-3f2c9e1", "--branch", "feature-search", "--revision", "3f2c9e1aa", "--ttl", "72h", "-o", "json"}
	code, out, errs := run(create...)
	require.Equal(t, envExitOK, code, errs)
	require.Contains(t, out, `"id":"pr-7-3f2c9e1"`)
	require.Equal(t, 1, strings.Count(out, "\n"), "one line")
	code, out, _ = run("get", "pr-7-3f2c9e1")
	require.Equal(t, envExitOK, code)
	require.True(t, strings.HasPrefix(out, "pr-7-3f2c9e1 (branch feature-search): "), "by default a line a person reads: %s", out)
	require.Contains(t, out, "desired ready, generation 1")
	require.Less(t, len(out), 400)

	code, _, errs = run(create...)
	require.Equal(t, envExitRefused, code)
	require.Contains(t, errs, "409", "warden's refusal")
	require.Contains(t, errs, "already exists")
	code, out, _ = run(append(create, "--if-absent")...)
	require.Equal(t, envExitOK, code, "a re-run job's create is success")
	require.Contains(t, out, `"id":"pr-7-3f2c9e1"`)

	code, out, errs = run("create", "--id", "pr-8-seeded", "--branch", "feature-seed", "--revision", "8a", "--data-from", "demo", "-o", "json")
	require.Equal(t, envExitOK, code, errs)
	require.Contains(t, out, `"data_from":"demo"`, "the seed its data is copied from (P20)")

	code, out, errs = run("remove", "pr-7-3f2c9e1", "--reason", "pull request closed")
	require.Equal(t, envExitOK, code, errs)
	require.Contains(t, out, "desired removed")

	code, _, errs = run("remove", "pr-8-0000000", "--reason", "x")
	require.Equal(t, envExitRefused, code)
	require.Contains(t, errs, "404")
	code, _, _ = run("remove", "pr-8-0000000", "--if-present")
	require.Equal(t, envExitOK, code)

	code, _, errs = run("create", "--id", "Bad_ID", "--branch", "b", "--revision", "r")
	require.Equal(t, envExitRefused, code)
	require.Contains(t, errs, "400")

	// The token stays out of argv: there is no flag for it.
	code, _, errs = run("get", "pr-7-3f2c9e1", "--token", "op-secret")
	require.Equal(t, envExitUsage, code)
	require.Contains(t, errs, "unknown flag: --token")
}

// TestW7PreviewScriptFollowsAPullRequest runs examples/github/scripts/
// preview.sh as the preview workflow does, against a real warden: opened
// creates pr-<n>-<sha7> with a branch name made valid, a push creates the
// new head's and removes the old head's, closed removes the last.
func TestW7PreviewScriptFollowsAPullRequest(t *testing.T) {
	ok := okScript(t)
	p := startProc(t, t.TempDir()+"/data", freePort(t), "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
	script, err := filepath.Abs("../../examples/github/scripts/preview.sh")
	require.NoError(t, err)
	preview := func(what string, kv ...string) string {
		t.Helper()
		cmd := exec.Command(script, what)
		cmd.Env = append(os.Environ(), "WARDEN_BIN="+wardenBinary(t), "WARDEN_URL="+p.url, "WARDEN_OPERATOR_TOKEN=op-secret",
			"PR_NUMBER=12", "PR_BRANCH=Feature/Search_v2")
		cmd.Env = append(cmd.Env, kv...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "preview.sh %s: %s", what, out)
		return string(out)
	}
	first, second := "ABCDEF1234567890abcdef1234567890abcdef12", "0123456789abcdef0123456789abcdef01234567"
	out := preview("create", "HEAD_SHA="+first)
	require.Contains(t, out, "pr-12-abcdef1 (branch feature-search-v2)", "a branch name made valid")
	preview("create", "HEAD_SHA="+first) // the job run again

	preview("create", "HEAD_SHA="+second)
	preview("remove-before", "BEFORE_SHA="+first)
	_, old := p.do("GET", "/v1/environments/pr-12-abcdef1", "op-secret", nil)
	require.Equal(t, "removed", old["desired"])
	_, cur := p.do("GET", "/v1/environments/pr-12-0123456", "op-secret", nil)
	require.Equal(t, "ready", cur["desired"])

	preview("remove", "HEAD_SHA="+second)
	_, cur = p.do("GET", "/v1/environments/pr-12-0123456", "op-secret", nil)
	require.Equal(t, "removed", cur["desired"])
	preview("remove", "HEAD_SHA="+second) // closed twice: still success
}

// TestW7ServeReportsPreviewsToGitHub: `warden serve --notify github`, the
// reference preview drivers, and a fake GitHub API: a preview of a commit
// becomes ready and its commit gets warden's status linking the preview;
// its removal sets the status again, without a link.
func TestW7ServeReportsPreviewsToGitHub(t *testing.T) {
	previewDir := t.TempDir()
	previewBin := previewDriver(t, previewDir)
	var mu sync.Mutex
	var statuses []map[string]any
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer gh-secret", r.Header.Get("Authorization"))
		switch {
		case r.Method == "POST" && strings.HasPrefix(r.URL.Path, "/repos/acme/app/statuses/"):
			var s map[string]any
			_ = json.NewDecoder(r.Body).Decode(&s)
			mu.Lock()
			statuses = append(statuses, s)
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		case r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/pulls"):
			_, _ = w.Write([]byte("[]")) // a commit on no pull request: a status only
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(gh.Close)
	ok := okScript(t)
	p := startProcEnv(t, t.TempDir()+"/data", freePort(t), []string{"WARDEN_PREVIEW_DIR=" + previewDir},
		"--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok,
		"--env-driver-command", previewBin, "--driver-env", "WARDEN_PREVIEW_DIR",
		"--notify", "github", "--github-repo", "acme/app", "--github-api-url", gh.URL)
	sha := "3f2c9e1aa3f2c9e1aa3f2c9e1aa3f2c9e1aa3f2c"
	status, _ := p.do("POST", "/v1/environments", "op-secret", map[string]any{"id": "pr-9-3f2c9e1", "branch": "feature-gh", "revision": sha})
	require.Equal(t, 201, status)
	last := func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		if len(statuses) == 0 {
			return nil
		}
		return statuses[len(statuses)-1]
	}
	require.Eventually(t, func() bool { s := last(); return s != nil && s["description"] == "preview ready" }, 60*time.Second, 100*time.Millisecond, "%s", p.log)
	_, v := p.do("GET", "/v1/environments/pr-9-3f2c9e1", "op-secret", nil)
	require.NotEmpty(t, v["url"])
	require.Equal(t, v["url"], last()["target_url"], "the status links the preview's own URL")
	require.Equal(t, "warden/preview", last()["context"])

	status, _ = p.do("POST", "/v1/environments/pr-9-3f2c9e1/remove", "op-secret", map[string]any{"reason": "closed"})
	require.Equal(t, 202, status)
	require.Eventually(t, func() bool { return last()["description"] == "preview removed" }, 60*time.Second, 100*time.Millisecond, "%s", p.log)
	require.Nil(t, last()["target_url"])
}

// TestO14VersionAndBuildInfo: `warden version` names the version, commit
// and Go version, and warden_build_info says the same.
func TestO14VersionAndBuildInfo(t *testing.T) {
	out, err := exec.Command(wardenBinary(t), "version").Output()
	require.NoError(t, err)
	line := strings.TrimSpace(string(out))
	require.Regexp(t, `^warden \S+ \(commit \S+, go1\.\d+`, line)
	ok := okScript(t)
	p := startProc(t, t.TempDir()+"/data", freePort(t), "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
	resp, err := http.Get(p.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var version, commit string
	_, err = fmt.Sscanf(line, "warden %s (commit %s", &version, &commit)
	require.NoError(t, err)
	commit = strings.TrimSuffix(commit, ",")
	require.Contains(t, string(body), `warden_build_info{commit="`+commit+`",goversion="`)
	require.Contains(t, string(body), `version="`+version+`"} 1`)
}

// TestSecondServeOnOneDataDirRefusesBeforeListening: a second warden on a
// data directory in use refuses before it listens and says which process
// holds it.
func TestSecondServeOnOneDataDirRefusesBeforeListening(t *testing.T) {
	ok := okScript(t)
	data := t.TempDir() + "/data"
	first := startProc(t, data, freePort(t), "--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok)
	addr := freePort(t)
	cmd := exec.Command(wardenBinary(t), "serve", "--listen", addr, "--data", data, "--dispatch", "exec", "--dispatch-command", ok,
		"--bootstrap", "exec", "--bootstrap-command", ok)
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN=cb-secret", "WARDEN_OPERATOR_TOKEN=op-secret")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the second warden exits")
	require.Contains(t, string(out), fmt.Sprintf("is in use by warden pid %d", first.cmd.Process.Pid))
	require.NotContains(t, string(out), "listening", "it refused before listening")
}

// TestP16AKillMidEffectIsReadySoonAfterTheRestart: warden and the
// reference driver it runs are killed -9 while the database's apply is in
// flight (each apply slowed by 1.5 s), so the effect never happened. The
// restarted warden takes the attempt over at once, observes the database
// absent, applies it again without a back-off (no failure is recorded),
// and the preview is ready within 20 s of the restart.
func TestP16AKillMidEffectIsReadySoonAfterTheRestart(t *testing.T) {
	t.Parallel() // mostly waits on processes and timers: overlapped with the other long waits (make test)
	previewDir := t.TempDir()
	previewBin := previewDriver(t, previewDir)
	ok := okScript(t)
	data, addr := t.TempDir()+"/data", freePort(t)
	dir := "WARDEN_PREVIEW_DIR=" + previewDir
	args := []string{"--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok,
		"--env-driver-command", previewBin, "--driver-env", "WARDEN_PREVIEW_DIR,WARDEN_PREVIEW_APPLY_DELAY", "--env-reconcile-every", "-1s"}
	// The first process's applies take 10 s, so that the kill 300 ms after
	// the database's apply is seen in flight lands inside it even on a
	// loaded machine (at 1.5 s, a poll answered late once found it done);
	// the second's take 1.5 s, as a slow platform's would.
	first := startProcGroup(t, data, addr, []string{dir, "WARDEN_PREVIEW_APPLY_DELAY=10s"}, args...)
	status, _ := first.do("POST", "/v1/environments", "op-secret", map[string]any{"id": "env-k1", "branch": "kill-mid", "revision": "r1"})
	require.Equal(t, 201, status)
	require.Eventually(t, func() bool {
		_, v := first.do("GET", "/v1/environments/env-k1", "op-secret", nil)
		a, _ := v["attempt"].(map[string]any)
		return a != nil && a["capability"] == "database" && a["op"] == "apply" && a["verifying"] == false
	}, 30*time.Second, 20*time.Millisecond, "the database's apply is in flight: %s", first.log)
	time.Sleep(300 * time.Millisecond) // well inside the apply's 10 s
	require.NoError(t, syscall.Kill(-first.cmd.Process.Pid, syscall.SIGKILL), "warden and its driver, killed -9")
	_ = first.cmd.Wait()

	restarted := time.Now()
	second := startProcEnv(t, data, addr, []string{dir, "WARDEN_PREVIEW_APPLY_DELAY=1500ms"}, append(args, "--log-level", "debug")...)
	var state string
	require.Eventually(t, func() bool {
		_, v := second.do("GET", "/v1/environments/env-k1", "op-secret", nil)
		state, _ = v["state"].(string)
		return state == "ready"
	}, 20*time.Second-time.Since(restarted), 50*time.Millisecond, "ready within 20 s of the restart (now %s): %s", state, second.log)
	require.NotContains(t, second.log.String(), "environment step failed", "an effect that never happened is applied again, not failed and backed off")
	require.Contains(t, second.log.String(), "did not happen; asked again now")
}

// startProcGroup is startProcEnv in a process group of its own, so that a
// test kills warden together with the drivers it runs.
func startProcGroup(t *testing.T, dataDir, addr string, env []string, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(wardenBinary(t), append([]string{"serve", "--listen", addr, "--data", dataDir}, extra...)...)
	cmd.Env = append(append(os.Environ(), "WARDEN_CALLBACK_TOKEN=cb-secret", "WARDEN_OPERATOR_TOKEN=op-secret"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	p := &proc{t: t, cmd: cmd, url: "http://" + addr, log: log}
	p.waitReady(20*time.Second, "warden")
	return p
}
