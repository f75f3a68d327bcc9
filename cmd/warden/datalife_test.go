package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// runCLI runs one warden command in this process, as a user would type it.
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut strings.Builder
	getenv := func(k string) string {
		if k == "WARDEN_OPERATOR_TOKEN" {
			return "op-secret"
		}
		return ""
	}
	code := run(args, getenv, &out, &errOut)
	return code, out.String() + errOut.String()
}

// load sends step callbacks to the marquees, each with a delivery id of
// its own, until stop, and records each one answered applied.
type load struct {
	mu      sync.Mutex
	applied map[string][]string // marquee -> deliveries answered applied
	sent    atomic.Int64
}

func (l *load) run(p *proc, ids []string, stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		id := ids[n%len(ids)]
		delivery := fmt.Sprintf("load-%s-%d", id, n)
		st, v := p.callback(id, delivery)
		l.sent.Add(1)
		if st == 200 && v["result"] == "applied" {
			l.mu.Lock()
			l.applied[id] = append(l.applied[id], delivery)
			l.mu.Unlock()
		}
	}
}

func (l *load) snapshot() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for k, v := range l.applied {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// TestD4D5D6D7D9TheDataMovesAndVerifies: a warden under load is backed up
// while it serves (D4); the backup, restored into a new data directory
// (D5), passes warden verify (D6) and serves every callback acknowledged
// before the backup was asked for; the restored store is migrated to a
// three-member etcd cluster, verified there, rekeyed there (D9), served by
// a cluster node, and migrated back to Pebble (D7).
func TestD4D5D6D7D9TheDataMovesAndVerifies(t *testing.T) {
	t.Parallel() // mostly waits on processes and timers: overlapped with the other long waits (make test)
	ok := okScript(t)
	// The first warden's dispatch of m-slow never returns while it runs:
	// its attempt is in flight (dispatch pending) when the backup is taken.
	slow := filepath.Join(t.TempDir(), "slow.sh")
	require.NoError(t, os.WriteFile(slow, []byte("#!/bin/sh\nin=$(cat)\ncase \"$in\" in *m-slow*) sleep 20;; esac\necho '{\"ok\":true}'\n"), 0o755))
	flagsWith := func(dispatch string) []string {
		return []string{"--dispatch", "exec", "--dispatch-command", dispatch, "--bootstrap", "exec", "--bootstrap-command", ok, "--pool", "default=2"}
	}
	flags := flagsWith(ok)
	previewDir := t.TempDir()
	previewBin := previewDriver(t, previewDir)
	envFlags := append(append([]string(nil), flags...), "--env-driver-command", previewBin, "--driver-env", "WARDEN_PREVIEW_DIR")
	env := []string{"WARDEN_PREVIEW_DIR=" + previewDir}

	dir := filepath.Join(t.TempDir(), "data")
	p := startProcEnv(t, dir, freePort(t), env, append(flagsWith(slow), envFlags[len(flags):]...)...)
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-slow", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/marquees/m-slow", "op-secret", nil)
		a, _ := v["attempt"].(map[string]any)
		return a != nil && a["dispatch"] == "pending"
	}, 10*time.Second, 10*time.Millisecond, "m-slow's dispatch is in flight")
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("m-%d", i)
		st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": id, "kind": "tutorial"})
		require.Equal(t, 201, st, "%v", v)
		ids = append(ids, id)
	}
	// One marquee provisioned with its connection: sealed secrets in the
	// store, whose key id the backup must name.
	p.waitDispatched("m-0", 10*time.Second)
	st, v = p.do("POST", "/v1/webhooks/terraform", "cb-secret", deployedCallback("m-0", "-----BEGIN OPENSSH PRIVATE KEY-----x"))
	require.Equal(t, 200, st, "%v", v)
	require.Equal(t, "applied", v["result"], "%v", v)
	st, _ = p.do("POST", "/v1/environments", "op-secret", map[string]any{"id": "pr-1-aaaaaaa", "branch": "feature-a", "revision": "aaaaaaa"})
	require.Equal(t, 201, st)
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/environments/pr-1-aaaaaaa", "op-secret", nil)
		return v["state"] == "ready"
	}, 60*time.Second, 50*time.Millisecond, "the preview is ready")

	l := &load{applied: map[string][]string{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go l.run(p, ids[1:], stop, &wg)
	}
	require.Eventually(t, func() bool { return l.sent.Load() > 100 }, 20*time.Second, 10*time.Millisecond)
	before := l.snapshot() // acknowledged before the backup is asked for
	backup := filepath.Join(t.TempDir(), "backup")
	code, msg := runCLI(t, "backup", "--to", backup, "--server", p.url)
	sentDuring := l.sent.Load()
	require.Equal(t, 0, code, msg)
	_, slowAfter := p.do("GET", "/v1/marquees/m-slow", "op-secret", nil)
	require.Equal(t, "pending", slowAfter["attempt"].(map[string]any)["dispatch"], "the backup was taken with m-slow's dispatch in flight")
	require.Contains(t, msg, "13 marquees, 1 environments")
	require.Contains(t, msg, "seal key ids needed:")
	require.Eventually(t, func() bool { return l.sent.Load() > sentDuring+50 }, 20*time.Second, 10*time.Millisecond, "warden kept serving")
	close(stop)
	wg.Wait()
	manifest, err := os.ReadFile(filepath.Join(backup, manifestName))
	require.NoError(t, err)
	require.NotContains(t, string(manifest), "whsec_", "D4: the backup names key ids, never keys")
	seal, err := os.ReadFile(filepath.Join(dir, sealKeyName))
	require.NoError(t, err)
	for _, line := range strings.Split(string(seal), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			require.NotContains(t, string(manifest), f[1], "D4: no key material in the manifest")
		}
	}

	// D6 live, on the running warden.
	code, msg = runCLI(t, "verify", "--live", "--server", p.url)
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, "ok: no problem found")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait(), p.log.String())

	// D5: a tampered backup is refused; the intact one restores.
	restored := filepath.Join(t.TempDir(), "restored")
	code, msg = runCLI(t, "restore", "--from", backup, "--data", restored)
	require.NotEqual(t, 0, code)
	require.Contains(t, msg, "sealed under key id", "D5: without the keyring the backup needs, refused by key id")
	require.NoError(t, os.MkdirAll(restored, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(restored, sealKeyName), seal, 0o600))
	tampered := filepath.Join(t.TempDir(), "tampered")
	require.NoError(t, os.CopyFS(tampered, os.DirFS(backup)))
	victim := firstFile(t, filepath.Join(tampered, backupStoreDir), ".sst", "MANIFEST-")
	require.NoError(t, os.WriteFile(victim, []byte("not what was backed up"), 0o600))
	code, msg = runCLI(t, "restore", "--from", tampered, "--data", restored)
	require.NotEqual(t, 0, code)
	require.Contains(t, msg, "SHA-256", "D5: a backup that does not match its manifest is refused")
	code, msg = runCLI(t, "restore", "--from", backup, "--data", restored)
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, "restored 13 marquees and 1 environments")
	code, msg = runCLI(t, "verify", "--data", restored, "--pool", "default=2")
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, "ok: no problem found")

	p2 := startProcEnv(t, restored, freePort(t), env, envFlags...)
	checkApplied(t, p2, before)
	// D5: nothing is assumed from the backup's moment: the dispatch in
	// flight then is reconciled as after a crash (superseded by a new
	// generation, or observed), and sent.
	p2.waitDispatched("m-slow", 20*time.Second) // the restored warden reconciled it
	_, pool := p2.do("GET", "/v1/pools/default", "op-secret", nil)
	require.LessOrEqual(t, len(pool["reserved"].([]any)), 2, "I7 after the restore")
	_, e := p2.do("GET", "/v1/environments/pr-1-aaaaaaa", "op-secret", nil)
	require.Equal(t, "ready", e["state"])
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p2.cmd.Wait(), p2.log.String())

	// D7: to a three-member etcd cluster and back.
	urls := startEtcd(t, 3)
	target := "etcd:" + strings.Join(urls, ",")
	code, msg = runCLI(t, "migrate", "--from", "pebble:"+restored, "--to", target, "--data", restored, "--pool", "default=2")
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, "13 marquees, 1 environments, 1 pools")
	require.Contains(t, msg, "both verify")
	code, msg = runCLI(t, "migrate", "--from", "pebble:"+restored, "--to", target, "--data", restored)
	require.NotEqual(t, 0, code)
	require.Contains(t, msg, "migrate only into an empty store", "D7: a target that is not empty is refused")

	// D9: rekey the cluster's store with every node stopped.
	shared := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(shared, sealKeyName), seal, 0o600))
	code, msg = runCLI(t, "rekey", "--etcd-endpoints", strings.Join(urls, ","), "--seal-key-file", filepath.Join(shared, sealKeyName))
	require.Equal(t, 0, code, msg)
	require.Regexp(t, `[1-9]\d* records resealed`, msg)

	// A node serves the migrated store; while it does, migrating from it
	// is refused.
	var kg strings.Builder
	require.NoError(t, keygen([]string{shared}, &kg))
	data := t.TempDir()
	nodeArgs := append(append([]string(nil), flags...), "--node", "n1", "--etcd-endpoints", strings.Join(urls, ","),
		"--cluster-token-file", filepath.Join(shared, "cluster.token"), "--seal-key-file", filepath.Join(shared, sealKeyName),
		"--callback-signing-key-file", filepath.Join(shared, "callback-signing.key"), "--env-driver-command", previewBin, "--driver-env", "WARDEN_PREVIEW_DIR")
	n1 := startProcEnv(t, data, freePort(t), env, nodeArgs...)
	require.Eventually(t, func() bool {
		st, v := n1.do("GET", "/v1/marquees/m-1", "op-secret", nil)
		return st == 200 && v["id"] == "m-1"
	}, 20*time.Second, 50*time.Millisecond, "the cluster node serves the migrated marquees")
	checkApplied(t, n1, before)
	back := filepath.Join(t.TempDir(), "back")
	code, msg = runCLI(t, "migrate", "--from", target, "--to", "pebble:"+back, "--seal-key-file", filepath.Join(shared, sealKeyName))
	require.NotEqual(t, 0, code)
	require.Contains(t, msg, "is serving a cluster", "D7: a source that is serving is refused")
	require.NoError(t, n1.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, n1.cmd.Wait(), n1.log.String())

	require.Eventually(t, func() bool {
		code, msg = runCLI(t, "migrate", "--from", target, "--to", "pebble:"+back, "--seal-key-file", filepath.Join(shared, sealKeyName))
		return code == 0
	}, 30*time.Second, 500*time.Millisecond, "once the node's leases are gone, the store migrates back: %s", msg)
	require.Contains(t, msg, "13 marquees, 1 environments")
	code, msg = runCLI(t, "verify", "--data", back, "--seal-key-file", filepath.Join(shared, sealKeyName))
	require.Equal(t, 0, code, msg)
}

