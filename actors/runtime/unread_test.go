package runtime

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/errs"
)

// unreachable is the counter kind whose record cannot be read while down
// is set: a store that did not answer (an etcd read that timed out), not
// one that found nothing.
type unreachable struct {
	counter
	down *atomic.Bool
}

func (k unreachable) Load(id string) (int, bool, error) {
	if k.down.Load() {
		return 0, false, errors.New("context deadline exceeded")
	}
	return k.counter.Load(id)
}

// TestS5AnActorWhoseRecordWasNotReadDecidesNothing: an actor that started
// while its record could not be read knows nothing of its entity. It
// neither answers "absent" nor lets a create write over the record; it
// answers unavailable, keeps an internal event for later, and acts on the
// record once a read succeeds.
func TestS5AnActorWhoseRecordWasNotReadDecidesNothing(t *testing.T) {
	down := &atomic.Bool{}
	rt, ents, _ := startKind(t, func(ents **Entities[int, int, counted]) Kind[int, int, counted] {
		return unreachable{counter: counter{ents: ents}, down: down}
	})
	ctx := context.Background()
	_, err := ents.Ask(ctx, "c", Request[int]{Mode: Create, Event: 0})
	require.NoError(t, err)
	rt.ReleaseShard(rt.Shard(ents.Key("c"))) // the next message starts a fresh actor, which loads
	down.Store(true)

	_, err = ents.Ask(ctx, "c", Request[int]{Mode: Read})
	require.ErrorIs(t, err, errs.Unavailable, "not an answer that the entity is absent")
	_, err = ents.Ask(ctx, "c", Request[int]{Mode: Create, Event: 0})
	require.ErrorIs(t, err, errs.Unavailable, "not a create over the record that exists")
	ents.Tell("c", 0) // an internal event: nobody would send it again
	_, err = ents.Ask(ctx, "c", Request[int]{Mode: Read})
	require.ErrorIs(t, err, errs.Unavailable, "handled after the event, in the mailbox's order")

	down.Store(false)
	rt.cfg.Clock.(*clock.Manual).Advance(time.Second) // its retry
	res, err := ents.Ask(ctx, "c", Request[int]{Mode: Read})
	require.NoError(t, err)
	require.True(t, res.Exists)
	require.Equal(t, 2, res.Record, "the create's step, then the internal event kept for later; no second create")
}
