package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/testports"
)

// freeAddr is a loopback address below the ephemeral range
// (testports.StablePort): one from ":0", closed and listened on later, may
// be taken meanwhile by anything connecting.
func freeAddr(t testing.TB) string {
	addr, err := testports.StablePort()
	require.NoError(t, err)
	return addr
}

// syncBuffer is the command's output, read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// makePreviews is one run of `make previews`' program on a data
// directory, its output read while it runs.
type makePreviews struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
	listen string
	ready  time.Time
}

func startPreviews(t *testing.T, bin, data, listen, preview, admin, pgListen string) *makePreviews {
	t.Helper()
	release, err := testports.Hold("podman") // its containers are named by environment ids, machine-wide
	require.NoError(t, err)
	t.Cleanup(release)
	cmd := exec.Command(filepath.Join(bin, "warden-previews"), "--listen", listen, "--preview-listen", preview, "--caddy-admin", admin,
		"--pg-listen", pgListen, "--data", data, "--warden", filepath.Join(bin, "warden"), "--source", "../../examples/previewapp", "--",
		"--dispatch", "exec", "--dispatch-command", "/bin/true", "--env-reconcile-every", "2s")
	cmd.Env = append(os.Environ(), "WARDEN_OPERATOR_TOKEN=op-token", "WARDEN_CALLBACK_TOKEN=cb-token")
	m := &makePreviews{t: t, cmd: cmd, out: &syncBuffer{}, exited: make(chan error, 1), listen: listen}
	cmd.Stdout, cmd.Stderr = m.out, m.out
	require.NoError(t, cmd.Start())
	go func() { m.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if m.exited != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-m.exited
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + listen + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 120*time.Second, 100*time.Millisecond, "warden ready: %s", m.out)
	m.ready = time.Now()
	return m
}

// interrupt is Ctrl-C: everything stops, and the program exits 0.
func (m *makePreviews) interrupt() {
	m.t.Helper()
	require.NoError(m.t, m.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-m.exited:
		require.NoError(m.t, err, "%s", m.out)
	case <-time.After(60 * time.Second):
		m.t.Fatalf("make previews did not stop: %s", m.out)
	}
	m.exited = nil
}

func (m *makePreviews) api(method, path string, body any) (int, map[string]any) {
	st, v, _ := testkit.Do(http.DefaultClient, "http://"+m.listen, method, path, "op-token", body, "")
	return st, v
}

func (m *makePreviews) state(id string) string {
	_, v := m.api("GET", "/v1/environments/"+id, nil)
	s, _ := v["state"].(string)
	return s
}

