package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/testports"
)

// makeLayout is a directory laid out as a clone after make build: bin/
// with warden and the example drivers, and scripts/. make run's data
// (./data) and make cluster's (./data/cluster) go under it, so what the
// README runs from a clone runs here as written.
func makeLayout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	require.NoError(t, os.Symlink(wardenBinary(t), filepath.Join(bin, "warden")))
	for name, pkg := range map[string]string{"example-preview": "examples/preview", "example-workflow": "examples/workflow"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), filepath.Join(root, pkg)).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, os.Symlink(filepath.Join(root, "scripts"), filepath.Join(dir, "scripts")))
	return dir
}

// clusterScript is scripts/cluster.sh (make cluster, or with --etcd-only
// make cluster-etcd) running in a layout, in a process group of its own
// as a terminal's foreground job is.
type clusterScript struct {
	t   *testing.T
	cmd *exec.Cmd
	log *syncBuffer
}

func startClusterScript(t *testing.T, dir string, args ...string) *clusterScript {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"./scripts/cluster.sh"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(readmeEnv(), "WARDEN_OPERATOR_TOKEN=op-secret", "WARDEN_CALLBACK_TOKEN=cb-secret",
		"WARDEN_PREVIEW_DIR="+filepath.Join(dir, "data", "preview"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &clusterScript{t: t, cmd: cmd, log: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return s
}

// ctrlC sends SIGINT to the script's process group, as Ctrl-C in its
// terminal does, and waits for the script to end; it returns how long
// that took.
func (s *clusterScript) ctrlC() time.Duration {
	s.t.Helper()
	start := time.Now()
	require.NoError(s.t, syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(s.t, err, "the script's exit:\n%s", tail([]byte(s.log.String()), 3000))
	case <-time.After(30 * time.Second):
		s.t.Fatalf("Ctrl-C did not stop it:\n%s", tail([]byte(s.log.String()), 3000))
	}
	return time.Since(start)
}

// settled waits until make cluster's nodes are up, three live members
// owning every shard (settle), and returns the node at port.
func (s *clusterScript) settled(port int) *proc {
	s.t.Helper()
	p := &proc{t: s.t, url: fmt.Sprintf("http://127.0.0.1:%d", port), log: s.log}
	p.waitReady(time.Minute, "make cluster's node")
	settle(s.t, p, 3)
	return p
}

// makeClusterPorts are every port make cluster listens on: the nodes'
// HTTP, the members' clients and peers.
var makeClusterPorts = []int{8181, 8182, 8183, 2381, 2382, 2383, 2391, 2392, 2393}

// holdMakeClusterPorts waits for make cluster's fixed ports to be this
// test's alone on the machine: another make test running beside this one
// takes its turn (testports.Hold).
func holdMakeClusterPorts(t *testing.T) {
	release, err := testports.Hold("make-cluster")
	require.NoError(t, err)
	t.Cleanup(release)
}

// TestC10MakeCluster: make cluster (scripts/cluster.sh) starts three
// nodes that own every shard between them, a preview runs on them, and
// Ctrl-C stops every node cleanly and everything they started: nothing
// listens afterwards (not the nodes, not the etcd members, not the
// preview's application).
func TestC10MakeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three warden processes on fixed ports")
	}
	holdMakeClusterPorts(t)
	dir := makeLayout(t)
	s := startClusterScript(t, dir)
	n1 := s.settled(8181)
	// A shard between owners answers 503 (the nodes may still be moving
	// one): a client asks again; a 409 then says the first was applied.
	st, v := retry503(n1, "POST", "/v1/environments", map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Contains(t, []int{201, 409}, st, "%v", v)
	var view map[string]any
	require.Eventually(t, func() bool {
		_, view = n1.do("GET", "/v1/environments/env-1", "op-secret", nil)
		return view["state"] == "ready"
	}, 2*time.Minute, 100*time.Millisecond, "env-1 ready on the cluster: %s", s.log)
	u, err := url.Parse(fmt.Sprint(view["url"]))
	require.NoError(t, err)
	appPort, err := strconv.Atoi(u.Port())
	require.NoError(t, err, "the preview's URL names its port: %v", view)
	require.True(t, listening(appPort), "the application listens on %d", appPort)

	took := s.ctrlC()
	t.Logf("make cluster stopped %s after Ctrl-C", took.Round(time.Millisecond))
	require.Equal(t, 3, strings.Count(s.log.String(), "msg=stopped"), "every node stopped cleanly: %s", s.log)
	for _, port := range append(makeClusterPorts, appPort) {
		require.False(t, listening(port), "nothing make cluster started listens after Ctrl-C (port %d)", port)
	}
}

// TestD15MovingToAClusterAsTheReadmeGivesIt runs "Moving to a cluster"
// as the README gives it, from make run's and make cluster's own
// directories: a single node's store into make cluster's members started
// alone (make cluster-etcd), the nodes serving it, and back into a new
// data directory that verifies.
func TestD15MovingToAClusterAsTheReadmeGivesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts warden and a three-member etcd on fixed ports")
	}
	holdMakeClusterPorts(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	var blocks []readmeBlock
	for _, b := range readmeBlocks(t, filepath.Join(root, "docs/guides/cluster.md")) {
		if b.group == "cluster-move" {
			blocks = append(blocks, b)
		}
	}
	require.Len(t, blocks, 3, "the keyrings, there, and back")
	dir := makeLayout(t)

	// make run's directory: a single node with a marquee and a preview.
	addr := freePort(t)
	single := exec.Command("./bin/warden", "serve", "--listen", addr, "--data", "./data",
		"--dispatch", "exec", "--dispatch-command", okScript(t), "--bootstrap", "exec", "--bootstrap-command", okScript(t))
	single.Dir, single.Env = dir, append(readmeEnv(), "WARDEN_OPERATOR_TOKEN=op-secret", "WARDEN_CALLBACK_TOKEN=cb-secret")
	p := startCmd(t, single, addr, "the single node")
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-move", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	p.waitDispatched("m-move", 10*time.Second)
	_, before := p.do("GET", "/v1/marquees/m-move", "op-secret", nil)
	require.NoError(t, single.Process.Signal(syscall.SIGTERM))
	require.NoError(t, single.Wait(), "%s", p.log)

	runReadmeBlock(t, dir, blocks[0], "", "")
	members := startMembersAlone(t, dir)
	runReadmeBlock(t, dir, blocks[1], "", "declare -p MEMBERS ADMIN > readme-vars.sh\n")
	members.ctrlC()

	// make cluster on the migrated store: the marquee is there, as it was.
	s := startClusterScript(t, dir)
	n2 := s.settled(8182)
	st, after := retry503(n2, "GET", "/v1/marquees/m-move", nil)
	require.Equal(t, 200, st, "%v\n%s", after, s.log)
	for _, field := range []string{"id", "generation", "lifecycle", "created_at"} {
		require.Equal(t, before[field], after[field], "%s after the move", field)
	}
	s.ctrlC()

	members = startMembersAlone(t, dir)
	out := runReadmeBlock(t, dir, blocks[2], "source readme-vars.sh\n", "")
	members.ctrlC()
	require.Contains(t, out, "ok: no problem found", "the store moved back verifies:\n%s", tail([]byte(out), 3000))
	for _, port := range makeClusterPorts {
		require.False(t, listening(port), "the members stopped (port %d)", port)
	}
}

// startMembersAlone is make cluster-etcd in another terminal, once it
// has printed its line.
func startMembersAlone(t *testing.T, dir string) *clusterScript {
	t.Helper()
	s := startClusterScript(t, dir, "--etcd-only")
	require.Eventually(t, func() bool { return strings.Contains(s.log.String(), "make cluster-etcd:") },
		time.Minute, 50*time.Millisecond, "make cluster-etcd started: %s", s.log)
	return s
}

// runReadmeBlock runs a README block as written in dir (before and after
// are the test's own lines around it), in a process group of its own:
// whatever it left running when it ends, or fails, is killed with it.
func runReadmeBlock(t *testing.T, dir string, b readmeBlock, before, after string) string {
	t.Helper()
	sh := exec.Command("bash", "-c", "set -euo pipefail\n"+before+b.script+after)
	sh.Dir, sh.Env = dir, readmeEnv()
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncBuffer{}
	sh.Stdout, sh.Stderr = out, out
	sh.WaitDelay = 5 * time.Second // a child left behind holds the output open
	require.NoError(t, sh.Start())
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		err = fmt.Errorf("still running after 3 minutes")
	}
	_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL)
	require.NoError(t, err, "README line %d, pasted as written:\n%s", b.line, tail([]byte(out.String()), 6000))
	return out.String()
}
