package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/cluster"
)

// fakeNode is a cluster node that owns nothing (or everything) and names
// one owner URL for every shard: enough to drive the HTTP layer's routing
// against a real owner on loopback.
type fakeNode struct {
	mu      sync.Mutex
	owns    bool
	url     string
	drained bool
	// unplaced leaves shard 0 without an owner.
	unplaced bool
}

func (n *fakeNode) Name() string { return "n1" }

func (n *fakeNode) View() cluster.View {
	v := cluster.View{Node: "n1", Members: []cluster.MemberView{{Name: "n1", URL: "http://n1", Alive: true}, {Name: "n2", URL: n.url, Alive: true}}}
	for s := 0; s < cluster.Shards; s++ {
		v.Shards = append(v.Shards, cluster.ShardView{Shard: s, Owner: "n2", Epoch: 100 + int64(s)})
	}
	n.mu.Lock()
	if n.unplaced {
		v.Shards[0].Owner = ""
	}
	n.mu.Unlock()
	return v
}

func (n *fakeNode) OwnerURL(int) (string, string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return "n2", n.url
}

func (n *fakeNode) Drain(context.Context) error {
	n.mu.Lock()
	n.drained = true
	n.mu.Unlock()
	return nil
}

func (n *fakeNode) Owns(int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.owns
}

func (n *fakeNode) set(owns bool, url string) {
	n.mu.Lock()
	n.owns, n.url = owns, url
	n.mu.Unlock()
}

// TestC4AnyNodeAnswers: a request reaching a node that does not own its
// entity is forwarded, as it came, to the owner, which authenticates and
// decides it; the answer comes back. A forwarded request reaching a
// non-owner is refused (one hop, no loops), and while a shard has no owner
// the answer is 503 with Retry-After, never a decision from a non-owner.
func TestC4AnyNodeAnswers(t *testing.T) {
	pools := map[string]int{"default": 2}
	owner := newWorld(t, pools)
	node := &fakeNode{url: owner.url}
	entry := newWorldWith(t, pools, func(_ *actors.Config, o *httpapi.Options) {
		o.Cluster, o.ClusterToken = node, "cluster-secret"
	})

	// A create and a callback sent to the non-owner are the owner's.
	st, _, raw := entry.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, http.StatusCreated, st, string(raw))
	v := owner.waitFor("m-1", "dispatched", func(v map[string]any) bool { return gen(v) > 0 })
	st, ans := entry.callback(map[string]any{"marquee_id": "m-1", "generation": gen(v), "verb": "step", "step": "vm_starting"}, "Webhook-Id", "d-1")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "applied", ans["result"])
	st, _, _ = entry.do("POST", "/v1/marquees/m-1/disable", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, "a command by path is forwarded too")
	require.Equal(t, "disabled", owner.view("m-1")["serving"])
	// The owner authenticated the forwarded request itself.
	st, _ = entry.callback(map[string]any{"marquee_id": "m-1", "generation": gen(v), "verb": "step", "step": "x"}, "Authorization", "Bearer wrong")
	require.Equal(t, http.StatusUnauthorized, st)

	// One hop: a forwarded request at a non-owner is refused.
	st, m, _ := entry.do("POST", "/v1/marquees/m-1/enable", operatorToken, nil, "X-Warden-Forwarded-By", "n3")
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Equal(t, "shard_moving", m["error"].(map[string]any)["code"])

	// Moving: no owner URL.
	node.set(false, "")
	req, _ := http.NewRequest("POST", entry.url+"/v1/marquees/m-1/enable", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	// Owned here: decided here.
	node.set(true, "")
	st, _, _ = entry.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-2", "kind": "tutorial"})
	require.Equal(t, http.StatusCreated, st)
	_, err = record.LoadMarquee(entry.store, nil, "m-2")
	require.NoError(t, err)
}

// TestC9ClusterViewAndDrain: operators see members, owners and epochs;
// drain is an operator's action; a single node has no cluster.
func TestC9ClusterViewAndDrain(t *testing.T) {
	single := newWorld(t, map[string]int{"default": 1})
	st, _, _ := single.do("GET", "/v1/cluster", operatorToken, nil)
	require.Equal(t, http.StatusNotFound, st)

	node := &fakeNode{url: "http://n2"}
	w := newWorldWith(t, map[string]int{"default": 1}, func(_ *actors.Config, o *httpapi.Options) {
		o.Cluster, o.ClusterToken = node, "cluster-secret"
	})
	st, v, _ := w.do("GET", "/v1/cluster", operatorToken, nil)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "n1", v["node"])
	require.Len(t, v["shards"], cluster.Shards)
	require.Equal(t, float64(100), v["shards"].([]any)[0].(map[string]any)["epoch"])
	st, _, _ = w.do("POST", "/v1/cluster/drain", "", nil)
	require.Equal(t, http.StatusUnauthorized, st)
	require.False(t, node.drained)
	st, _, _ = w.do("POST", "/v1/cluster/drain", operatorToken, nil)
	require.Equal(t, http.StatusAccepted, st)
	require.True(t, node.drained)

	// The console's cluster page, and its drain button (confirmed).
	op, csrf := consoleClient(t, w.url, operatorToken)
	page := get(t, op, w.url+"/ui/cluster")
	require.Contains(t, page, "This is node <strong>n1</strong>")
	require.Contains(t, page, "<td>15</td><td>n2</td><td>115</td>", "each shard's owner and epoch")
	node.mu.Lock()
	node.drained = false
	node.mu.Unlock()
	resp, err := op.PostForm(w.url+"/ui/drain", url.Values{"csrf": {csrf}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "not confirmed")
	resp, err = op.PostForm(w.url+"/ui/drain", url.Values{"csrf": {csrf}, "confirm": {"yes"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, node.drained)
	// An action for an entity another node owns says where to take it.
	resp, err = op.PostForm(w.url+"/ui/act", url.Values{"csrf": {csrf}, "kind": {"marquee"}, "id": {"m-1"}, "action": {"disable"},
		"reason": {"x"}, "confirm": {"yes"}})
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, string(b), "owned by node n2")

	// The nodes' own channel: the cluster token only.
	msg := map[string]any{"kind": "pool", "id": "default", "event": map[string]any{"type": "ask", "job": "m-9"}}
	st, _, _ = w.do("POST", "/v1/internal/messages", operatorToken, msg)
	require.Equal(t, http.StatusUnauthorized, st, "an operator token is not a node's")
	st, _, _ = w.do("POST", "/v1/internal/messages", "cluster-secret", msg)
	require.Equal(t, http.StatusOK, st)
	st, _, _ = w.do("POST", "/v1/internal/messages", "cluster-secret", map[string]any{"kind": "pool", "id": "default", "event": map[string]any{"type": "nope"}})
	require.Equal(t, http.StatusBadRequest, st)
}

// TestAClusterNodeIsReadyOnceItsShardsArePlaced: /readyz of a
// node whose view has a shard without a live owner is 503: creates sent
// right after "ready" must not meet shards being placed.
func TestAClusterNodeIsReadyOnceItsShardsArePlaced(t *testing.T) {
	node := &fakeNode{unplaced: true}
	w := newWorldWith(t, map[string]int{"default": 1}, func(_ *actors.Config, o *httpapi.Options) {
		o.Cluster, o.ClusterToken = node, "cluster-secret"
	})
	st, v, _ := w.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Contains(t, v["error"].(map[string]any)["message"], "still being placed")
	node.mu.Lock()
	node.unplaced = false
	node.mu.Unlock()
	st, _, _ = w.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusOK, st)
}