// page is what host answers through Caddy, on a connection of its own:
// Caddy replaces its server at each config change, and a kept-alive
// connection may still be answered by the one before it.
func page(t *testing.T, preview, host string) (int, string) {
	req, _ := http.NewRequest("GET", "http://"+preview+"/", nil)
	req.Host = host
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var podmanHere = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// running lists the running containers labelled with instance.
func running(t *testing.T, instance string) []string {
	out, err := exec.Command("podman", append(podmanHere, "ps", "--filter", "label=warden.platform="+instance, "--format", "{{.Names}}")...).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

func appPort(t *testing.T, env string) string {
	out, err := exec.Command("podman", append(podmanHere, "inspect", "--format", `{{index .Config.Labels "warden.app.port"}}`, "app-"+env)...).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestP2P12P18MakePreviewsStartsThePlatformAndStopsIt: from an empty data
// directory, `make previews`' program starts PostgreSQL, Caddy and warden
// on the local platform, saying each step as it starts it (P18); the
// README's preview block, run against it, creates a preview, waits for
// it and gets its page through Caddy with its revision and a row of its
// own database; a host with no preview, and a removed preview's, answer a
// 404 page (P17). The preview workflow's script drives a pull request's
// preview on it too (P12). Ctrl-C stops warden, the preview containers,
// Caddy and PostgreSQL: nothing listens any more. Started again on the
// same data directory, PostgreSQL is on the same address and every
// preview serves its revision and its row within 30 s of warden being
// ready (P15).
func TestP2P12P18MakePreviewsStartsThePlatformAndStopsIt(t *testing.T) {
	bin := t.TempDir()
	_, err := testkit.BuildWarden(bin)
	require.NoError(t, err)
	out0, err := exec.Command("go", "build", "-o", filepath.Join(bin, "warden-previews"), ".").CombinedOutput()
	require.NoError(t, err, "%s", out0)
	data := filepath.Join(t.TempDir(), "data")
	abs, _ := filepath.Abs(filepath.Join(data, "previews"))
	pgDir, _ := clusterDir(abs)
	if !strings.HasPrefix(pgDir, abs) {
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(pgDir)) }) // as root it lives under /var/tmp
	}
	instance := instanceOf(abs)
	envs := []string{"env-1", "env-mp2", "env-mp3", "pr-7-0123456"}
	t.Cleanup(func() {
		for _, env := range envs {
			_ = exec.Command("podman", append(podmanHere, "rm", "--force", "app-"+env)...).Run()
		}
	})
	listen, preview, admin, pgListen := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	mp := startPreviews(t, bin, data, listen, preview, admin, pgListen)
	for _, said := range []string{"initialising PostgreSQL's cluster", "starting PostgreSQL on " + pgListen, "PostgreSQL on " + pgListen,
		"starting Caddy: admin API on " + admin, "previews at http://<branch>.localhost:", "building the application",
		"starting warden on http://" + listen} {
		require.Contains(t, mp.out.String(), said)
	}
	require.Eventually(t, func() bool { return strings.Contains(mp.out.String(), "warden is ready after") }, 5*time.Second, 50*time.Millisecond)

	// The README's block, as written, against this make previews.
	readmeBlock(t, bin, listen, preview)
	require.Equal(t, "ready", mp.state("env-1"), "%s", mp.out)
	saveScreenshot(t, "http://"+listen, "op-token", "env-1", "http://demo.localhost:"+portOf(preview)+"/")

	st, _ := mp.api("POST", "/v1/environments/env-1/remove", map[string]any{"reason": "done"})
	require.Equal(t, http.StatusAccepted, st)
	require.Eventually(t, func() bool { return mp.state("env-1") == "removed" }, 60*time.Second, 200*time.Millisecond, "env-1 removed (now %s)", mp.state("env-1"))
	for _, host := range []string{"demo.localhost", "nothing-here.localhost"} {
		status, body := page(t, preview, host)
		require.Equal(t, http.StatusNotFound, status, "P17: %s, a removed preview's host or one that never had one: %s", host, body)
		require.Contains(t, body, "No preview here")
		require.Contains(t, body, "<code>"+host+"</code>")
		require.Contains(t, body, `href="http://`+listen+`/ui/environments"`, "a link to the console")
	}

	// P12: the preview workflow's own script asks for a pull request's
	// preview on this platform and removes it on close; the URL warden
	// notifies is Caddy's.
	sha := "0123456789abcdef0123456789abcdef01234567"
	script := func(what string) {
		c := exec.Command("../../examples/github/scripts/preview.sh", what)
		c.Env = append(os.Environ(), "PR_NUMBER=7", "PR_BRANCH=Feature/Demo", "HEAD_SHA="+sha, "WARDEN_URL=http://"+listen,
			"WARDEN_OPERATOR_TOKEN=op-token", "WARDEN_BIN="+filepath.Join(bin, "warden"))
		b, err := c.CombinedOutput()
		require.NoError(t, err, "preview.sh %s: %s", what, b)
	}
	script("create")
	prState := func() (string, string) {
		_, v := mp.api("GET", "/v1/environments/pr-7-0123456", nil)
		s, _ := v["state"].(string)
		u, _ := v["url"].(string)
		return s, u
	}
	require.Eventually(t, func() bool { s, _ := prState(); return s == "ready" }, 90*time.Second, 200*time.Millisecond, "the pull request's preview is ready: %s", mp.out)
	_, url := prState()
	require.Equal(t, "http://feature-demo.localhost:"+portOf(preview)+"/", url)
	_, body := page(t, preview, "feature-demo.localhost")
	require.Contains(t, body, "<code>"+sha+"</code>")
	script("remove")
	require.Eventually(t, func() bool { s, _ := prState(); return s == "removed" }, 60*time.Second, 200*time.Millisecond, "removed on close")

	// P15: two previews running when Ctrl-C comes.
	for _, id := range []string{"env-mp2", "env-mp3"} {
		st, _ := mp.api("POST", "/v1/environments", map[string]any{"id": id, "branch": "branch-" + id, "revision": "r-" + id})
		require.Equal(t, http.StatusCreated, st)
	}
	ports := map[string]string{}
	for _, id := range []string{"env-mp2", "env-mp3"} {
		require.Eventually(t, func() bool { return mp.state(id) == "ready" }, 90*time.Second, 200*time.Millisecond, "%s ready: %s", id, mp.out)
		ports[id] = appPort(t, id)
	}
	require.ElementsMatch(t, []string{"app-env-mp2", "app-env-mp3"}, running(t, instance))
	mp.interrupt()
	for _, said := range []string{"stopped the preview containers", "Caddy stopped", "PostgreSQL stopped"} {
		require.Contains(t, mp.out.String(), said)
	}
	require.Empty(t, running(t, instance), "no preview container of the first run is left running")
	for _, addr := range []string{listen, admin, preview, pgListen, "127.0.0.1:" + ports["env-mp2"], "127.0.0.1:" + ports["env-mp3"]} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		require.Error(t, err, "nothing listens on %s any more", addr)
	}
	require.False(t, strings.Contains(mp.out.String(), "panic"), "%s", mp.out)

	// The next start: the same PostgreSQL address, and the previews back.
	again := startPreviews(t, bin, data, listen, preview, admin, pgListen)
	require.Contains(t, again.out.String(), "PostgreSQL on "+pgListen, "PostgreSQL keeps its address")
	require.NotContains(t, again.out.String(), "initialising PostgreSQL's cluster", "the cluster is there already")
	for _, id := range []string{"env-mp2", "env-mp3"} {
		require.Eventually(t, func() bool {
			status, body := page(t, preview, "branch-"+id+".localhost")
			return again.state(id) == "ready" && status == http.StatusOK && strings.Contains(body, "<code>r-"+id+"</code>") && strings.Contains(body, "own database")
		}, 30*time.Second-time.Since(again.ready), 200*time.Millisecond, "%s is ready and serves its revision and its row within 30 s of warden being ready: %s", id, again.out)
	}
	again.interrupt()
	require.Empty(t, running(t, instance))

	// P15: a PostgreSQL address another process holds is refused at once,
	// naming it; make previews-clean then removes what was left for reuse.
	taken, err := net.Listen("tcp", pgListen)
	require.NoError(t, err)
	var out bytes.Buffer
	err = run([]string{"--data", data, "--pg-listen", pgListen, "--listen", listen, "--preview-listen", preview, "--caddy-admin", admin}, func(string) string { return "" }, &out, &out)
	taken.Close()
	require.ErrorContains(t, err, "PostgreSQL's address "+pgListen+" is taken")
	require.ErrorContains(t, err, "PG_LISTEN=127.0.0.1:")
	require.NotContains(t, out.String(), "starting Caddy", "refused before anything starts")
	out.Reset()
	require.NoError(t, run([]string{"--clean", "--data", data}, func(string) string { return "" }, &out, &out))
	require.Contains(t, out.String(), "removed the preview containers")
	left, err := exec.Command("podman", append(podmanHere, "ps", "--all", "--filter", "label=warden.platform="+instance, "--format", "{{.Names}}")...).Output()
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(string(left)), "no container of this platform is left")
	_, err = os.Stat(abs)
	require.True(t, os.IsNotExist(err), "<data>/previews is gone: %v", err)
	if !strings.HasPrefix(pgDir, abs) {
		_, err = os.Stat(filepath.Dir(pgDir)) // clusterDir would make it again: asked before
		require.True(t, os.IsNotExist(err), "the cluster under /var/tmp is gone")
	}
}

