package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The README's shell blocks are a contract with a new user (its
// examples raced the work they started and reused ids the previous section
// had reaped). A block runs unless the line before it says why not:
//
//	<!-- readme-test: skip (the reason) -->
//	<!-- readme-test: needs terraform -->
//	<!-- readme-test: previews -->   run against make previews instead, by
//	                                   TestP2P12P18MakePreviewsStartsThePlatformAndStopsIt
//	<!-- readme-test: cluster-move --> run from make run's and make cluster's
//	                                   directories, by
//	                                   TestD15MovingToAClusterAsTheReadmeGivesIt

type readmeBlock struct {
	doc    string // the file, from the repository's root
	line   int    // the line of its opening fence, 1-based
	script string
	skip   string // why it is not run; empty runs it
	needs  string // a program it needs on the PATH
	group  string // the test that runs it instead (previews, sleep, seed, cluster-move)
}

var readmeDirective = regexp.MustCompile(`^<!-- readme-test: (skip \((.+)\)|needs ([a-z0-9-]+)|(previews|sleep|seed|cluster-move)) -->$`)

func readmeBlocks(t *testing.T, path string) []readmeBlock {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	prev := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.script += line + "\n"
		case line == "```sh":
			cur = &readmeBlock{doc: filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path), line: n}
			if strings.HasPrefix(prev, "<!-- readme-test:") {
				m := readmeDirective.FindStringSubmatch(prev)
				require.NotNil(t, m, "README line %d: a directive is skip (reason) or needs PROGRAM: %q", n-1, prev)
				cur.skip, cur.needs, cur.group = m[2], m[3], m[4]
				if m[4] != "" {
					cur.skip = "run by its own test (" + m[4] + ")"
				}
			}
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "README: a shell block is never closed")
	return blocks
}

// walkThrough is the README's walk-through and the guides that go on from
// it on the same make run, in the order a reader follows them. Every other
// guide's blocks are marked: they need another process (make previews, a
// cluster) and their own tests run them.
var walkThrough = []string{"README.md", "docs/guides/workflow.md", "docs/guides/backups.md"}

// TestEveryGuideBlockIsRunSomewhere: a guide not in walkThrough marks
// each of its blocks with the test that runs it or why none does.
func TestEveryGuideBlockIsRunSomewhere(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	guides, err := filepath.Glob(filepath.Join(root, "docs/guides/*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, guides)
	for _, g := range guides {
		rel, _ := filepath.Rel(root, g)
		if slices.Contains(walkThrough, rel) {
			continue
		}
		for _, b := range readmeBlocks(t, g) {
			require.True(t, b.skip != "" || b.needs != "", "%s line %d: a block no test runs; mark it (readme-test: skip (why), previews, sleep, seed, cluster-move)", rel, b.line)
		}
	}
}

// TestTheReadmeRunsTopToBottom pastes every README shell block
// that is not marked, in order, into one bash (as a user pasting them into
// one terminal keeps its variables) against one fresh `make run`. A
// command that fails, or an answer that is an error, fails the test.
func TestTheReadmeRunsTopToBottom(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make run and the README against it")
	}
	for _, tool := range []string{"make", "bash", "curl", "openssl", "base64", "od", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	var blocks []readmeBlock
	for _, doc := range walkThrough {
		blocks = append(blocks, readmeBlocks(t, filepath.Join(root, doc))...)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	ran := 0
	for _, b := range blocks {
		if b.skip != "" {
			continue
		}
		if b.needs != "" {
			if _, err := exec.LookPath(b.needs); err != nil {
				t.Logf("README line %d not run: %s is not on the PATH", b.line, b.needs)
				continue
			}
		}
		fmt.Fprintf(&script, "echo '### %s line %d'\n%s", b.doc, b.line, b.script)
		ran++
	}
	require.GreaterOrEqual(t, ran, 6, "the example session, previews, the callback modes and the workflow run")

	addr, dir := freePort(t), t.TempDir()
	data := filepath.Join(dir, "data")
	env := readmeEnv("LISTEN="+addr, "DATA="+data)
	runLog := &syncBuffer{}
	mk := exec.Command("make", "-C", root, "run", "LISTEN="+addr, "DATA="+data)
	mk.Env, mk.Stdout, mk.Stderr = env, runLog, runLog
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, mk.Start())
	exited := make(chan error, 1)
	go func() { exited <- mk.Wait() }()
	t.Cleanup(func() { _ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL) })
	waitReady(t, addr, exited, runLog)

	sh := exec.Command("bash", "-c", script.String())
	sh.Dir, sh.Env = root, env
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "the README, pasted as written, failed:\n%s\n-- make run --\n%s", tail(out, 6000), tail([]byte(runLog.String()), 3000))
	require.NotContains(t, string(out), `{"error":`, "an answer was an error:\n%s", tail(out, 6000))
	require.Contains(t, string(out), `"result":"stale"`, "the redeploy's stale callback")
	require.Contains(t, string(out), `"result":"pending_confirmation"`, "the shared token's null")
	require.Contains(t, string(out), "preview env-271 at revision 3f2c9e1", "the preview answered")

	// Ctrl-C, as the README says to stop it: warden stops cleanly, its
	// store closed. (make itself then dies of the SIGINT it was sent too,
	// as make does; TestMakeRunStopsCleanlyOnCtrlC checks that it
	// prints nothing of it.)
	require.NoError(t, syscall.Kill(-mk.Process.Pid, syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("make run did not stop on Ctrl-C:\n%s", tail([]byte(runLog.String()), 3000))
	}
	require.Contains(t, runLog.String(), "store_closed=true", "warden stopped cleanly:\n%s", tail([]byte(runLog.String()), 3000))
	require.NotContains(t, runLog.String(), "make run: warden exited with status", "warden's own exit was 0")
}

// readmeEnv is the user's environment without any WARDEN_ setting of the
// machine running the test, so the README's defaults are what it meets.
func readmeEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WARDEN_") && !strings.HasPrefix(kv, "LISTEN=") && !strings.HasPrefix(kv, "DATA=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func waitReady(t *testing.T, addr string, exited <-chan error, log *syncBuffer) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("make run exited before it was ready (%v):\n%s", err, tail([]byte(log.String()), 3000))
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("make run was not ready within 3 minutes:\n%s", tail([]byte(log.String()), 3000))
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
