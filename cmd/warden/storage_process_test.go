package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The real binary on real filesystems that fill, go read-only and rot
// (docs/rules/storage.md S2-S4, S7, S11). Mounting needs root, as CI has;
// elsewhere these tests say they skipped.

// mountTmpfs mounts a tmpfs of size MiB at a new directory, or skips.
func mountTmpfs(t *testing.T, mib int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("S11: mounting a small filesystem needs root (CI runs as root); skipped here")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0700", mib), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("S11: cannot mount a tmpfs here (%v: %s); skipped", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

func remount(t *testing.T, dir, how string) {
	t.Helper()
	out, err := exec.Command("mount", "-o", "remount,"+how, dir).CombinedOutput()
	require.NoError(t, err, "remount %s: %s", how, out)
}

// startUnready starts warden without waiting for /readyz: it may start
// read-only (S4) or refuse to start (S7).
func startUnready(t *testing.T, dataDir, addr string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--listen", addr, "--data", dataDir}, extra...)
	cmd := exec.Command(wardenBinary(t), args...)
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN=cb-secret", "WARDEN_OPERATOR_TOKEN=op-secret", "WARDEN_GITHUB_TOKEN=gh-secret")
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &proc{t: t, cmd: cmd, url: "http://" + addr, log: log}
}

// exitStatus waits for the process to exit and returns its status.
func (p *proc) exitStatus(within time.Duration) int {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(p.t, err)
		return 0
	case <-time.After(within):
		p.t.Fatalf("warden did not exit within %s (S3: it never hangs):\n%s", within, p.log)
		return -1
	}
}

func (p *proc) healthy() bool {
	resp, err := http.Get(p.url + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func errorOf(v map[string]any) (code, message string) {
	e, _ := v["error"].(map[string]any)
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return
}

// fill writes a file until the filesystem is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	for {
		if _, err := f.Write(chunk[:4096]); err != nil {
			return path
		}
	}
}

func TestI15S2S3S9S11AFullDiskFailsFastVisiblyAndLosesNothing(t *testing.T) {
	mnt := mountTmpfs(t, 48)
	gh := acceptingGitHub(t)
	data := filepath.Join(mnt, "data")
	addr := freePort(t)
	flags := []string{"--dispatch", "github", "--github-api-url", gh.URL, "--github-repo", "acme/infra",
		"--bootstrap", "exec", "--bootstrap-command", okScript(t), "--pool", "default=100",
		// The 48 MiB disk is far below the default reserve (S9).
		"--storage-reserve", "4MiB"}
	p := startProc(t, data, addr, flags...)
	const marquees = 20
	for i := range marquees {
		st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": fmt.Sprintf("m-%d", i), "kind": "tutorial"})
		require.Equal(t, http.StatusCreated, st, "%v", v)
	}
	for i := range marquees {
		require.Eventually(t, func() bool {
			_, v := p.do("GET", fmt.Sprintf("/v1/marquees/m-%d", i), "op-secret", nil)
			return v["generation"] == 1.0
		}, 10*time.Second, 10*time.Millisecond)
	}

	filler := fill(t, mnt)
	// S9: below the reserve, new work is refused with 507...
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "new", "kind": "tutorial"})
	require.Equal(t, http.StatusInsufficientStorage, st, "%v", v)
	code, _ := errorOf(v)
	require.Equal(t, "storage_low", code)

	// ...while the lifecycles under way go on until the disk is full.
	acked := map[string]string{} // delivery -> marquee
	var refused string
	var took time.Duration
	var msg string
	for i := 0; i < 50000 && refused == ""; i++ {
		id, delivery := fmt.Sprintf("m-%d", i%marquees), fmt.Sprintf("d-%d", i)
		start := time.Now()
		st, v := p.callback(id, delivery)
		switch st {
		case http.StatusOK:
			acked[delivery] = id
		default:
			took, refused = time.Since(start), delivery
			require.Equal(t, http.StatusServiceUnavailable, st, "%v", v)
			code, msg = errorOf(v)
		}
	}
	require.NotEmpty(t, refused, "the disk never filled")
	t.Logf("the first refused write was answered in %s, after %d acknowledged callbacks", took, len(acked))
	require.Equal(t, "storage_unavailable", code)
	require.Contains(t, msg, "disk full")
	require.Less(t, took, 5*time.Second, "answered at once, not after the ask timeout (S2)")
	st, v = p.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, st, "not ready while the store is sealed")
	code, msg = errorOf(v)
	require.Equal(t, "storage_unavailable", code)
	require.Contains(t, msg, "disk full")

	require.Equal(t, exitStorage, p.exitStatus(30*time.Second), "S3: the documented status:\n%s", p.log)
	log := p.log.String()
	require.Equal(t, 1, strings.Count(log, "storage failed: the store is sealed"), "one ERROR line (S2)")
	require.NotContains(t, log, "goroutine ", "no panic trace")

	// Space back: a restart has every acknowledged write and no refused one.
	require.NoError(t, os.Remove(filler))
	p = startProc(t, data, addr, flags...)
	found := map[string]bool{}
	for i := range marquees {
		_, h := p.do("GET", fmt.Sprintf("/v1/marquees/m-%d/history?limit=200", i), "op-secret", nil)
		items, _ := h["items"].([]any)
		for _, it := range items {
			if d, _ := it.(map[string]any)["delivery_id"].(string); d != "" {
				found[d] = true
			}
		}
	}
	for d, id := range acked {
		require.True(t, found[d], "I15: acknowledged delivery %s of %s is there", d, id)
	}
	require.False(t, found[refused], "the refused delivery %s was never written", refused)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.exitStatus(30*time.Second), p.log.String())
	require.Contains(t, p.log.String(), "store_closed=true")
}

