package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/internal/cluster"
)

// ClusterNode is this process's place in a cluster; nil in
// Options is a single node.
type ClusterNode interface {
	Name() string
	View() cluster.View
	// OwnerURL is the owner of shard and its URL; "" while it moves.
	OwnerURL(shard int) (owner, url string)
	Drain(ctx context.Context) error
	Owns(shard int) bool
}

// forwardedBy marks a request one node passed to another: a node that
// receives one for a shard it does not own answers 503 instead of passing
// it on, so a request makes at most one hop and never loops.
const forwardedBy = "X-Warden-Forwarded-By"

// maxForwardedAnswer bounds the owner's answer a forwarding node relays.
const maxForwardedAnswer = 1 << 20

// entityOf names the entity a request acts on: its kind (as the actor
// system spells it) and id, from the path or, for creates and callbacks,
// from the body; ok false when the request names none (it is answered
// where it is, with its 400).
type entityOf func(r *http.Request, p httprouter.Params, body []byte) (kind, id string, ok bool)

func pathEntity(kind, param string) entityOf {
	return func(_ *http.Request, p httprouter.Params, _ []byte) (string, string, bool) {
		return kind, p.ByName(param), p.ByName(param) != ""
	}
}

func bodyEntity(kind string, idOf func([]byte) (string, error)) entityOf {
	return func(_ *http.Request, _ httprouter.Params, body []byte) (string, string, bool) {
		id, err := idOf(body)
		return kind, id, err == nil && id != ""
	}
}

// admit authenticates a request before it is forwarded: an
// anonymous or unknown caller gets its 401 here, learns nothing about
// which node owns what, and has nothing relayed for it.
type admit func(r *http.Request, body []byte) *authFail

// admitOperator admits an operator who may change things.
func (s *Server) admitOperator(r *http.Request, _ []byte) *authFail {
	_, fail := s.operator(r, true)
	return fail
}

// admitCallback admits a callback whose credential verifies.
func (s *Server) admitCallback(r *http.Request, body []byte) *authFail {
	_, fail := s.authenticateCallback(r, body)
	return fail
}

// owned wraps a route that makes a decision for one entity: on a cluster
// node that does not own the entity it authenticates the request, then
// forwards it, as it came (the owner authenticates it again), to the
// owner; while the shard has no owner it answers 503 with Retry-After.
// On a single node it is the handler itself.
func (s *Server) owned(ent entityOf, ok admit, h httprouter.Handle) httprouter.Handle {
	node := s.opts.Cluster
	if node == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		var body []byte
		if r.Method == http.MethodPost {
			b, ok := readBody(w, r, true)
			if !ok {
				return
			}
			body = b
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		kind, id, named := ent(r, p, body)
		if !named {
			h(w, r, p)
			return
		}
		shard := cluster.ShardOf(kind, id)
		if node.Owns(shard) {
			h(w, r, p)
			return
		}
		if fail := ok(r, body); fail != nil {
			fail.write(w)
			return
		}
		owner, url := s.ownerOf(r.Context(), shard)
		switch {
		case r.Header.Get(forwardedBy) != "":
			s.writeErr(w, fmt.Errorf("%w: %s %s: forwarded by %s to %s, which does not own shard %d (now %q); one hop only",
				errs.Moving, kind, id, r.Header.Get(forwardedBy), node.Name(), shard, owner))
		case url == "":
			s.writeErr(w, fmt.Errorf("%w: %s %s: shard %d is moving", errs.Moving, kind, id, shard))
		default:
			s.forward(w, r, body, url, kind, id)
		}
	}
}

// movingWait bounds how long a request waits for a moving shard's new
// owner before it is answered 503 (creates sent right after the
// nodes reported ready met shards still being placed). A move takes a
// tick or two (100 ms each); a dead owner takes the failure detector's
// second, by which time the caller had better retry.
const movingWait = 2 * time.Second

// ownerOf is the owner of shard and its URL, waiting up to movingWait for
// one while the shard moves.
func (s *Server) ownerOf(ctx context.Context, shard int) (string, string) {
	node := s.opts.Cluster
	owner, url := node.OwnerURL(shard)
	clk := s.sys.Clock()
	for deadline := clk.Now().Add(movingWait); url == "" && clk.Now().Before(deadline); {
		if clock.Sleep(ctx, clk, 50*time.Millisecond) != nil {
			return owner, url
		}
		if node.Owns(shard) {
			return node.Name(), ""
		}
		owner, url = node.OwnerURL(shard)
	}
	return owner, url
}

