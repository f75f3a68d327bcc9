package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/persistence"
)

// The compatibility fixtures (D8): a data directory written by warden at
// each store format, kept in the tree. Every later build must open each,
// pass warden verify and serve what it holds. WARDEN_WRITE_FIXTURE=1
// writes the current format's anew (only when a new store format is
// introduced: the older ones stay as they are).
func fixtureDirOf(format int) string { return fmt.Sprintf("testdata/compat/format-%d", format) }

// fixtureDir is the oldest fixture, which the refusal tests start from.
var fixtureDir = fixtureDirOf(1)

// fixtureExpect is what the fixture holds, as the API shows it.
type fixtureExpect struct {
	WrittenBy string            `json:"written_by"`
	Marquees  map[string]string `json:"marquees"` // id -> lifecycle
	Envs      map[string]string `json:"environments"`
	Reserved  int               `json:"reserved"`
	Queued    int               `json:"queued"`
	// Delivery is the answer to the callback with delivery id
	// "fixture-delivery" to m-1 (format 2 on): its repeat gets it again.
	Delivery map[string]any `json:"delivery,omitempty"`
}

func TestD8WriteFixture(t *testing.T) {
	if os.Getenv("WARDEN_WRITE_FIXTURE") != "1" {
		t.Skip("writes " + fixtureDir + " when WARDEN_WRITE_FIXTURE=1")
	}
	dir := filepath.Join(t.TempDir(), "data")
	p := startFixtureWarden(t, dir)
	for i := range 4 {
		st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": fmt.Sprintf("m-%d", i), "kind": "tutorial"})
		require.Equal(t, 201, st, "%v", v)
	}
	p.waitDispatched("m-0", 10*time.Second)
	st, v := p.do("POST", "/v1/webhooks/terraform", "cb-secret", deployedCallback("m-0", "fixture-key"))
	require.Equal(t, 200, st, "%v", v)
	p.waitDispatched("m-1", 10*time.Second)
	st, delivery := p.callback("m-1", "fixture-delivery")
	require.Equal(t, 200, st, "%v", delivery)
	// Stopped, flushed and started again: what was written so far is in
	// an sstable, what follows in the WAL, so the fixture covers both of
	// Pebble's read paths (and a restart in the store's life).
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait(), p.log.String())
	st0, err := persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	require.NoError(t, st0.Flush())
	require.NoError(t, st0.Close())
	p = startFixtureWarden(t, dir)
	st, _ = p.do("POST", "/v1/environments", "op-secret", map[string]any{"id": "pr-1-aaaaaaa", "branch": "feature-a", "revision": "aaaaaaa"})
	require.Equal(t, 201, st)
	require.Eventually(t, func() bool {
		_, v := p.do("GET", "/v1/environments/pr-1-aaaaaaa", "op-secret", nil)
		return v["state"] == "ready"
	}, 60*time.Second, 50*time.Millisecond)
	time.Sleep(time.Second) // the admission of m-2 settles
	exp := expectOf(t, p)
	exp.Delivery = delivery
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait(), p.log.String())
	raw, err := os.ReadFile(filepath.Join(dir, sealKeyName))
	require.NoError(t, err)
	require.NotEmpty(t, raw)
	into := fixtureDirOf(persistence.StoreFormat)
	require.NoError(t, os.RemoveAll(into))
	require.NoError(t, os.CopyFS(into, os.DirFS(dir)))
	_ = os.RemoveAll(filepath.Join(into, "preview"))
	_ = os.Remove(filepath.Join(into, "warden.lock"))
	_ = os.Remove(filepath.Join(into, "LOCK"))
	b, _ := json.MarshalIndent(exp, "", "  ")
	require.NoError(t, os.WriteFile(into+".expect.json", append(b, '\n'), 0o644))
}

func startFixtureWarden(t *testing.T, dir string) *proc {
	ok := okScript(t)
	preview := filepath.Join(t.TempDir(), "preview")
	previewBin := previewDriver(t, preview)
	return startProcEnv(t, dir, freePort(t), []string{"WARDEN_PREVIEW_DIR=" + preview},
		"--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok, "--pool", "default=2",
		"--env-driver-command", previewBin, "--driver-env", "WARDEN_PREVIEW_DIR")
}

func expectOf(t *testing.T, p *proc) fixtureExpect {
	exp := fixtureExpect{Marquees: map[string]string{}, Envs: map[string]string{}}
	_, list := p.do("GET", "/v1/marquees", "op-secret", nil)
	for _, it := range list["items"].([]any) {
		m := it.(map[string]any)
		exp.Marquees[m["id"].(string)] = m["lifecycle"].(string)
	}
	_, envs := p.do("GET", "/v1/environments", "op-secret", nil)
	for _, it := range envs["items"].([]any) {
		e := it.(map[string]any)
		exp.Envs[e["id"].(string)] = e["state"].(string)
	}
	_, pool := p.do("GET", "/v1/pools/default", "op-secret", nil)
	exp.Reserved, exp.Queued = len(pool["reserved"].([]any)), len(pool["queued"].([]any))
	return exp
}