// readmeBlock runs the previews guide's block (the one marked
// "readme-test: previews") as written, in a directory whose bin/warden is
// the one built here, against this make previews.
func readmeBlock(t *testing.T, bin, listen, preview string) {
	t.Helper()
	out := guideBlock(t, "previews", bin, listen, preview)
	for _, want := range []string{"Preview env-1", "<code>abc123</code>", "own database", "404"} {
		require.Contains(t, out, want, "the README's preview block printed: %s", out)
	}
}

// guideBlock runs the previews guide's block marked tag, as written,
// against a make previews, and returns what it printed.
func guideBlock(t *testing.T, tag, bin, listen, preview string) string {
	t.Helper()
	readme, err := os.ReadFile("../../docs/guides/previews.md")
	require.NoError(t, err)
	mark := "<!-- readme-test: " + tag + " -->\n```sh\n"
	i := strings.Index(string(readme), mark)
	require.GreaterOrEqual(t, i, 0, "docs/guides/previews.md marks its %s block", tag)
	block := string(readme)[i+len(mark):]
	block = block[:strings.Index(block, "```")]
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(bin, "warden"), filepath.Join(dir, "bin", "warden")))
	sh := exec.Command("bash", "-c", "set -euo pipefail\n"+block)
	sh.Dir = dir
	sh.Env = append(os.Environ(), "LISTEN="+listen, "PREVIEW_LISTEN="+preview, "WARDEN_OPERATOR_TOKEN=op-token")
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "the previews guide's %s block, as written: %s", tag, out)
	return string(out)
}
