package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/trust"
)

// TestD9OnlineRekeyOnTheCluster rekeys a two-node cluster while it runs,
// in warden rekey --online's four phases with a rolling restart after
// the first two: afterwards every record, on either node's shards, is
// sealed under the new key alone, the keyring holds only it, and every
// marquee still reads with its connection.
func TestD9OnlineRekeyOnTheCluster(t *testing.T) {
	t.Parallel() // mostly waits on processes and timers: overlapped with the other long waits (make test)
	urls := startEtcd(t, 3)
	shared := filepath.Join(t.TempDir(), "shared")
	var kg strings.Builder
	require.NoError(t, keygen([]string{shared}, &kg))
	keyFile := filepath.Join(shared, sealKeyName)
	ok := okScript(t)
	type node struct {
		name, data, addr string
		p                *proc
	}
	nodes := []*node{{name: "n1", data: filepath.Join(t.TempDir(), "n1"), addr: freePort(t)}, {name: "n2", data: filepath.Join(t.TempDir(), "n2"), addr: freePort(t)}}
	start := func(n *node) {
		n.p = startProc(t, n.data, n.addr, "--node", n.name, "--etcd-endpoints", strings.Join(urls, ","),
			"--cluster-token-file", filepath.Join(shared, "cluster.token"), "--seal-key-file", keyFile,
			"--callback-signing-key-file", filepath.Join(shared, "callback-signing.key"), "--advertise-url", "http://"+n.addr,
			"--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok, "--pool", "default=20")
	}
	restart := func() {
		for _, n := range nodes {
			require.NoError(t, n.p.cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, n.p.cmd.Wait(), n.p.log.String())
			start(n)
		}
		settle(t, nodes[0].p, 2)
	}
	for _, n := range nodes {
		start(n)
	}
	settle(t, nodes[0].p, 2)
	first := nodes[0].p
	var ids []string
	for i := range 8 {
		id := fmt.Sprintf("m-%d", i)
		ids = append(ids, id)
		createOn(t, first, map[string]any{"id": id, "kind": "tutorial"})
	}
	for _, id := range ids {
		first.waitDispatched(id, 20*time.Second)
		deployUnderCurrentGeneration(t, first, id, "key-of-"+id)
	}
	ring, err := trust.LoadKeyring(keyFile)
	require.NoError(t, err)
	old := ring.Active().ID

	cli := func(args ...string) string {
		code, msg := runCLI(t, append([]string{"rekey", "--seal-key-file", keyFile, "--server", first.url}, args...)...)
		require.Equal(t, 0, code, msg)
		return msg
	}
	require.Contains(t, cli("--online", "stage"), "staged")
	restart()
	require.Contains(t, cli("--online", "activate"), "is active")
	ring, err = trust.LoadKeyring(keyFile)
	require.NoError(t, err)
	fresh := ring.Active().ID
	require.NotEqual(t, old, fresh)
	restart()
	first = nodes[0].p
	msg := cli("--online", "reseal", "--server", first.url)
	require.Contains(t, msg, "every record is under the active key", msg)
	for _, n := range nodes {
		require.Contains(t, msg, "http://"+n.addr+": ", "D9: both nodes resealed their own shards")
	}
	require.Contains(t, cli("--online", "finish", "--server", first.url), "holds only "+fresh)
	ring, err = trust.LoadKeyring(keyFile)
	require.NoError(t, err)
	require.Len(t, ring.Keys, 1)
	ids2, err := liveKeyIDs(clientOptions{server: first.url, output: "json", getenv: func(k string) string {
		if k == "WARDEN_OPERATOR_TOKEN" {
			return "op-secret"
		}
		return ""
	}})
	require.NoError(t, err)
	require.Equal(t, []string{fresh}, ids2, "D9: no record names the old key")
	restart()
	for _, id := range ids {
		st, v := retry503(nodes[1].p, "GET", "/v1/marquees/"+id, nil)
		require.Equal(t, 200, st, "%v", v)
		require.NotNil(t, v["connection"], "%s opens under the new key alone", id)
	}
	raw, _ := os.ReadFile(keyFile)
	require.NotContains(t, string(raw), old)
}

// deployUnderCurrentGeneration gives a marquee its connection with the
// workflow's "deployed" callback for the generation the marquee is at,
// and requires it applied. On a cluster a shard can move while a dispatch
// is in flight; its new owner cannot know that dispatch's outcome and
// supersedes it with a new generation, so a callback for generation 1 can
// be stale (M10), answered 200 and never applied (this test once went on
// without m-5's connection). A callback that races another supersession
// is sent again under the newer generation.
func deployUnderCurrentGeneration(t *testing.T, p *proc, id, sshKey string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, v := retry503(p, "GET", "/v1/marquees/"+id, nil)
		// Only a generation read: a failed read would send null, not the
		// generation the marquee is at.
		if gen, ok := v["generation"].(float64); st == 200 && ok && gen > 0 {
			cb := deployedCallback(id, sshKey)
			cb["generation"] = gen
			if st, v = retry503(p, "POST", "/v1/webhooks/terraform", cb); st == 200 && v["result"] == "applied" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's deployed callback was never applied: %d %v", id, st, v)
		}
	}
}