// checkApplied: every callback answered applied is in its marquee's
// history (I5), on whichever store now serves it.
func checkApplied(t *testing.T, p *proc, applied map[string][]string) {
	t.Helper()
	total := 0
	for id, deliveries := range applied {
		_, hist := p.do("GET", fmt.Sprintf("/v1/marquees/%s/history?limit=%d", id, testkit.HistoryPage), "op-secret", nil)
		n, err := testkit.AppliedFound(id, hist, deliveries)
		require.NoError(t, err)
		total += n
	}
	require.Positive(t, total, "some callbacks were acknowledged before the backup")
}

func firstFile(t *testing.T, dir string, prefixes ...string) string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		for _, p := range prefixes {
			if strings.HasSuffix(e.Name(), p) || strings.HasPrefix(e.Name(), p) {
				return filepath.Join(dir, e.Name())
			}
		}
	}
	t.Fatalf("no %v in %s", prefixes, dir)
	return ""
}

// startEtcd starts an n-member etcd cluster in this process and returns
// its client URLs.
func startEtcd(t *testing.T, n int) []string {
	var peers, clients, names []string
	for i := range n {
		names = append(names, fmt.Sprintf("e%d", i+1))
		peers = append(peers, "http://"+freePort(t))
		clients = append(clients, "http://"+freePort(t))
	}
	var initial []string
	for i := range n {
		initial = append(initial, names[i]+"="+peers[i])
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := etcdembed.Start(etcdembed.Config{Name: names[i], Dir: filepath.Join(t.TempDir(), "etcd"), PeerURL: peers[i],
				ClientURL: clients[i], InitialCluster: strings.Join(initial, ","), StartTimeout: 30 * time.Second})
			errs[i] = err
			if err == nil {
				t.Cleanup(m.Close)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	return clients
}
