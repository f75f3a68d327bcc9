package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
)

// answerErr answers a routed message that will never reach an actor.
func answerErr(msg any, err error) {
	switch m := msg.(type) {
	case cmdCreate:
		m.reply <- err
	case cmdOperator:
		m.reply <- err
	case cmdCallback:
		m.reply <- err
	case cmdActivate:
		m.reply <- err
	case poolGet:
		m.reply <- err
	case poolPing:
		m.reply <- err
	case envCreate:
		m.reply <- err
	case envCommand:
		m.reply <- err
	case envReserve:
		m.reply <- err
	case branchNext:
		m.reply <- err
	}
}

// CallbackRequest is an authenticated, decoded webhook.
type CallbackRequest struct {
	MarqueeID string
	// DeliveryID is the Webhook-Id (M20); with MarqueeID it keys the
	// dedup record (T5). Empty: no deduplication.
	DeliveryID string
	// BodyHash is the SHA-256 of the body as sent: the same delivery id
	// with another body is refused (T5).
	BodyHash [32]byte
	Auth     CallbackAuth
	Callback marquee.Callback
}

// CallbackAuth is what the HTTP layer established about the sender (T1-T4).
type CallbackAuth struct {
	// Mode is scoped, shared, standard-webhooks or github-oidc; it goes
	// into the history.
	Mode string
	// OIDC: the token's run id (0 if it had none) and whether a scoped
	// credential vouched for this marquee and generation too (T4). The
	// run is checked against the marquee's recorded runs in its actor.
	OIDC          bool
	RunID         uint64
	ScopedVouched bool
}

// Callback delivers an authenticated, decoded webhook to its marquee and
// returns the exact answer, after the decision is durable (I5).
func (s *System) Callback(ctx context.Context, req CallbackRequest) (CallbackAnswer, error) {
	r, err := s.ask(ctx, kindMarquee, req.MarqueeID, func(reply chan<- any) any {
		return cmdCallback{req: req, reply: reply}
	})
	if err != nil {
		return CallbackAnswer{}, err
	}
	return r.(CallbackAnswer), nil
}

// Create creates a marquee; for a tutorial one it answers after the pool's
// decision is durable (A10).
func (s *System) Create(ctx context.Context, c marquee.Create) (marquee.State, error) {
	if !marquee.ValidID(c.ID) {
		return marquee.State{}, fmt.Errorf("%w: id %q must match [a-z0-9][a-z0-9-]{0,62}", marquee.ErrInvalid, c.ID)
	}
	if c.Kind == marquee.Tutorial {
		if c.Pool == "" {
			c.Pool = "default"
		}
		if _, ok := s.cfg.Pools[c.Pool]; !ok {
			return marquee.State{}, fmt.Errorf("%w: pool %q is not configured", marquee.ErrInvalid, c.Pool)
		}
	}
	if err := s.newWork(); err != nil {
		return marquee.State{}, err
	}
	r, err := s.ask(ctx, kindMarquee, c.ID, func(reply chan<- any) any { return cmdCreate{create: c, reply: reply} })
	if err != nil {
		return marquee.State{}, err
	}
	return r.(marquee.State), nil
}

// Command runs an operator command (redeploy, destroy, disable, enable).
func (s *System) Command(ctx context.Context, id string, ev marquee.Event) (marquee.State, error) {
	if _, redeploy := ev.(marquee.Redeploy); redeploy {
		if err := s.newWork(); err != nil {
			return marquee.State{}, err // a new attempt is new work (S9)
		}
	}
	r, err := s.ask(ctx, kindMarquee, id, func(reply chan<- any) any { return cmdOperator{ev: ev, reply: reply} })
	if err != nil {
		return marquee.State{}, err
	}
	return r.(marquee.State), nil
}

// Marquee reads a marquee's last committed snapshot. A reaped marquee's
// tombstone is returned like any other state (O3): only an id that never
// existed is not found.
func (s *System) Marquee(id string) (marquee.State, error) {
	rec, err := s.cfg.Store.LoadMarquee(id)
	if err != nil {
		if isNotFound(err) {
			return marquee.State{}, fmt.Errorf("%w: marquee %s", ErrNotFound, id)
		}
		return marquee.State{}, err
	}
	return rec.State, nil
}

