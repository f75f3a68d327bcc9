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
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
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

// TestP2MakePreviewsStartsThePlatformAndStopsIt: from an empty data
// directory, `make previews`' program starts PostgreSQL, Caddy and warden
// on the local platform and says where; a preview created through
// warden's API is served through Caddy under its branch's host name with
// its revision and a row of its own database; removed, it is gone; Ctrl-C
// stops warden, Caddy and PostgreSQL. The preview workflow's script
// drives a pull request's preview on it too (P12).
func TestP2MakePreviewsStartsThePlatformAndStopsIt(t *testing.T) {
	bin := t.TempDir()
	_, err := testkit.BuildWarden(bin)
	require.NoError(t, err)
	out0, err := exec.Command("go", "build", "-o", filepath.Join(bin, "warden-previews"), ".").CombinedOutput()
	require.NoError(t, err, "%s", out0)
	data := filepath.Join(t.TempDir(), "data")
	abs, _ := filepath.Abs(filepath.Join(data, "previews"))
	if pg, _ := clusterDir(abs); !strings.HasPrefix(pg, abs) {
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(pg)) }) // as root it lives under /var/tmp
	}
	listen, preview, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	cmd := exec.Command(filepath.Join(bin, "warden-previews"), "--listen", listen, "--preview-listen", preview, "--caddy-admin", admin,
		"--data", data, "--warden", filepath.Join(bin, "warden"), "--source", "../../examples/previewapp", "--",
		"--dispatch", "exec", "--dispatch-command", "/bin/true", "--env-reconcile-every", "1s")
	cmd.Env = append(os.Environ(), "WARDEN_OPERATOR_TOKEN=op-token", "WARDEN_CALLBACK_TOKEN=cb-token")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		_ = exec.Command("podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "rm", "--force", "app-env-mp1", "app-pr-7-0123456").Run()
	})
	api := func(method, path string, body any) (int, map[string]any) {
		st, v, _ := testkit.Do(http.DefaultClient, "http://"+listen, method, path, "op-token", body, "")
		return st, v
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + listen + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond, "warden ready: %s", &out)
	for _, said := range []string{"PostgreSQL on 127.0.0.1:", "Caddy's admin API on " + admin, "previews at http://<branch>.localhost:", "warden on http://" + listen} {
		require.Contains(t, out.String(), said)
	}

	st, _ := api("POST", "/v1/environments", map[string]any{"id": "env-mp1", "branch": "demo", "revision": "abc123"})
	require.Equal(t, http.StatusCreated, st)
	state := func() string {
		_, v := api("GET", "/v1/environments/env-mp1", nil)
		s, _ := v["state"].(string)
		return s
	}
	require.Eventually(t, func() bool { return state() == "ready" }, 90*time.Second, 200*time.Millisecond, "env-mp1 ready (now %s): %s", state(), &out)
	req, _ := http.NewRequest("GET", "http://"+preview+"/", nil)
	req.Host = "demo.localhost"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(page), "Preview env-mp1")
	require.Contains(t, string(page), "<code>abc123</code>")
	require.Contains(t, string(page), "own database")
	saveScreenshot(t, "http://"+listen, "op-token", "env-mp1", "http://demo.localhost:"+portOf(preview)+"/")

	st, _ = api("POST", "/v1/environments/env-mp1/remove", map[string]any{"reason": "done"})
	require.Equal(t, http.StatusAccepted, st)
	require.Eventually(t, func() bool { return state() == "removed" }, 60*time.Second, 200*time.Millisecond, "env-mp1 removed (now %s)", state())

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
		_, v := api("GET", "/v1/environments/pr-7-0123456", nil)
		s, _ := v["state"].(string)
		u, _ := v["url"].(string)
		return s, u
	}
	require.Eventually(t, func() bool { s, _ := prState(); return s == "ready" }, 90*time.Second, 200*time.Millisecond, "the pull request's preview is ready: %s", &out)
	_, url := prState()
	require.Equal(t, "http://feature-demo.localhost:"+portOf(preview)+"/", url)
	req, _ = http.NewRequest("GET", "http://"+preview+"/", nil)
	req.Host = "feature-demo.localhost"
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(page), "<code>"+sha+"</code>")
	script("remove")
	require.Eventually(t, func() bool { s, _ := prState(); return s == "removed" }, 60*time.Second, 200*time.Millisecond, "removed on close")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-exited:
		require.NoError(t, err, "%s", &out)
	case <-time.After(60 * time.Second):
		t.Fatalf("make previews did not stop: %s", &out)
	}
	exited <- nil // for the cleanup
	require.Contains(t, out.String(), "Caddy stopped")
	require.Contains(t, out.String(), "PostgreSQL stopped")
	for _, addr := range []string{listen, admin, preview} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		require.Error(t, err, "nothing listens on %s any more", addr)
	}
	require.False(t, strings.Contains(out.String(), "panic"), "%s", &out)
}
