package sim

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/persistence"
)

// Planted bugs: each disables one guard, to prove the simulator sees it.
// They live here, as wrappers around the pure steps (and one store
// option), never inside the rules: production code has no branch for them.
const (
	PlantGenerationCheck     = "generation-check"      // M10 off: a superseded run's deployed is trusted
	PlantSecondNull          = "second-null"           // M16 off: one null tears a live host down
	PlantVeto                = "veto"                  // M18 off: live chats do not preserve a host
	PlantNoLimitCheck        = "admission-check"       // A3 off: a slot is reserved without the check
	PlantAnswerBeforePersist = "persist-before-answer" // A10/I5 off: answered before the write is durable
	PlantLeaseFencing        = "lease-fencing"         // E7 off: a stale lease generation commits
	PlantRouteCAS            = "route-cas"             // E8 off: activation over a newer route generation
	PlantBlindWake           = "blind-wake"            // E20 off: a visit marks a sleeping preview ready without starting or observing it
	// The cluster's, each a wrapper around what a node is given (its
	// store's service, its coordinator, its cluster, its transport, its
	// failure detector's probe), planted on cluster runs.
	PlantUnfencedCommit = "unfenced-commit"  // C3 off: a commit without the fence
	PlantStaleAnswer    = "stale-answer"     // C4 off: an answer that wrote nothing is sent unconfirmed
	PlantEarlyTakeover  = "early-takeover"   // C2 off: a shard taken without waiting for its holder's epoch to end
	PlantForwardRetry   = "forward-retry"    // C4 off: a forward whose answer was lost is sent again
	PlantLiveRevoke     = "live-revoke"      // C5 off: the failure detector revokes members that answer
	PlantUnguarded      = "unguarded-commit" // C14 off: a commit compares no entity guard, so one that lands late is overwritten
)

// Planted names each planted bug, the invariant expected to catch it, and
// the nodes it is planted on (0: a single node).
var Planted = []struct {
	Name      string
	Invariant string
	Nodes     int
}{
	{PlantGenerationCheck, "I1", 0},
	{PlantSecondNull, "I4", 0},
	{PlantVeto, "I3", 0},
	{PlantNoLimitCheck, "I7", 0},
	{PlantAnswerBeforePersist, "I5", 0},
	{PlantLeaseFencing, "I13", 0},
	{PlantRouteCAS, "I14", 0},
	{PlantBlindWake, "E20", 0},
	{PlantUnfencedCommit, "C3", 3},
	{PlantStaleAnswer, "C4", 3},
	{PlantEarlyTakeover, "C3", 3},
	{PlantForwardRetry, "C4", 3},
	{PlantLiveRevoke, "C5", 3},
	{PlantUnguarded, "S14", 3},
}

// plantedKV is a node's store's service under the planted bug: without
// the fence, a commit lands whoever holds the shard.
func plantedKV(plant string, kv persistence.KV) persistence.KV {
	switch plant {
	case PlantUnfencedCommit:
		return unfencedKV{kv}
	case PlantUnguarded:
		return unguardedKV{kv}
	}
	return kv
}

// unguardedKV drops every compare of an entity's guard: the shard's fence
// holds, but a commit whose answer was lost lands whenever it arrives.
type unguardedKV struct{ persistence.KV }

func (u unguardedKV) Txn(ctx context.Context, cmps []persistence.Compare, ops []persistence.KVOp) (int64, bool, error) {
	var kept []persistence.Compare
	for _, c := range cmps {
		if !strings.HasPrefix(c.Key, persistence.DataPrefix+persistence.GuardFamily) {
			kept = append(kept, c)
		}
	}
	return u.KV.Txn(ctx, kept, ops)
}

type unfencedKV struct{ persistence.KV }

func (u unfencedKV) Txn(ctx context.Context, _ []persistence.Compare, ops []persistence.KVOp) (int64, bool, error) {
	return u.KV.Txn(ctx, nil, ops)
}