// Pool returns a pool's view from its actor.
func (s *System) Pool(ctx context.Context, name string) (PoolView, error) {
	if _, ok := s.cfg.Pools[name]; !ok {
		return PoolView{}, fmt.Errorf("%w: pool %s", ErrNotFound, name)
	}
	if !s.owns(kindPool, name) || s.cfg.Store.Health().ReadOnly() != nil {
		// Another node's pool (C4), or any pool of a read-only store (S4):
		// its last committed state, read from the store, as every other
		// read is.
		pool, bad, err := rebuildPool(s.cfg.Store, name, s.cfg.Pools[name])
		if err != nil {
			return PoolView{}, fmt.Errorf("%w: pool %s: %v", ErrUnavailable, name, err)
		}
		return poolView(name, pool, bad), nil
	}
	r, err := s.ask(ctx, kindPool, name, func(reply chan<- any) any { return poolGet{reply: reply} })
	if err != nil {
		return PoolView{}, err
	}
	return r.(PoolView), nil
}

// Pools returns every configured pool, by name.
func (s *System) Pools(ctx context.Context) ([]PoolView, error) {
	names := s.poolNames()
	out := make([]PoolView, 0, len(names))
	for _, n := range names {
		v, err := s.Pool(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// IsUnavailable reports whether err means "try again later".
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// Activate makes a marquee's actor live (loading its snapshot and
// reconciling) without changing anything: a warm-up for operators and the
// measure of activation latency.
func (s *System) Activate(ctx context.Context, id string) error {
	_, err := s.ask(ctx, kindMarquee, id, func(reply chan<- any) any { return cmdActivate{reply: reply} })
	return err
}

// Live is the number of live entity actors of every kind.
func (s *System) Live() int {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return len(s.reg.entries)
}

// CreateEnvironment records a requested environment (E1) and starts its
// lifecycle.
func (s *System) CreateEnvironment(ctx context.Context, c environment.Create) (environment.Env, error) {
	if err := c.Validate(); err != nil {
		return environment.Env{}, err // before a branch generation is spent on it
	}
	if err := s.newWork(); err != nil {
		return environment.Env{}, err
	}
	// Claim the id first: a create refused as a duplicate (or racing
	// another create of the same id) spends no route generation.
	if _, err := s.ask(ctx, kindEnv, c.ID, func(reply chan<- any) any { return envReserve{reply: reply} }); err != nil {
		return environment.Env{}, err
	}
	// The branch's next route generation, given out in order (a number a
	// create that failed after this point used is simply skipped; the
	// order is what matters).
	g, err := s.ask(ctx, kindBranch, c.Branch, func(reply chan<- any) any { return branchNext{reply: reply} })
	if err != nil {
		s.route(kindEnv, c.ID, envUnreserve{})
		return environment.Env{}, err
	}
	c.Generation = g.(uint64)
	r, err := s.ask(ctx, kindEnv, c.ID, func(reply chan<- any) any { return envCreate{create: c, reply: reply} })
	if err != nil {
		return environment.Env{}, err
	}
	return r.(environment.Env), nil
}

// EnvironmentCommand runs a removal or a manual action (E11, E16).
func (s *System) EnvironmentCommand(ctx context.Context, id string, ev environment.Event) (environment.Env, error) {
	r, err := s.ask(ctx, kindEnv, id, func(reply chan<- any) any { return envCommand{ev: ev, reply: reply} })
	if err != nil {
		return environment.Env{}, err
	}
	return r.(environment.Env), nil
}

// Environment reads an environment's last committed record.
func (s *System) Environment(id string) (environment.Env, error) {
	rec, err := s.cfg.Store.LoadEnv(id)
	if err != nil {
		if isNotFound(err) {
			return environment.Env{}, fmt.Errorf("%w: environment %s", ErrNotFound, id)
		}
		return environment.Env{}, err
	}
	return rec.Env, nil
}

// EnvMachine is the environment machine (its Actions shape views).
func (s *System) EnvMachine() environment.Machine { return s.cfg.Env.Machine }