// callback sends a current-generation step with a delivery id.
func (p *proc) callback(id, delivery string) (int, map[string]any) {
	p.t.Helper()
	body := fmt.Sprintf(`{"marquee_id":%q,"verb":"step","generation":1,"step":"vm_starting"}`, id)
	req, _ := http.NewRequest("POST", p.url+"/v1/webhooks/terraform", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer cb-secret")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Id", delivery)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestS4S11AReadOnlyFilesystemStartsDegradedAndSwitchesBack(t *testing.T) {
	t.Parallel() // mostly waits on processes and timers: overlapped with the other long waits (make test)
	mnt := mountTmpfs(t, 64)
	data := filepath.Join(mnt, "data")
	addr := freePort(t)
	flags := []string{"--dispatch", "exec", "--dispatch-command", okScript(t), "--storage-reserve", "1MiB"}
	p := startProc(t, data, addr, flags...)
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, http.StatusCreated, st, "%v", v)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.exitStatus(30*time.Second), p.log.String())

	remount(t, mnt, "ro")
	p = startUnready(t, data, addr, flags...)
	require.Eventually(t, p.healthy, 20*time.Second, 20*time.Millisecond, "%s", p.log)
	require.Eventually(t, func() bool {
		st, _ := p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
		return st == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "reads are served read-only: %s", p.log)
	st, v = p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-2", "kind": "tutorial"})
	require.Equal(t, http.StatusServiceUnavailable, st)
	code, msg := errorOf(v)
	require.Equal(t, "storage_unavailable", code)
	require.Contains(t, msg, "read-only filesystem")
	st, v = p.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, st)
	_, msg = errorOf(v)
	require.Contains(t, msg, "read-only")

	remount(t, mnt, "rw")
	require.Eventually(t, func() bool {
		st, _ := p.do("GET", "/readyz", "", nil)
		return st == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "writable again without a restart (S4): %s", p.log)
	st, v = p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-2", "kind": "tutorial"})
	require.Equal(t, http.StatusCreated, st, "%v", v)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.exitStatus(30*time.Second), p.log.String())
}

func TestS7AWALDamagedInTheMiddleRefusesToStart(t *testing.T) {
	gh := acceptingGitHub(t)
	data := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	flags := []string{"--dispatch", "github", "--github-api-url", gh.URL, "--github-repo", "acme/infra", "--pool", "default=1000"}
	p := startProc(t, data, addr, flags...)
	for i := range 240 {
		st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": fmt.Sprintf("m-%d", i), "kind": "tutorial"})
		require.Equal(t, http.StatusCreated, st, "%v", v)
	}
	// Killed, not stopped: a clean stop flushes the memtables, and its log
	// would hold nothing to damage.
	require.NoError(t, p.cmd.Process.Kill())
	_ = p.cmd.Wait()

	// The WAL that holds the creates: the largest (a busy machine's
	// Pebble may have rotated to a new, still empty one before the kill).
	logs, _ := filepath.Glob(filepath.Join(data, "*.log"))
	require.NotEmpty(t, logs)
	var wal string
	var b []byte
	for _, l := range logs {
		c, err := os.ReadFile(l)
		require.NoError(t, err)
		if len(c) > len(b) {
			wal, b = l, c
		}
	}
	require.NotEmpty(t, b, "a WAL holds the creates: %v", logs)
	for i := range 16 {
		b[len(b)/2+i] ^= 0xff
	}
	require.NoError(t, os.WriteFile(wal, b, 0o600))

	p = startUnready(t, data, addr, flags...)
	require.Equal(t, exitCorrupt, p.exitStatus(30*time.Second), p.log.String())
	out := p.log.String()
	for _, want := range []string{filepath.Base(wal), "warden verify", "--accept-data-loss"} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "goroutine ", "no panic trace")

	p = startProc(t, data, addr, append(flags, "--accept-data-loss")...)
	require.Contains(t, p.log.String(), "data loss accepted")
	st, v := p.do("GET", "/v1/marquees/m-0", "op-secret", nil)
	require.Equal(t, http.StatusOK, st, "what precedes the damage is kept: %v", v)
}
