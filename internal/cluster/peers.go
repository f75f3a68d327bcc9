package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// The nodes' messages to each other: a cross-entity message for a
// shard another node owns is POSTed to that node's /v1/internal/messages
// with the cluster token. Delivery is at least once: retried while the
// shard moves or the owner does not answer, for up to deliverFor, after
// which the receiving entity's own recovery asks again.

const (
	deliverFor      = time.Minute
	maxInFlight     = 1024
	maxPeerAnswer   = 64 << 10
	internalPath    = "/v1/internal/messages"
	firstRetryAfter = 50 * time.Millisecond
	// peerTimeout bounds one delivery attempt to another node.
	peerTimeout = 10 * time.Second
)

// SetPeers enables messages between nodes, authenticated by token.
func (n *Node) SetPeers(token string) {
	n.token = token
	n.inflight = make(chan struct{}, maxInFlight)
}

// Shard is the shard of an entity (actors.Cluster).
func (n *Node) Shard(kind, id string) int { return ShardOf(kind, id) }

// Fence is the fence of a write in shard (actors.Cluster).
func (n *Node) Fence(shard int) (persistence.Fence, error) { return n.table.Fence(shard) }

// Owned lists the shards the node owns now (runtime.Cluster): none when it
// starts; the hooks say when it takes each.
func (n *Node) Owned() []int { return n.table.Owned() }

// Owns reports whether this node may act for shard now.
func (n *Node) Owns(shard int) bool { return n.table.Owns(shard) }

// InFlight is how many messages this node is delivering to others now.
func (n *Node) InFlight() int { return len(n.inflight) }

// Deliver sends body to the owner of shard, at least once, beside the
// caller: tried again (50 ms doubling to a second, on the node's clock)
// while the shard moves or its owner does not answer, for up to
// deliverFor, after which the receiving entity's own recovery asks again
// (A6).
func (n *Node) Deliver(shard int, body []byte) {
	if n.inflight == nil {
		n.log.Error("cluster: this node has no peers configured; message dropped", "shard", shard)
		return
	}
	select {
	case n.inflight <- struct{}{}:
	default:
		n.log.Error("cluster: too many messages in flight; dropped (the entity asks again when it recovers)", "shard", shard)
		return
	}
	deadline := n.now().Add(deliverFor)
	n.spawn(func() { n.deliver(shard, body, deadline, firstRetryAfter) })
}

// deliver makes one attempt, and arms the next on the clock while the
// message may still get through.
func (n *Node) deliver(shard int, body []byte, deadline time.Time, wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	_, retry, err := n.post(ctx, shard, body)
	cancel()
	if err != nil && retry && n.now().Add(wait).Before(deadline) {
		n.clock.AfterFunc(wait, func() { n.deliver(shard, body, deadline, min(2*wait, time.Second)) })
		return
	}
	<-n.inflight
	if err != nil {
		n.log.Error("cluster: message not delivered", "shard", shard, "err", err)
	}
}

func (n *Node) post(ctx context.Context, shard int, body []byte) (ans []byte, retry bool, err error) {
	owner, url := n.OwnerURL(shard)
	if url == "" {
		return nil, true, fmt.Errorf("shard %d is moving", shard)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(url, "/")+internalPath, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+n.token)
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, true, fmt.Errorf("owner %s did not answer", owner)
	}
	defer resp.Body.Close()
	ans, err = io.ReadAll(io.LimitReader(resp.Body, maxPeerAnswer))
	switch {
	case err != nil:
		return nil, true, fmt.Errorf("owner %s: answer cut off", owner)
	case resp.StatusCode == http.StatusOK:
		return ans, false, nil
	case resp.StatusCode == http.StatusServiceUnavailable:
		return nil, true, fmt.Errorf("owner %s: %s", owner, ans)
	default:
		// A refusal (bad token, bad message) will not change on retry.
		return nil, false, fmt.Errorf("%w: owner %s refused the message: %d %s", errs.Unavailable, owner, resp.StatusCode, ans)
	}
}