// retry503 sends a request again while the cluster answers 503 (a shard
// moving, a node starting): clients are told to retry those.
func retry503(p *proc, method, path string, body any) (int, map[string]any) {
	token := "op-secret"
	if strings.HasPrefix(path, "/v1/webhooks/") {
		token = "cb-secret"
	}
	var st int
	var v map[string]any
	for range 200 {
		if st, v = p.do(method, path, token, body); st != 503 {
			return st, v
		}
		time.Sleep(50 * time.Millisecond)
	}
	return st, v
}

// createOn creates a marquee through a cluster node, retrying a 503; a
// 409 after one is the earlier attempt's create, answered "unknown"
// because the shard moved under it.
func createOn(t *testing.T, p *proc, body map[string]any) {
	t.Helper()
	st, v := retry503(p, "POST", "/v1/marquees", body)
	if st == 409 {
		st, v = retry503(p, "GET", "/v1/marquees/"+body["id"].(string), nil)
		require.Equal(t, 200, st, "%v", v)
		return
	}
	require.Equal(t, 201, st, "%v", v)
}

// settle waits until a node sees n live members and every shard owned.
func settle(t *testing.T, p *proc, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, v := p.do("GET", "/v1/cluster", "op-secret", nil)
		if st != 200 {
			return false
		}
		live := 0
		for _, m := range v["members"].([]any) {
			if m.(map[string]any)["alive"] == true {
				live++
			}
		}
		for _, s := range v["shards"].([]any) {
			if s.(map[string]any)["owner"] == "" || s.(map[string]any)["owner"] == nil {
				return false
			}
		}
		return live == n
	}, 30*time.Second, 50*time.Millisecond, "the cluster settles with %d nodes", n)
}

// TestD9ResealAsksAgainWhileAShardMoves: a round of reseal can miss a
// record whose shard moves while it runs (CI saw "1 failed" right after
// a rolling restart, the next round would have rewritten it). reseal asks
// every node again, a bounded number of times, and says so when records
// stay under an older key.
func TestD9ResealAsksAgainWhileAShardMoves(t *testing.T) {
	dir := t.TempDir()
	var kg strings.Builder
	require.NoError(t, keygen([]string{dir}, &kg))
	keyFile := filepath.Join(dir, sealKeyName)
	ring, err := trust.LoadKeyring(keyFile)
	require.NoError(t, err)
	active := ring.Active().ID
	defer func(p time.Duration) { resealPause = p }(resealPause)
	resealPause = time.Millisecond

	run := func(settlesAfter int) (string, int, error) {
		var reseals atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			moving := int(reseals.Load()) < settlesAfter
			switch r.URL.Path {
			case "/v1/cluster":
				w.WriteHeader(404)
			case "/v1/admin/reseal":
				reseals.Add(1)
				failed := 0
				if moving {
					failed = 1
				}
				fmt.Fprintf(w, `{"rewritten":3,"failed":%d,"active_key_id":%q}`, failed, active)
			case "/v1/admin/verify":
				ids := `["` + active + `"]`
				if moving {
					ids = `["kold", "` + active + `"]`
				}
				fmt.Fprintf(w, `{"report":{"seal_key_ids":%s}}`, ids)
			}
		}))
		defer srv.Close()
		var out strings.Builder
		o := clientOptions{server: srv.URL, output: "json", getenv: func(string) string { return "op-secret" }}
		err := rekeyReseal(keyFile, o, &out)
		return out.String(), int(reseals.Load()), err
	}

	out, asked, err := run(2)
	require.NoError(t, err, out)
	require.Equal(t, 3, asked, "two rounds that missed a record, a third that did not")
	require.Contains(t, out, "round 3")
	require.Contains(t, out, "every record is under the active key")

	out, asked, err = run(100)
	require.Error(t, err, out)
	require.Equal(t, resealRounds, asked, "bounded")
	require.Contains(t, err.Error(), "after 5 rounds")
}
