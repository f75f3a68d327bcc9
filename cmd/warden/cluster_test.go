package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// TestC10NodeOnExternalEtcd: `warden serve --node NAME --etcd-endpoints`
// runs a node on an etcd it does not embed (here a member started by the
// test): the node takes every shard of a cluster of one, a marquee
// created through it is in etcd, and a restart finds it there.
func TestC10NodeOnExternalEtcd(t *testing.T) {
	peer, client := "http://"+freePort(t), "http://"+freePort(t)
	m, err := etcdembed.Start(etcdembed.Config{Name: "e1", Dir: filepath.Join(t.TempDir(), "etcd"), PeerURL: peer, ClientURL: client})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	shared := filepath.Join(t.TempDir(), "shared")
	var out strings.Builder
	require.NoError(t, keygen([]string{shared}, &out))
	args := []string{"--node", "n1", "--etcd-endpoints", client, "--cluster-token-file", filepath.Join(shared, "cluster.token"),
		"--seal-key-file", filepath.Join(shared, "seal.key"), "--callback-signing-key-file", filepath.Join(shared, "callback-signing.key"),
		"--dispatch", "exec", "--dispatch-command", okScript(t), "--bootstrap", "exec", "--bootstrap-command", okScript(t)}
	data, addr := t.TempDir(), freePort(t)
	p := startProc(t, data, addr, args...)
	owned := func() bool {
		st, v := p.do("GET", "/v1/cluster", "op-secret", nil)
		if st != 200 {
			return false
		}
		shards, _ := v["shards"].([]any)
		for _, s := range shards {
			if s.(map[string]any)["owner"] != "n1" {
				return false
			}
		}
		return len(shards) == cluster.Shards
	}
	require.Eventually(t, owned, 10*time.Second, 20*time.Millisecond, "a cluster of one owns every shard")
	st, _ := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait(), p.log.String())
	p = startProc(t, data, addr, args...)
	require.Eventually(t, owned, 10*time.Second, 20*time.Millisecond, "the restarted node takes its shards back at once")
	st, v := p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
	require.Equal(t, 200, st, "the marquee is in etcd")
	require.Equal(t, "m-1", v["id"])
	require.NotContains(t, p.log.String(), "cb-secret")
}

// TestMakeRunStopsCleanlyOnCtrlC: Ctrl-C in a terminal stops make
// run's warden cleanly, and make prints no "*** Interrupt". Make says it
// only on a terminal, so the test types Ctrl-C into one (tmux, Debian's
// package; .ci/run installs it).
func TestMakeRunStopsCleanlyOnCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make run in a terminal")
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed (Debian package tmux; .ci/run installs it)")
	}
	addr, dir := freePort(t), t.TempDir()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	sock := filepath.Join(dir, "tmux.sock")
	tm := func(args ...string) string {
		// The terminal's shell gets the README's clean environment: make
		// test exports WARDEN_PREVIEW_DIR (./data/preview of the checkout),
		// which make run would have taken over DATA's, sharing the
		// checkout's previews (found: this test failed on a checkout with
		// a ./data of its own, never on a fresh clone).
		cmd := exec.Command(tmux, append([]string{"-S", sock}, args...)...)
		cmd.Env = readmeEnv()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "tmux %v: %s", args, out)
		return string(out)
	}
	tm("new-session", "-d", "-s", "run", "-x", "250", "-y", "50")
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	tm("send-keys", "-t", "run", fmt.Sprintf("make -C %s run DATA=%s/data LISTEN=%s; echo make-exited", root, dir, addr), "Enter")
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 3*time.Minute, 100*time.Millisecond, "make run came up")
	// A preview environment, so that make run has started an application.
	p := &proc{t: t, url: "http://" + addr, log: &syncBuffer{}}
	st, v := p.do("POST", "/v1/environments", "dev-operator-token", map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Equal(t, 201, st, "%v", v)
	var view map[string]any
	require.Eventually(t, func() bool {
		_, view = p.do("GET", "/v1/environments/env-1", "dev-operator-token", nil)
		return view["state"] == "ready"
	}, 2*time.Minute, 100*time.Millisecond, "env-1 ready under make run")
	// The preview's own address, as warden observed its route (W8).
	u, err := url.Parse(fmt.Sprint(view["url"]))
	require.NoError(t, err)
	appPort, err := strconv.Atoi(u.Port())
	require.NoError(t, err, "the preview's URL names its port: %v", view)
	ports := []int{appPort}
	require.True(t, listening(appPort), "the application listens on %d", appPort)
	tm("send-keys", "-t", "run", "C-c")
	var screen string
	require.Eventually(t, func() bool {
		screen = tm("capture-pane", "-t", "run", "-p", "-S", "-200")
		return strings.Contains(screen, "msg=stopped")
	}, 30*time.Second, 100*time.Millisecond, "warden stopped")
	time.Sleep(500 * time.Millisecond)
	screen = tm("capture-pane", "-t", "run", "-p", "-S", "-200")
	require.Contains(t, screen, "store_closed=true")
	require.NotContains(t, screen, "Interrupt", "make prints nothing of an interrupt:\n%s", screen)
	require.Eventually(t, func() bool {
		return strings.Contains(tm("capture-pane", "-t", "run", "-p", "-S", "-200"), "make-exited")
	},
		10*time.Second, 100*time.Millisecond, "make run returned")
	for _, port := range ports {
		require.False(t, listening(port), "nothing make run started listens after Ctrl-C (port %d)", port)
	}
	require.False(t, listening(portOf(t, addr)), "warden's port is free")
}

// listening reports whether something accepts connections on the
// loopback port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func portOf(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}
