package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// What warden acknowledged, it can prove (findings made from outside, each a
// test): no silent loss, no refused operation that changes things, no
// ready-then-500.

// createMarquees creates n tutorial marquees and returns their ids.
func createMarquees(t *testing.T, p *proc, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": id, "kind": "tutorial"})
		require.Equal(t, http.StatusCreated, st, "%v", v)
		ids = append(ids, id)
	}
	return ids
}

func githubFlags(t *testing.T) []string {
	return []string{"--dispatch", "github", "--github-api-url", acceptingGitHub(t).URL, "--github-repo", "acme/infra", "--pool", "default=1000"}
}

// TestS12ACleanlyStoppedWardenWithItsLogCutIsRefused: the finding,
// reproduced. Twenty marquees, warden stopped with SIGTERM, the newest log
// cut by a few bytes, to half, or deleted: warden refuses to start with 65
// and verify with 65, naming the log and how many acknowledged commits are
// missing (it said "ok" with 9 of 20); --accept-data-loss starts it with an
// audit entry listing what was dropped.
func TestS12ACleanlyStoppedWardenWithItsLogCutIsRefused(t *testing.T) {
	for _, cut := range []string{"a few bytes", "to half", "deleted"} {
		t.Run(cut, func(t *testing.T) {
			data, addr, flags := filepath.Join(t.TempDir(), "data"), freePort(t), githubFlags(t)
			p := startProc(t, data, addr, flags...)
			createMarquees(t, p, "m", 20)
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, p.exitStatus(30*time.Second), p.log.String())
			logs, _ := filepath.Glob(filepath.Join(data, "*.log"))
			require.NotEmpty(t, logs)
			wal := logs[len(logs)-1]
			cutWAL(t, wal, cut)
			p = startUnready(t, data, addr, flags...)
			require.Equal(t, exitCorrupt, p.exitStatus(30*time.Second), p.log.String())
			for _, want := range []string{"acknowledged commit", filepath.Base(wal), "--accept-data-loss"} {
				require.Contains(t, p.log.String(), want)
			}
			code, msg := runCLI(t, "verify", "--data", data, "--pool", "default=1000")
			require.Equal(t, exitCorrupt, code, msg)
			require.Contains(t, msg, filepath.Base(wal))
			p = startProc(t, data, addr, append(flags, "--accept-data-loss")...)
			require.Contains(t, p.log.String(), "data loss accepted")
			require.Contains(t, p.log.String(), "commits_missing")
		})
	}
}

func cutWAL(t *testing.T, wal, how string) {
	t.Helper()
	st, err := os.Stat(wal)
	require.NoError(t, err)
	switch how {
	case "to half":
		require.NoError(t, os.Truncate(wal, st.Size()/2))
	case "a few bytes":
		require.NoError(t, os.Truncate(wal, max(0, st.Size()-37)))
	default:
		require.NoError(t, os.Remove(wal))
	}
}