// plantedCluster is what a node's actors are given of its cluster under
// the planted bug: an answer is never confirmed.
func plantedCluster(plant string, c actors.Cluster) actors.Cluster {
	if plant == PlantStaleAnswer {
		return unconfirmed{c}
	}
	return c
}

type unconfirmed struct{ actors.Cluster }

func (unconfirmed) Confirm(context.Context, int, int64) error { return nil }

// plantedCoordinator is a node's coordinator under the planted bug: a
// shard this node's rendezvous hashing gives it looks free while another
// still holds it, and taking it succeeds at the holder's epoch, so that
// both fence with it until the holder lets go.
func plantedCoordinator(plant string, c cluster.Coordinator) cluster.Coordinator {
	if plant == PlantEarlyTakeover {
		return &earlyTakeover{Coordinator: c, name: "", early: map[int]int64{}}
	}
	return c
}

type earlyTakeover struct {
	cluster.Coordinator
	name  string
	lease int64
	early map[int]int64
}

func (t *earlyTakeover) Register(ctx context.Context, m cluster.Member, lease int64) error {
	t.name, t.lease = m.Name, lease
	return t.Coordinator.Register(ctx, m, lease)
}

func (t *earlyTakeover) Holders(ctx context.Context) (cluster.Holders, error) {
	hs, err := t.Coordinator.Holders(ctx)
	if err != nil {
		return hs, err
	}
	ms, err := t.Coordinator.Members(ctx)
	if err != nil {
		return hs, err
	}
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	for s := 0; s < cluster.Shards; s++ {
		h, held := hs.Held(s)
		switch epoch, took := t.early[s]; {
		case took && held && h.Epoch == epoch:
			hs[s] = cluster.Holder{Owner: t.name, Epoch: epoch, Lease: t.lease}
		case took:
			delete(t.early, s)
		case held && h.Owner != t.name && cluster.Owner(s, names) == t.name:
			hs[s] = cluster.Holder{}
		}
	}
	return hs, nil
}

func (t *earlyTakeover) Acquire(ctx context.Context, shard int, owner string, lease int64) (int64, bool, error) {
	hs, err := t.Coordinator.Holders(ctx)
	if err != nil {
		return 0, false, err
	}
	if h, held := hs.Held(shard); held && h.Owner != owner {
		t.early[shard] = h.Epoch
		return h.Epoch, true, nil
	}
	return t.Coordinator.Acquire(ctx, shard, owner, lease)
}

// plantedProbe is a node's failure detector's probe under the planted bug:
// no member ever answers.
func plantedProbe(plant string, probe func(context.Context, string) bool) func(context.Context, string) bool {
	if plant == PlantLiveRevoke {
		return func(context.Context, string) bool { return false }
	}
	return probe
}

// plantedSteps are the machines' steps of cfg with the planted guard
// disabled in one (none: the System runs each machine's own).
func plantedSteps(plant string, cfg actors.Config) actors.Steps {
	switch plant {
	case PlantGenerationCheck, PlantSecondNull, PlantVeto:
		return actors.Steps{Marquee: plantMarquee(plant, cfg.Machine.Step)}
	case PlantNoLimitCheck:
		return actors.Steps{Pool: plantNoLimitCheck(admission.Step)}
	case PlantLeaseFencing, PlantRouteCAS, PlantBlindWake:
		return actors.Steps{Env: plantEnv(plant, cfg.Env.Machine.Step)}
	}
	return actors.Steps{}
}

// plantedStore is the store's options under the planted bug: without
// fsync, "applied" is answered before the write is durable, and a crash
// loses it.
func plantedStore(plant string, o persistence.Options) persistence.Options {
	o.NoSync = plant == PlantAnswerBeforePersist
	return o
}