// placed says whether every shard has a live owner in this node's view:
// a cluster node is ready only then.
func placed(v cluster.View) bool {
	alive := map[string]bool{}
	for _, m := range v.Members {
		alive[m.Name] = m.Alive
	}
	if len(v.Shards) != cluster.Shards {
		return false
	}
	for _, sh := range v.Shards {
		if sh.Owner == "" || !alive[sh.Owner] {
			return false
		}
	}
	return true
}

// peerTimeout bounds a forwarded request: loopback or LAN, so short; an
// owner that does not answer in time is a shard about to move.
const peerTimeout = 15 * time.Second

// forward relays the request to the owner and its answer back. A transport
// failure has an unknown outcome: the caller hears 503 and retries with
// the same delivery id, which the owner deduplicates.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, body []byte, ownerURL, kind, id string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimRight(ownerURL, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.writeErr(w, fmt.Errorf("%w: %s %s: %v", errs.Moving, kind, id, err))
		return
	}
	for name, vals := range r.Header {
		req.Header[name] = vals
	}
	req.Header.Set(forwardedBy, s.opts.Cluster.Name())
	resp, err := s.peers.Do(req)
	if err != nil {
		s.writeErr(w, fmt.Errorf("%w: %s %s: its owner did not answer", errs.Moving, kind, id))
		return
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedAnswer))
	if err != nil {
		s.writeErr(w, fmt.Errorf("%w: %s %s: its owner's answer was cut off", errs.Moving, kind, id))
		return
	}
	for _, h := range []string{"Content-Type", "Retry-After", "Location"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	s.sys.Metrics().Forwarded.WithLabelValues(kind).Inc()
	w.WriteHeader(resp.StatusCode) // the owner's answer, relayed: its status came from its own table
	_, _ = w.Write(ans)
}

// clusterView is GET /v1/cluster.
func (s *Server) clusterView(w http.ResponseWriter, _ *http.Request, _ httprouter.Params, _ Operator) {
	if s.opts.Cluster == nil {
		refuse(w, notFound, "this warden is a single node (started without --node)")
		return
	}
	writeJSON(w, http.StatusOK, s.opts.Cluster.View())
}

// drain is POST /v1/cluster/drain: this node hands its shards over, then
// the process stops.
func (s *Server) drain(w http.ResponseWriter, r *http.Request, _ httprouter.Params, op Operator) {
	if s.opts.Cluster == nil {
		refuse(w, notFound, "this warden is a single node (started without --node)")
		return
	}
	if !s.emptyBody(w, r) {
		return
	}
	if err := s.opts.Cluster.Drain(r.Context()); err != nil {
		s.writeErr(w, fmt.Errorf("%w: drain: %v", errs.Unavailable, err))
		return
	}
	s.log.Info("drain requested", "node", s.opts.Cluster.Name(), "by", op.Name)
	writeJSON(w, http.StatusAccepted, s.opts.Cluster.View())
}

// emptyBody reads a body that must be absent or an empty JSON object (an
// action that takes no arguments), refusing anything else.
func (s *Server) emptyBody(w http.ResponseWriter, r *http.Request) bool {
	body, ok := readBody(w, r, true)
	if !ok {
		return false
	}
	if err := decodeEmpty(body); err != nil {
		s.badRequest(w, err)
		return false
	}
	return true
}

// internalMessage is POST /v1/internal/messages: a cross-entity message
// from another node, authenticated by the cluster's shared token.
func (s *Server) internalMessage(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.opts.Cluster == nil || s.opts.ClusterToken == "" {
		refuse(w, notFound, "no such endpoint")
		return
	}
	got := sha256.Sum256([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
	if subtle.ConstantTimeCompare(s.clusterToken[:], got[:]) != 1 {
		refuse(w, unauthenticated, "a cluster token is required")
		return
	}
	body, ok := readBody(w, r, false)
	if !ok {
		return
	}
	ans, err := s.sys.DeliverRemote(r.Context(), body)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeRaw(w, http.StatusOK, ans)
}