// TestS12AKilledUnderLoadThenCutIsRefused: warden creates marquees under
// load and is killed -9. With no cut, every acknowledged marquee is there
// after the restart. With the load over for longer than the mark's
// interval before the kill (so that the cut loses more than the interval's
// worth), its newest log cut by a few bytes, to half, or deleted: it
// refuses to start with 65, naming how many acknowledged commits are
// missing, the log that held them and the ways out; verify says the same;
// --accept-data-loss starts it with an audit entry.
func TestS12AKilledUnderLoadThenCutIsRefused(t *testing.T) {
	t.Parallel() // mostly waits on processes and timers: overlapped with the other long waits (make test)
	for _, cut := range []string{"none", "a few bytes", "to half", "deleted"} {
		t.Run(cut, func(t *testing.T) {
			data, addr, flags := filepath.Join(t.TempDir(), "data"), freePort(t), githubFlags(t)
			p := startProc(t, data, addr, flags...)
			var mu sync.Mutex
			var acked []string
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						id := fmt.Sprintf("w%d-%d", w, i)
						if st, _ := p.tryDo("POST", "/v1/marquees", map[string]any{"id": id, "kind": "tutorial"}); st == http.StatusCreated {
							mu.Lock()
							acked = append(acked, id)
							mu.Unlock()
						}
					}
				})
			}
			time.Sleep(2500 * time.Millisecond)
			if cut != "none" {
				close(stop)
				wg.Wait()
				time.Sleep(1500 * time.Millisecond) // the mark reaches the last commit
			}
			require.NoError(t, p.cmd.Process.Kill())
			if cut == "none" {
				close(stop)
				wg.Wait()
			}
			_ = p.cmd.Wait()
			require.NotEmpty(t, acked)
			if cut == "none" {
				p = startProc(t, data, addr, flags...)
				for _, id := range acked {
					st, _ := p.do("GET", "/v1/marquees/"+id, "op-secret", nil)
					require.Equal(t, http.StatusOK, st, "acknowledged before the kill: %s", id)
				}
				return
			}
			logs, _ := filepath.Glob(filepath.Join(data, "*.log"))
			require.NotEmpty(t, logs)
			cutWAL(t, logs[len(logs)-1], cut)

			p = startUnready(t, data, addr, flags...)
			require.Equal(t, exitCorrupt, p.exitStatus(30*time.Second), p.log.String())
			for _, want := range []string{"acknowledged commit", filepath.Base(logs[len(logs)-1]), "--accept-data-loss", "warden restore"} {
				require.Contains(t, p.log.String(), want)
			}
			require.NotContains(t, p.log.String(), "goroutine ", "no panic trace")
			code, msg := runCLI(t, "verify", "--data", data)
			require.Equal(t, exitCorrupt, code, msg)
			require.Contains(t, msg, "acknowledged commit")

			p = startProc(t, data, addr, append(flags, "--accept-data-loss")...)
			require.Contains(t, p.log.String(), "data loss accepted")
			require.Contains(t, p.log.String(), "commits_missing")
		})
	}
}

// TestS7AStoreMissingAFileExits65: an sstable, the manifest or the
// options file gone: warden refuses to start with 65 (a damaged store,
// not restarted by its unit) naming the file, and verify says the same.
func TestS7AStoreMissingAFileExits65(t *testing.T) {
	for _, prefix := range []string{".sst", "MANIFEST-", "OPTIONS-"} {
		t.Run(prefix, func(t *testing.T) {
			data, addr, flags := filepath.Join(t.TempDir(), "data"), freePort(t), githubFlags(t)
			p := startProc(t, data, addr, flags...)
			createMarquees(t, p, "m", 10)
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, p.exitStatus(30*time.Second), p.log.String())
			st, err := persistence.Open(data, persistence.Options{})
			require.NoError(t, err)
			require.NoError(t, st.Flush()) // its records in an sstable, as a long-running store's are
			require.NoError(t, st.Close())
			victim := firstFile(t, data, prefix)
			if prefix == "MANIFEST-" { // the current one, which the marker names
				marker := firstFile(t, data, "marker.manifest.")
				victim = filepath.Join(data, filepath.Ext(marker)[1:])
			}
			require.NoError(t, os.Remove(victim))
			name := filepath.Base(victim)
			if prefix == "OPTIONS-" {
				name = "OPTIONS-"
			}
			p = startUnready(t, data, addr, flags...)
			require.Equal(t, exitCorrupt, p.exitStatus(30*time.Second), p.log.String())
			require.Contains(t, p.log.String(), name)
			code, msg := runCLI(t, "verify", "--data", data)
			require.Equal(t, exitCorrupt, code, msg)
			require.Contains(t, msg, name)
		})
	}
}

// TestD12T10ServeRefusesAKeyringThatCannotOpenTheStore: the store holds a
// secret sealed under one key; warden started with another keyring exits
// 65 before it is ready, naming the key id it lacks, instead of answering
// ready and then 500 for the marquee.
func TestD12T10ServeRefusesAKeyringThatCannotOpenTheStore(t *testing.T) {
	data, addr := filepath.Join(t.TempDir(), "data"), freePort(t)
	ok := okScript(t)
	flags := []string{"--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok}
	p := startProc(t, data, addr, flags...)
	createMarquees(t, p, "m", 1)
	p.waitDispatched("m-0", 10*time.Second)
	st, v := p.do("POST", "/v1/webhooks/terraform", "cb-secret", deployedCallback("m-0", "-----BEGIN OPENSSH PRIVATE KEY-----x"))
	require.Equal(t, 200, st, "%v", v)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.exitStatus(30*time.Second), p.log.String())
	old := loadRing(t, filepath.Join(data, sealKeyName)).Active().ID

	other := filepath.Join(t.TempDir(), "other.key")
	_, _, err := trust.LoadOrCreateKeyring(other, "another seal key")
	require.NoError(t, err)
	p = startUnready(t, data, addr, append(flags, "--seal-key-file", other)...)
	require.Equal(t, exitCorrupt, p.exitStatus(30*time.Second), p.log.String())
	require.Contains(t, p.log.String(), old, "the key id the store needs is named")
	require.Contains(t, p.log.String(), other)
	require.NotContains(t, p.log.String(), `msg=ready`, "never ready")
}

