package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

func randomHex(t *testing.T) string {
	b := make([]byte, 12)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// TestT9ChildProcessesGetAMinimalEnvironment starts the real binary with
// its secrets in its environment and an exec dispatch script that records
// its own environment, a grandchild's, its command line and its stdin: no
// warden token reaches either process; the run's credential arrives on
// stdin only.
func TestT9ChildProcessesGetAMinimalEnvironment(t *testing.T) {
	out := t.TempDir()
	script := filepath.Join(out, "dispatch.sh")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
cat > `+out+`/stdin.json
tr '\0' '\n' < /proc/$$/environ > `+out+`/env.txt
tr '\0' ' ' < /proc/$$/cmdline > `+out+`/cmdline.txt
sh -c "tr '\\0' '\\n' < /proc/self/environ" > `+out+`/grandchild-env.txt
echo '{"ok":true}'
`), 0o755))
	dir := filepath.Join(t.TempDir(), "data")
	p := startProcEnv(t, dir, freePort(t), []string{"FOO_PASSED=visible", "FOO_SECRET=hidden"},
		"--dispatch", "exec", "--dispatch-command", script, "--bootstrap", "exec", "--bootstrap-command", script,
		"--driver-env", "FOO_PASSED")
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(out, "grandchild-env.txt"))
		return err == nil && len(b) > 0
	}, 10*time.Second, 20*time.Millisecond, "the script ran: %s", p.log)

	for _, f := range []string{"env.txt", "grandchild-env.txt"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		require.NoError(t, err)
		env := string(b)
		for _, secret := range []string{"op-secret", "cb-secret", "gh-secret", "WARDEN_", "FOO_SECRET"} {
			require.NotContains(t, env, secret, "T9: %s holds %s", f, secret)
		}
		require.Contains(t, env, "PATH=", f)
		require.Contains(t, env, "FOO_PASSED=visible", "--driver-env passes a name the operator lists")
	}
	stdin, err := os.ReadFile(filepath.Join(out, "stdin.json"))
	require.NoError(t, err)
	require.Contains(t, string(stdin), `"callback_token":"wcb1.`, "T1: the scoped credential travels on stdin")
	cmdline, err := os.ReadFile(filepath.Join(out, "cmdline.txt"))
	require.NoError(t, err)
	require.NotContains(t, string(cmdline), "wcb1.", "never on a command line")
}

// grepDir reports the files under dir whose bytes contain any needle.
func grepDir(t *testing.T, dir string, needles ...string) []string {
	var hits []string
	require.NoError(t, filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				hits = append(hits, path+": "+n)
			}
		}
		return nil
	}))
	return hits
}

// TestT10SecretsAreSealedAtRest sends distinctive secrets with deployed,
// then greps every file of the data directory for them (WAL, sstables,
// manifest, everything) while warden runs, after a graceful stop, and
// after `warden rekey`; and shows the sealed connection still opens: the
// same deployed again is a duplicate, which needs the stored key in clear.
func TestT10SecretsAreSealedAtRest(t *testing.T) {
	gh := acceptingGitHub(t)
	script := okScript(t)
	dir := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	flags := []string{"--dispatch", "github", "--github-api-url", gh.URL, "--github-repo", "acme/infra",
		"--bootstrap", "exec", "--bootstrap-command", script}
	sshKey := "-----BEGIN OPENSSH PRIVATE KEY-----" + randomHex(t)
	acmeUser, acmePassword := "acme-user-"+randomHex(t), "acme-password-"+randomHex(t)
	deployed := map[string]any{"marquee_id": "m-1", "verb": "deployed", "generation": 1, "connection": map[string]any{
		"host": "203.0.113.7", "port": 22, "user": "root", "ssh_private_key": sshKey, "free_domain": "m-1.example.net",
		"acme_dns": map[string]any{"username": acmeUser, "password": acmePassword}}}

	p := startProc(t, dir, addr, flags...)
	st, _ := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st)
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
		return v["generation"] == 1.0
	}, 5*time.Second, 10*time.Millisecond)
	st, v := p.do("POST", "/v1/webhooks/terraform", "cb-secret", deployed)
	require.Equal(t, 200, st, "%v", v)
	require.Equal(t, "applied", v["result"])
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
		return v["lifecycle"] == "provisioned"
	}, 5*time.Second, 10*time.Millisecond)
	require.Empty(t, grepDir(t, dir, sshKey, acmeUser, acmePassword), "T10: nothing in clear while running")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait())
	require.Empty(t, grepDir(t, dir, sshKey, acmeUser, acmePassword), "T10: nor after a graceful stop")
	require.NotContains(t, p.log.String(), sshKey)

	before, err := trust.LoadKeyring(filepath.Join(dir, sealKeyName))
	require.NoError(t, err)
	var stdout bytes.Buffer
	require.NoError(t, rekey([]string{"--data", dir}, func(string) string { return "" }, &stdout, io.Discard))
	require.Contains(t, stdout.String(), "1 records resealed")
	after, err := trust.LoadKeyring(filepath.Join(dir, sealKeyName))
	require.NoError(t, err)
	require.Len(t, after.Keys, 1, "the old key is dropped once nothing names it")
	require.NotEqual(t, before.Active().ID, after.Active().ID)
	require.Empty(t, grepDir(t, dir, sshKey, acmeUser, acmePassword), "T10: nor after rekey")

	p2 := startProc(t, dir, addr, flags...)
	st, v = p2.do("POST", "/v1/webhooks/terraform", "cb-secret", deployed)
	require.Equal(t, 200, st)
	require.Equal(t, "duplicate", v["result"], "the resealed connection opens under the new key")
}

