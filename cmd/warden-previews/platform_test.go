package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/testports"
)

// ownPlatform is make previews' parts (PostgreSQL, Caddy, the
// application's build context) started by a test or benchmark itself, a
// warden built beside them: its options and `warden serve`'s arguments
// on them. Everything stops when tb ends, the containers of apps
// removed.
type ownPlatform struct {
	options
	serve []string
}

func startOwnPlatform(tb testing.TB, apps ...string) ownPlatform {
	tb.Helper()
	bin := tb.TempDir()
	_, err := testkit.BuildWarden(bin)
	require.NoError(tb, err)
	release, err := testports.Hold("podman") // containers are named by environment ids, machine-wide
	require.NoError(tb, err)
	tb.Cleanup(release)
	data := filepath.Join(tb.TempDir(), "data")
	base, _ := filepath.Abs(filepath.Join(data, "previews"))
	if pgDir, _ := clusterDir(base); !strings.HasPrefix(pgDir, base) {
		tb.Cleanup(func() { os.RemoveAll(filepath.Dir(pgDir)) }) // as root it lives under /var/tmp
	}
	tb.Cleanup(func() {
		for _, app := range apps {
			_ = exec.Command("podman", append(podmanHere, "rm", "--force", "app-"+app)...).Run()
		}
	})
	o := options{listen: freeAddr(tb), previewListen: freeAddr(tb), caddyAdmin: freeAddr(tb), pgListen: freeAddr(tb), data: data,
		warden: filepath.Join(bin, "warden"), source: "../../examples/previewapp",
		serve: []string{"--dispatch", "exec", "--dispatch-command", "/bin/true", "--env-reconcile-every", "1s"}}
	parts := &parts{out: io.Discard, instance: instanceOf(base)}
	tb.Cleanup(parts.stop)
	serve, err := parts.start(base, o)
	require.NoError(tb, err)
	return ownPlatform{options: o, serve: serve}
}

// wardenProc is warden serving in a process group of its own (it and the
// drivers it runs are killed together), its output read while it runs.
type wardenProc struct {
	cmd *exec.Cmd
	log *syncBuffer
	url string
}

// startWarden runs warden with args, listening on listen, until its
// /readyz answers; tb's end kills it.
func startWarden(tb testing.TB, bin string, args []string, listen string) *wardenProc {
	tb.Helper()
	w := &wardenProc{cmd: exec.Command(bin, args...), log: &syncBuffer{}, url: "http://" + listen}
	w.cmd.Env = append(os.Environ(), "WARDEN_OPERATOR_TOKEN=op-token", "WARDEN_CALLBACK_TOKEN=cb-token")
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	require.NoError(tb, w.cmd.Start())
	tb.Cleanup(w.kill)
	require.Eventually(tb, func() bool {
		resp, err := http.Get(w.url + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "warden ready: %s", w.log)
	return w
}

// kill is SIGKILL to warden and its drivers; it waits for warden.
func (w *wardenProc) kill() {
	if w.cmd.ProcessState == nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		_ = w.cmd.Wait()
	}
}

// api is one operator call: its decoded answer.
func (w *wardenProc) api(method, path string, body any) map[string]any {
	_, v, _ := testkit.Do(http.DefaultClient, w.url, method, path, "op-token", body, "")
	return v
}