// hashTree is every file under dir (absent: none) by its relative path
// and SHA-256.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	require.NoError(t, err)
	return out
}

// TestD11RefusedOfflineCommandsChangeNothing: every offline command that
// refuses, refuses before it writes: the data directory, its keyrings and
// the targets are byte for byte as they were (hashed before and after).
func TestD11RefusedOfflineCommandsChangeNothing(t *testing.T) {
	data, addr, flags := filepath.Join(t.TempDir(), "data"), freePort(t), githubFlags(t)
	p := startProc(t, data, addr, flags...)
	createMarquees(t, p, "m", 3)
	backup := filepath.Join(t.TempDir(), "backup")
	code, msg := runCLI(t, "backup", "--to", backup, "--server", p.url)
	require.Equal(t, 0, code, msg)
	time.Sleep(1500 * time.Millisecond) // the mark catches up; then nothing writes
	// A stopped store that does not verify: a malformed record planted.
	bad := filepath.Join(t.TempDir(), "bad")
	st, err := persistence.Open(bad, persistence.Options{})
	require.NoError(t, err)
	b := st.NewBatch()
	b.Set(persistence.MarqueeKey("broken"), []byte("\x01{not json"))
	require.NoError(t, b.Commit())
	require.NoError(t, st.Close())

	target := filepath.Join(t.TempDir(), "target")
	fresh := filepath.Join(t.TempDir(), "fresh")
	damaged := filepath.Join(t.TempDir(), "damaged")
	require.NoError(t, os.CopyFS(damaged, os.DirFS(backup)))
	require.NoError(t, os.WriteFile(firstFile(t, filepath.Join(damaged, backupStoreDir), "MANIFEST-"), []byte("altered"), 0o600))
	for _, c := range []struct {
		name string
		args []string
	}{
		{"rekey while warden serves", []string{"rekey", "--data", data}},
		{"keygen --rotate while warden serves", []string{"keygen", data, "--node", "n1", "--rotate"}},
		{"restore into a served data directory", []string{"restore", "--from", backup, "--data", data}},
		{"restore of a damaged backup", []string{"restore", "--from", damaged, "--data", fresh}},
		{"migrate from a served store", []string{"migrate", "--from", "pebble:" + data, "--to", "pebble:" + target, "--data", data}},
		{"migrate from a store that does not verify", []string{"migrate", "--from", "pebble:" + bad, "--to", "pebble:" + target}},
		{"verify while warden serves", []string{"verify", "--data", data}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := []map[string]string{hashTree(t, data), hashTree(t, bad), hashTree(t, target), hashTree(t, fresh), hashTree(t, backup)}
			code, msg := runCLI(t, c.args...)
			require.NotEqual(t, 0, code, "refused: %s", msg)
			after := []map[string]string{hashTree(t, data), hashTree(t, bad), hashTree(t, target), hashTree(t, fresh), hashTree(t, backup)}
			require.Equal(t, before, after, "a refused %s changes nothing: %s", c.args[0], msg)
			_, err := os.Stat(target)
			require.True(t, os.IsNotExist(err), "no target was made")
		})
	}
}

