package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// The nodes' messages to each other (C4): a cross-entity message for a
// shard another node owns is POSTed to that node's /v1/internal/messages
// with the cluster token. Delivery is at least once: retried while the
// shard moves or the owner does not answer, for up to deliverFor, after
// which the receiving entity's own recovery asks again (A6).

const (
	deliverFor      = time.Minute
	maxInFlight     = 1024
	maxPeerAnswer   = 64 << 10
	internalPath    = "/v1/internal/messages"
	firstRetryAfter = 50 * time.Millisecond
)

// SetPeers enables messages between nodes, authenticated by token.
func (n *Node) SetPeers(token string) {
	n.token = token
	n.client = &http.Client{Timeout: 10 * time.Second}
	n.inflight = make(chan struct{}, maxInFlight)
}

// Shard is the shard of an entity (actors.Cluster).
func (n *Node) Shard(kind, id string) int { return ShardOf(kind, id) }

// Fence is the fence of a write in shard (actors.Cluster).
func (n *Node) Fence(shard int) (persistence.Fence, error) { return n.table.Fence(shard) }

// Owns reports whether this node may act for shard now.
func (n *Node) Owns(shard int) bool { return n.table.Owns(shard) }

// Deliver sends body to the owner of shard, at least once, in the
// background.
func (n *Node) Deliver(shard int, body []byte) {
	select {
	case n.inflight <- struct{}{}:
	default:
		n.log.Error("cluster: too many messages in flight; dropped (the entity asks again when it recovers)", "shard", shard)
		return
	}
	go func() {
		defer func() { <-n.inflight }()
		ctx, cancel := context.WithTimeout(context.Background(), deliverFor)
		defer cancel()
		if _, err := n.Ask(ctx, shard, body); err != nil {
			n.log.Error("cluster: message not delivered", "shard", shard, "err", err)
		}
	}()
}

// Ask sends body to the owner of shard and returns its answer, trying
// again (50 ms doubling to a second) while the shard moves or its owner
// does not answer, until ctx ends.
func (n *Node) Ask(ctx context.Context, shard int, body []byte) ([]byte, error) {
	wait := firstRetryAfter
	for {
		ans, retry, err := n.post(ctx, shard, body)
		if err == nil || !retry {
			return ans, err
		}
		if clock.Sleep(ctx, n.clock, wait) != nil {
			return nil, fmt.Errorf("%w: shard %d: %v", errs.Moving, shard, err)
		}
		wait = min(2*wait, time.Second)
	}
}

func (n *Node) post(ctx context.Context, shard int, body []byte) (ans []byte, retry bool, err error) {
	if n.client == nil {
		return nil, false, fmt.Errorf("%w: this node has no peers configured", errs.Unavailable)
	}
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
