package actors

import (
	"context"
)

// A cluster node's side of the System (C2-C5): shards taken and let go,
// and the messages other nodes send. Fences, confirmations and the wire
// form of cross-entity events are the runtime's.

// AcquireShard recovers a shard this node now owns, as a single node
// recovers at start: its pools are rebuilt, and its entities
// with a wake-index entry are woken, due ones now.
func (s *System) AcquireShard(shard int) {
	if err := s.recoverShard(shard, false); err != nil {
		s.log.Error("recover shard", "shard", shard, "err", err)
	}
}

// ReleaseShard stops the actors of a shard this node no longer owns.
func (s *System) ReleaseShard(shard int) { s.rt.ReleaseShard(shard) }

// DeliverRemote takes a message another node sent (POST
// /v1/internal/messages).
func (s *System) DeliverRemote(ctx context.Context, b []byte) ([]byte, error) {
	return s.rt.DeliverRemote(ctx, b)
}