// TestD5D11RestoreCountsWhatItRestored: a backup whose log was cut in half
// and whose manifest was rewritten to match is consistent but short:
// verify --backup and restore both refuse it (its store counts fewer
// records than its manifest says), nothing written; the intact backup
// passes verify --backup, and restore reports what it counted in the
// restored store. verify of a directory that does not exist says so.
func TestD5D11RestoreCountsWhatItRestored(t *testing.T) {
	data, addr, flags := filepath.Join(t.TempDir(), "data"), freePort(t), githubFlags(t)
	p := startProc(t, data, addr, flags...)
	createMarquees(t, p, "m", 60)
	backup := filepath.Join(t.TempDir(), "backup")
	code, msg := runCLI(t, "backup", "--to", backup, "--server", p.url)
	require.Equal(t, 0, code, msg)
	code, msg = runCLI(t, "verify", "--backup", backup, "--data", data, "--pool", "default=1000")
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, "60 marquees")

	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.CopyFS(short, os.DirFS(backup)))
	logs, _ := filepath.Glob(filepath.Join(short, backupStoreDir, "*.log"))
	require.NotEmpty(t, logs, "the checkpoint holds its flushed log")
	wal := logs[len(logs)-1]
	cutWAL(t, wal, "to half")
	rewriteManifest(t, short, wal)
	code, msg = runCLI(t, "verify", "--backup", short, "--data", data)
	require.NotEqual(t, 0, code, msg)
	require.Contains(t, msg, "its manifest says")
	restored := filepath.Join(t.TempDir(), "restored")
	require.NoError(t, os.MkdirAll(restored, 0o700))
	seal, err := os.ReadFile(filepath.Join(data, sealKeyName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(restored, sealKeyName), seal, 0o600))
	before := hashTree(t, restored)
	code, msg = runCLI(t, "restore", "--from", short, "--data", restored)
	require.NotEqual(t, 0, code, msg)
	require.Contains(t, msg, "its manifest says")
	require.Equal(t, before, hashTree(t, restored), "nothing written")

	code, msg = runCLI(t, "restore", "--from", backup, "--data", restored)
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, "restored 60 marquees and 0 environments, counted in the restored store")

	code, msg = runCLI(t, "verify", "--data", filepath.Join(t.TempDir(), "nonexistent"))
	require.NotEqual(t, 0, code)
	require.Contains(t, msg, "no data directory at")
	require.NotContains(t, msg, "serving")
}

// rewriteManifest makes a backup's manifest say what file now is.
func rewriteManifest(t *testing.T, dir, file string) {
	t.Helper()
	path := filepath.Join(dir, manifestName)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var m manifest
	require.NoError(t, json.Unmarshal(raw, &m))
	rel, _ := filepath.Rel(dir, file)
	sum, size, err := digestFile(file)
	require.NoError(t, err)
	found := false
	for i := range m.Files {
		if m.Files[i].Name == filepath.ToSlash(rel) {
			m.Files[i].Size, m.Files[i].SHA256, found = size, sum, true
		}
	}
	require.True(t, found, "the manifest lists %s", rel)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, out, 0o600))
}