// copyFixture copies the oldest fixture into a private data directory
// (git keeps no modes; warden insists on 0700 and 0600, T11).
func copyFixture(t *testing.T) string { return copyFixtureOf(t, fixtureDir) }

func copyFixtureOf(t *testing.T, fixture string) string {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.CopyFS(dir, os.DirFS(fixture)))
	require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return os.Chmod(path, 0o700)
		}
		return os.Chmod(path, 0o600)
	}))
	return dir
}

// TestD8TheFixtureOpensVerifiesAndServes is the compatibility test: this
// build opens the data directory each format was written in, warden
// verify finds no problem, and warden serve serves every marquee,
// environment, pool place and kept delivery it holds.
func TestD8TheFixtureOpensVerifiesAndServes(t *testing.T) {
	for f := 1; f <= persistence.StoreFormat; f++ {
		t.Run(fmt.Sprint("format-", f), func(t *testing.T) { fixtureOpensVerifiesAndServes(t, fixtureDirOf(f)) })
	}
}

func fixtureOpensVerifiesAndServes(t *testing.T, fixture string) {
	raw, err := os.ReadFile(fixture + ".expect.json")
	require.NoError(t, err)
	var want fixtureExpect
	require.NoError(t, json.Unmarshal(raw, &want))
	dir := copyFixtureOf(t, fixture)
	sst, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NotEmpty(t, sst, "the fixture keeps records in sstables")
	require.True(t, walHolds(t, dir), "and records in the WAL")
	code, msg := runCLI(t, "verify", "--data", dir, "--pool", "default=2")
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, "ok: no problem found")
	require.Contains(t, msg, fmt.Sprintf("%d marquees", len(want.Marquees)))

	p := startFixtureWarden(t, dir)
	got := expectOf(t, p)
	require.Equal(t, want.Marquees, got.Marquees, "D8: every marquee of the fixture, as it was")
	// The fixture keeps no preview's processes or files: the first round,
	// at start, finds them gone and brings each back (P15).
	require.Eventually(t, func() bool { got = expectOf(t, p); return maps.Equal(want.Envs, got.Envs) }, 60*time.Second, 100*time.Millisecond,
		"every environment of the fixture, ready again: %v", got.Envs)
	require.Equal(t, want.Reserved+want.Queued, got.Reserved+got.Queued, "every pool place is still held")
	_, m0 := p.do("GET", "/v1/marquees/m-0", "op-secret", nil)
	require.NotNil(t, m0["connection"], "the sealed connection opens with the fixture's key")
	if want.Delivery != nil {
		st, again := p.callback("m-1", "fixture-delivery")
		require.Equal(t, 200, st)
		require.Equal(t, want.Delivery, again, "M20: the kept delivery's first answer")
	}
}

// TestD8AnOlderBuildRefusesANewerStore: a store whose format record says
// a newer warden wrote it is refused at start with exit 65 and a message
// naming both versions; nothing of it is read or written.
func TestD8AnOlderBuildRefusesANewerStore(t *testing.T) {
	dir := copyFixture(t)
	st, err := persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	b := st.NewBatch()
	b.PutFormat(persistence.FormatRecord{Format: persistence.StoreFormat + 1, WrittenBy: "v9.9.9 (c0ffee)"})
	require.NoError(t, b.Commit())
	require.NoError(t, st.Close())

	cmd := exec.Command(wardenBinary(t), "serve", "--listen", freePort(t), "--data", dir, "--github-repo", "acme/infra")
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN=cb-secret", "WARDEN_OPERATOR_TOKEN=op-secret", "WARDEN_GITHUB_TOKEN=gh-secret")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, exitCorrupt, exit.ExitCode(), "%s", out)
	msg := string(out)
	require.Contains(t, msg, fmt.Sprintf("the store is format %d, written by warden v9.9.9 (c0ffee)", persistence.StoreFormat+1))
	require.Contains(t, msg, fmt.Sprintf("reads formats up to %d", persistence.StoreFormat))
	require.True(t, strings.Contains(msg, "this warden (") && strings.Contains(msg, "restore a backup taken before the upgrade"), msg)
	code, vmsg := runCLI(t, "verify", "--data", dir)
	require.Equal(t, exitCorrupt, code)
	require.Contains(t, vmsg, "newer than this build reads")
}

// walHolds reports whether a Pebble directory has a WAL with records in
// it (an empty one is its 11-byte header, or nothing).
func walHolds(t *testing.T, dir string) bool {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil && fi.Size() > 1024 {
			return true
		}
	}
	return false
}
