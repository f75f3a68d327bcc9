package actors

import (
	"context"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/runtime"
)

// A cluster node's side of the System (C2-C5): shards taken and let go,
// and the messages other nodes send. Fences, confirmations and the wire
// form of cross-entity events are the runtime's.

// AcquireShard recovers a shard this node now owns, as a single node
// recovers at start (A7, M23): its pools are rebuilt, and its entities
// with a wake-index entry are woken, due ones now.
func (s *System) AcquireShard(shard int) {
	for _, name := range s.poolNames() {
		if s.rt.Shard(s.pools.Key(name)) == shard {
			go func() {
				if _, err := s.pools.Ask(context.Background(), name, runtime.Request[admission.Event]{Mode: runtime.Read}); err != nil {
					s.log.Warn("recover pool", "pool", name, "err", err)
				}
			}()
		}
	}
	n, err := s.rt.ArmWakes(func(k runtime.Key) bool { return s.rt.Shard(k) == shard })
	if err != nil {
		s.log.Error("recover shard", "shard", shard, "err", err)
		return
	}
	s.log.Info("shard recovered", "shard", shard, "wakes", n)
}

// ReleaseShard stops the actors of a shard this node no longer owns.
func (s *System) ReleaseShard(shard int) { s.rt.ReleaseShard(shard) }

// DeliverRemote takes a message another node sent (POST
// /v1/internal/messages).
func (s *System) DeliverRemote(ctx context.Context, b []byte) ([]byte, error) {
	return s.rt.DeliverRemote(ctx, b)
}