// TestS13ADescriptorsAreReservedForTheStore: warden under `ulimit -n 64`
// and 200 connections at once, twenty times: it never crashes, every
// connection is answered (201) or refused with 503 overloaded and
// Retry-After, and every acknowledged create is there afterwards. The
// start says the limit and how it was split.
func TestS13ADescriptorsAreReservedForTheStore(t *testing.T) {
	data, addr := filepath.Join(t.TempDir(), "data"), freePort(t)
	gh := acceptingGitHub(t)
	flags := []string{"--dispatch", "github", "--github-api-url", gh.URL, "--github-repo", "acme/infra", "--pool", "default=1000"}
	var acked []string
	for run := range 20 {
		p := startLimited(t, 64, data, addr, flags...)
		if run == 0 {
			require.Contains(t, p.log.String(), "file descriptors")
			require.Contains(t, p.log.String(), "limit=64")
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		refused := 0
		for i := range 200 {
			wg.Go(func() {
				id := fmt.Sprintf("r%d-%d", run, i)
				st, h := p.createOnce(id)
				mu.Lock()
				defer mu.Unlock()
				switch st {
				case http.StatusCreated:
					acked = append(acked, id)
				case http.StatusServiceUnavailable:
					require.NotEmpty(t, h.Get("Retry-After"), "a refusal says when to come back")
					refused++
				default:
					t.Errorf("run %d, %s: answered %d", run, id, st)
				}
			})
		}
		wg.Wait()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.Equal(t, 0, p.exitStatus(30*time.Second), "run %d: %s", run, p.log.String())
		for _, bad := range []string{"panic", "fatal error", "goroutine "} {
			require.NotContains(t, p.log.String(), bad, "run %d", run)
		}
		t.Logf("run %d: %d created so far, %d refused with 503", run, len(acked), refused)
	}
	p := startProc(t, data, addr, flags...)
	for _, id := range acked {
		st, _ := p.do("GET", "/v1/marquees/"+id, "op-secret", nil)
		require.Equal(t, http.StatusOK, st, "acknowledged: %s", id)
	}
}

// TestS13DriverProcessesLeaveTheStoreItsDescriptors: under `ulimit -n
// 64`, forty marquees created at once each dispatch through a script
// that takes a while. The dispatches run one process at a time (the
// limit's sixty-fourth), none fails for want of a descriptor (before the
// bound they started together and failed "pipe2: too many open files",
// taking what the store and the listener were kept), every one runs, and
// the process stops cleanly.
func TestS13DriverProcessesLeaveTheStoreItsDescriptors(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	slow := filepath.Join(dir, "dispatch.sh")
	require.NoError(t, os.WriteFile(slow, []byte("#!/bin/sh\ncat >/dev/null\nsleep 0.3\necho x >> "+ran+"\necho '{\"ok\":true}'\n"), 0o755))
	dispatched := func() int {
		raw, _ := os.ReadFile(ran)
		return strings.Count(string(raw), "x")
	}
	slowDispatchesUnderALowLimit(t, 40, dispatched, "--dispatch", "exec", "--dispatch-command", slow)
}

// TestS13OutboundConnectionsLeaveTheStoreItsDescriptors: the same with
// a hundred marquees and a GitHub that takes a second to answer each
// dispatch. Before the bound the dispatches opened a socket each at once
// and failed "socket: too many open files"; now they share the drivers'
// descriptors, one each.
func TestS13OutboundConnectionsLeaveTheStoreItsDescriptors(t *testing.T) {
	var n atomic.Int64
	gh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(time.Second) // long enough for the hundred to overlap
		n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(gh.Close)
	slowDispatchesUnderALowLimit(t, 100, func() int { return int(n.Load()) }, "--dispatch", "github", "--github-api-url", gh.URL, "--github-repo", "acme/infra")
}

// slowDispatchesUnderALowLimit creates n marquees at once under
// `ulimit -n 64` (a 503 overloaded is tried again, as S13 asks), waits
// for dispatched to count every one, stops warden and reads its log: no
// dispatch failed, no descriptor ran out.
func slowDispatchesUnderALowLimit(t *testing.T, n int, dispatched func() int, flags ...string) {
	data, addr := filepath.Join(t.TempDir(), "data"), freePort(t)
	p := startLimited(t, 64, data, addr, append(flags, "--pool", "default=1000")...)
	require.Contains(t, p.log.String(), "driver_processes_at_once=1")
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st := 0
			for try := 0; try < 100 && st != http.StatusCreated; try++ {
				if try > 0 {
					time.Sleep(50 * time.Millisecond) // 503 overloaded: the S13 refusal, tried again
				}
				st, _ = p.createOnce(fmt.Sprintf("fd-%d", i))
			}
			assert.Equal(t, http.StatusCreated, st) // not require: FailNow belongs to the test's own goroutine
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return dispatched() >= n }, 60*time.Second, 100*time.Millisecond, "every dispatch ran")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.exitStatus(30*time.Second), p.log.String())
	for _, bad := range []string{"too many open files", "dispatch failed", "panic"} {
		require.NotContains(t, p.log.String(), bad)
	}
}

// startLimited starts warden under `ulimit -n n` and waits for it.
func startLimited(t *testing.T, n int, dataDir, addr string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"-c", fmt.Sprintf("ulimit -n %d && exec \"$0\" \"$@\"", n), wardenBinary(t), "serve", "--listen", addr, "--data", dataDir}, extra...)
	cmd := exec.Command("sh", args...)
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN=cb-secret", "WARDEN_OPERATOR_TOKEN=op-secret", "WARDEN_GITHUB_TOKEN=gh-secret")
	return startCmd(t, cmd, addr, "warden under ulimit -n")
}

// createOnce creates a marquee on a connection of its own and returns the
// status and headers (0 when the connection failed).
func (p *proc) createOnce(id string) (int, http.Header) {
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}}
	req, _ := http.NewRequest("POST", p.url+"/v1/marquees", strings.NewReader(`{"id":"`+id+`","kind":"tutorial"}`))
	req.Header.Set("Authorization", "Bearer op-secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// tryDo is do without failing the test on a connection error (the
// process may be killed under it): 0 then.
func (p *proc) tryDo(method, path string, body any) (int, map[string]any) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(string(raw)))
	req.Header.Set("Authorization", "Bearer op-secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}