// TestRekeyResumesAfterACrash starts from the state a crash leaves between
// the rekey's first and last step: a keyring with the new key first and
// the old one kept, and records still under the old one.
func TestRekeyResumesAfterACrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, prepareDataDir(dir))
	old := &trust.Keyring{Keys: []trust.Key{trust.NewKey()}}
	st, err := persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	b := st.NewBatch()
	for _, id := range []string{"m-1", "m-2", "m-3"} {
		record.SeedMarquee(b, trust.NewSealer(old), record.Marquee{State: marquee.State{ID: id, Kind: marquee.BYO, Serving: marquee.Active,
			Connection: &marquee.Connection{Host: "h", Port: 22, User: "u", SSHPrivateKey: "key-of-" + id}}})
	}
	require.NoError(t, b.Commit())
	require.NoError(t, st.Close())

	mid := &trust.Keyring{Keys: append([]trust.Key{}, old.Keys...)}
	mid.Rotate(time.Now())
	path := filepath.Join(dir, sealKeyName)
	require.NoError(t, trust.WriteFileAtomic(path, mid.Format("")))

	var stdout bytes.Buffer
	require.NoError(t, rekey([]string{"--data", dir}, func(string) string { return "" }, &stdout, io.Discard))
	require.Contains(t, stdout.String(), "resuming")
	require.Contains(t, stdout.String(), "3 records resealed")
	done, err := trust.LoadKeyring(path)
	require.NoError(t, err)
	require.Equal(t, []string{mid.Active().ID}, []string{done.Keys[0].ID})
	require.Len(t, done.Keys, 1)

	st, err = persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	r, err := record.LoadMarquee(st, trust.NewSealer(done), "m-2")
	require.NoError(t, err, "opens without the old key")
	require.Equal(t, "key-of-m-2", r.State.Connection.SSHPrivateKey)

	// Running it again (a second crash, or a cautious operator) is safe.
	require.NoError(t, st.Close())
	stdout.Reset()
	require.NoError(t, rekey([]string{"--data", dir}, func(string) string { return "" }, &stdout, io.Discard))
	st, err = persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	// Closed before the test's directory is removed: an open Pebble's
	// background work would find its files gone and panic (a flaky
	// failure this test used to cause).
	defer st.Close()
	r, err = record.LoadMarquee(st, trust.NewSealer(loadRing(t, path)), "m-3")
	require.NoError(t, err)
	require.Equal(t, "key-of-m-3", r.State.Connection.SSHPrivateKey)
}

func loadRing(t *testing.T, path string) *trust.Keyring {
	k, err := trust.LoadKeyring(path)
	require.NoError(t, err)
	return k
}

// TestT11RefusesLooseModes: warden refuses a data directory or key file
// others may read, before it listens, saying how to fix it; one it
// creates is 0700 with 0600 files.
func TestT11RefusesLooseModes(t *testing.T) {
	env := map[string]string{"WARDEN_OPERATOR_TOKEN": "op", "WARDEN_DISPATCH": "exec", "WARDEN_DISPATCH_COMMAND": "true"}
	getenv := func(k string) string { return env[k] }
	open := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o755))
	err := serve([]string{"--data", open, "--listen", "127.0.0.1:0"}, getenv, io.Discard)
	require.ErrorContains(t, err, "chmod 700 "+open)

	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, prepareDataDir(dir))
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	key := filepath.Join(t.TempDir(), "seal.key")
	require.NoError(t, os.WriteFile(key, (&trust.Keyring{Keys: []trust.Key{trust.NewKey()}}).Format(""), 0o644))
	require.NoError(t, os.Chmod(key, 0o644))
	err = serve([]string{"--data", dir, "--listen", "127.0.0.1:0", "--seal-key-file", key}, getenv, io.Discard)
	require.ErrorContains(t, err, "chmod 600 "+key)
	tokenFile := filepath.Join(t.TempDir(), "op-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("x"), 0o644))
	require.NoError(t, os.Chmod(tokenFile, 0o644))
	_, err = parseConfig([]string{"--operator-token-file", tokenFile}, func(string) string { return "" }, io.Discard)
	require.ErrorContains(t, err, "chmod 600")
	require.False(t, strings.Contains(err.Error(), "x\n"))
}