func plantMarquee(plant string, step actors.MarqueeStep) actors.MarqueeStep {
	return func(s marquee.State, ev marquee.Event, now time.Time) (marquee.State, marquee.Outcome) {
		switch e := ev.(type) {
		case marquee.Callback:
			if plant == PlantGenerationCheck && e.Generation > 0 {
				// Whatever generation it names, it is taken for the current one.
				e.Generation = s.Generation
				return step(s, e, now)
			}
			if plant == PlantSecondNull && e.Verb == marquee.VerbNull && s.Lifecycle == marquee.Provisioned && !s.NullPending(now) {
				// The first null is taken as its own confirmation: the
				// pending-confirmation step happens and is forgotten.
				first, _ := step(s, e, now)
				return step(first, e, now)
			}
		case marquee.ChatsAnswered:
			if plant == PlantVeto && e.Err == "" {
				e.Live, e.Reachable = 0, 0 // live chats are not counted
				return step(s, e, now)
			}
		}
		return step(s, ev, now)
	}
}

// plantNoLimitCheck reserves a newcomer whatever the limit and the queue.
func plantNoLimitCheck(step actors.PoolStep) actors.PoolStep {
	return func(p admission.Pool, ev admission.Event, now time.Time) (admission.Pool, admission.Outcome) {
		a, ok := ev.(admission.Ask)
		if !ok || p.Lookup(a.Job).Status != admission.None {
			return step(p, ev, now)
		}
		limit, queued := p.Limit, p.Queued
		p.Limit, p.Queued = len(p.Reserved)+1, nil
		next, rd := step(p, ev, now)
		next.Limit, next.Queued = limit, append(append([]admission.Job(nil), queued...), next.Queued...)
		return next, rd
	}
}

func plantEnv(plant string, step actors.EnvStep) actors.EnvStep {
	return func(e environment.Env, ev environment.Event, now time.Time) (environment.Env, environment.Outcome) {
		switch x := ev.(type) {
		case environment.DriverAnswer:
			if plant == PlantRouteCAS {
				x.BranchNewest = 0 // a newer sibling does not supersede
				ev = x
			}
			a := e.Attempt
			if plant == PlantLeaseFencing && a != nil && a.ID == x.AttemptID {
				x.LeaseGeneration = a.Lease.Generation // any lease generation passes
				return step(e, x, now)
			}
			if plant == PlantRouteCAS && a != nil && a.Capability == environment.Route && x.Observation != nil && x.Observation.RouteTarget > e.Generation {
				// "Expect what is there": the route at a newer generation is
				// treated as the predecessor and activated over.
				target := x.Observation.RouteTarget
				o := *x.Observation
				o.RouteTarget = e.Generation - 1
				x.Observation = &o
				next, out := step(e, x, now)
				for i, eff := range out.Effects {
					if d, ok := eff.(environment.Do); ok && d.Capability == environment.Route {
						d.ExpectedRoute = target
						out.Effects[i] = d
					}
				}
				return next, out
			}
		case environment.Visited:
			if plant == PlantBlindWake && e.Asleep() && e.State == environment.Sleeping && e.Attempt == nil {
				// "It was ready before it slept": the wake's walk skipped.
				next, out := step(e, x, now)
				next.State, next.Attempt, out.Effects = environment.Ready, nil, nil
				return next, out
			}
		case environment.Advance:
			if plant == PlantRouteCAS {
				x.BranchNewest = 0
				return step(e, x, now)
			}
		case environment.AtRest:
			if plant == PlantRouteCAS {
				x.BranchNewest = 0
				return step(e, x, now)
			}
		case environment.Action:
			if plant == PlantRouteCAS {
				x.BranchNewest = 0
				return step(e, x, now)
			}
		}
		return step(e, ev, now)
	}
}

// FindPlanted runs seeds from 1 on the given nodes until one catches the
// planted bug, and returns that seed's result; limit bounds the search.
func FindPlanted(name string, nodes int, limit uint64) (SeedRun, uint64) {
	for seed := uint64(1); seed <= limit; seed++ {
		r := Check(Options{Seed: seed, Plant: name, Nodes: nodes})
		if r.Violation != nil {
			return r, seed
		}
	}
	return SeedRun{}, 0
}
