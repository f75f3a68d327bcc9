package actors

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

type kind string

const (
	kindMarquee kind = "marquee"
	kindPool    kind = "pool"
	kindEnv     kind = "environment"
	kindBranch  kind = "branch"
)

type key struct {
	kind kind
	id   string
}

// routed is a message for an entity, addressed by kind and id rather than
// by PID, so that the registry alone decides activation.
type routed struct {
	key key
	msg any
}

// entry is the registry's record of one live entity actor.
type entry struct {
	key   key
	pid   *actor.PID
	inbox atomic.Int64 // messages routed and not yet handled
	// epoch is the shard epoch the running instance loaded its record
	// under (0 on a single node, or if the shard was not owned then): on
	// a cluster node it may write, and answer, only while it still is
	// the shard's epoch (runner.commit, System.confirmed).
	epoch atomic.Int64
	// commits counts the instance's fenced commits: one made after a
	// request was sent proves the instance still held its shard while the
	// request was handled, so its answer needs no confirmation (confirmed).
	commits atomic.Int64
	// lastRouted is when a message was last routed to the entity (unix
	// nanoseconds, the System clock): the idle sweep's measure.
	lastRouted atomic.Int64
	// passivating: the registry is stopping this actor for idleness; new
	// messages wait in buffer and reactivate the entity once it is gone.
	passivating bool
	buffer      []any
	restart     struct {
		times   []time.Time
		total   int
		lastErr string
		lastAt  time.Time
		parked  bool
		// pending: a restart after a failure whose new instance has not
		// started yet; it reconciles with AfterFailure.
		pending bool
	}
}

// handled counts down one message routed to the entity. Actors defer it, so
// that a graceful stop never sees "nothing pending" while a handler is
// still starting an effect.
func (e *entry) handled(m *Metrics) {
	e.inbox.Add(-1)
	m.MailboxDepth.Dec()
}

type registryState struct {
	mu      sync.Mutex
	entries map[key]*entry
	byPID   map[string]*entry
}

// registry is the supervisor: it activates entity actors on demand and
// restarts crashed ones under boundedRestart.
type registry struct{ sys *System }

func (r *registry) Receive(ctx actor.Context) {
	st := r.sys.reg
	switch m := ctx.Message().(type) {
	case routed:
		r.deliver(ctx, m.key, m.msg)
	case passivate:
		// The actor found itself idle. It goes only if nothing was routed
		// to it since: the inbox count is the handshake with route(), which
		// counts under the same lock before sending directly.
		st.mu.Lock()
		e := st.entries[m.key]
		ok := e != nil && e.pid.Equal(m.pid) && !e.passivating && e.inbox.Load() == 0
		if ok {
			e.passivating = true
		}
		st.mu.Unlock()
		if ok {
			r.sys.cfg.Metrics.Passivations.WithLabelValues(string(m.key.kind)).Inc()
			ctx.Stop(m.pid)
		}
	case *actor.Terminated:
		st.mu.Lock()
		e := st.byPID[m.Who.Id]
		var buffered []any
		if e != nil {
			delete(st.byPID, m.Who.Id)
			if !e.restart.parked {
				delete(st.entries, e.key)
			}
			buffered, e.buffer = e.buffer, nil
			r.sys.cfg.Metrics.MailboxDepth.Sub(float64(e.inbox.Load()))
		}
		st.mu.Unlock()
		// Messages that raced the passivation reactivate the entity at
		// once, in the order they came, before anything routed later.
		for _, msg := range buffered {
			r.deliver(ctx, e.key, msg)
		}
	case listActors:
		m.reply <- r.sys.reg.snapshot()
	}
}

// deliver sends msg to the entity's actor, activating it if needed.
func (r *registry) deliver(ctx actor.Context, k key, msg any) {
	st := r.sys.reg
	if !r.sys.owns(k.kind, k.id) {
		// Never a decision from a non-owner (C4): the shard moved after
		// the message was routed.
		answerErr(msg, fmt.Errorf("%w: %s %s is not owned by this node", errs.Moving, k.kind, k.id))
		return
	}
	st.mu.Lock()
	e := st.entries[k]
	st.mu.Unlock()
	if e == nil {
		if !r.sys.mayExist(k, msg) {
			answerErr(msg, fmt.Errorf("%w: %s %s", ErrNotFound, k.kind, k.id))
			return
		}
		e = r.spawn(ctx, k)
	}
	if e.restart.parked {
		answerErr(msg, fmt.Errorf("%w: %s %s is parked after repeated failures", ErrUnavailable, k.kind, k.id))
		return
	}
	st.mu.Lock()
	if e.passivating {
		const maxBuffered = MaxInbox
		if len(e.buffer) >= maxBuffered {
			st.mu.Unlock()
			answerErr(msg, fmt.Errorf("%w: %s %s is reactivating", ErrOverloaded, k.kind, k.id))
			return
		}
		e.buffer = append(e.buffer, msg)
		st.mu.Unlock()
		return
	}
	e.inbox.Add(1)
	e.lastRouted.Store(r.sys.cfg.Clock.Now().UnixNano())
	st.mu.Unlock()
	r.sys.cfg.Metrics.MailboxDepth.Inc()
	ctx.Send(e.pid, msg)
}

func (r *registry) spawn(ctx actor.Context, k key) *entry {
	e := &entry{key: k}
	st := r.sys.reg
	// The entry is in the table before the actor starts, so the actor finds
	// it by its name; route() sends directly only once pid is set.
	st.mu.Lock()
	st.entries[k] = e
	st.mu.Unlock()
	pid, err := ctx.SpawnNamed(r.sys.props[k.kind], string(k.kind)+"/"+k.id)
	if err != nil {
		panic(fmt.Sprintf("registry: spawn %s %s: %v", k.kind, k.id, err)) // names are unique by construction
	}
	st.mu.Lock()
	e.pid = pid
	if st.byPID == nil {
		st.byPID = map[string]*entry{}
	}
	st.byPID[pid.Id] = e
	st.mu.Unlock()
	r.sys.cfg.Metrics.Actors.WithLabelValues(string(k.kind)).Inc()
	return e
}

// entityOf finds the registry entry of a spawned entity actor from its
// name ("registry/<kind>/<id>"). One shared Props per kind keeps a spawn
// from allocating its own; a restart makes a fresh instance that finds its
// entry the same way.
func (s *System) entityOf(self *actor.PID, k kind) (string, *entry) {
	prefix := s.registry.Id + "/" + string(k) + "/"
	if !strings.HasPrefix(self.Id, prefix) {
		panic("registry: unexpected actor name " + self.Id)
	}
	id := self.Id[len(prefix):]
	epoch := s.epochOf(k, id) // the instance loads its record now, under this epoch
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	e := s.reg.entries[key{k, id}]
	if e != nil {
		e.epoch.Store(epoch)
	}
	return id, e
}

// mayExist keeps the registry from activating actors for entities that were
// never created: only a create may activate an absent marquee or
// environment.
func (s *System) mayExist(k key, msg any) bool {
	switch msg.(type) {
	case cmdCreate, envCreate, envReserve:
		return true
	}
	var exists bool
	var err error
	switch k.kind {
	case kindMarquee:
		exists, err = s.cfg.Store.MarqueeExists(k.id)
	case kindEnv:
		exists, err = s.cfg.Store.EnvExists(k.id)
	default:
		return true // pools and branches exist by configuration or on first use
	}
	// A read error is not "absent": the actor loads and reports it.
	return exists || err != nil
}

func isNotFound(err error) bool { return errors.Is(err, persistence.ErrNotFound) }

// ActorInfo is one line of GET /v1/actors.
type ActorInfo struct {
	Kind        string    `json:"kind"`
	ID          string    `json:"id"`
	Mailbox     int64     `json:"mailbox"`
	Restarts    int       `json:"restarts"`
	Parked      bool      `json:"parked"`
	LastFailure string    `json:"last_failure,omitempty"`
	LastFailAt  time.Time `json:"last_failure_at,omitzero"`
}

type listActors struct{ reply chan<- []ActorInfo }

// passivate is an idle actor asking the registry to stop it.
type passivate struct {
	key key
	pid *actor.PID
}

func (st *registryState) snapshot() []ActorInfo {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]ActorInfo, 0, len(st.entries))
	for _, e := range st.entries {
		out = append(out, ActorInfo{Kind: string(e.key.kind), ID: e.key.id, Mailbox: e.inbox.Load(), Restarts: e.restart.total,
			Parked: e.restart.parked, LastFailure: e.restart.lastErr, LastFailAt: e.restart.lastAt})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Actors lists live actors by kind with mailbox length, restarts and last
// failure.
func (s *System) Actors() []ActorInfo {
	reply := make(chan []ActorInfo, 1)
	s.as.Root.Send(s.registry, listActors{reply: reply})
	select {
	case a := <-reply:
		return a
	case <-time.After(s.cfg.AskTimeout):
		return s.reg.snapshot()
	}
}

// boundedRestart is the project's supervisor strategy: restart a crashed
// entity actor (it reloads its snapshot and reconciles), but after
// RestartLimit failures within RestartWindow park it (stopped, shown as
// failing in /v1/actors) instead of restarting forever. It reads the
// System's clock, not the wall clock protoactor's own strategies use.
type boundedRestart struct{ sys *System }

func (b *boundedRestart) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	if h := b.sys.cfg.Sim; h != nil && h.ActorFailed != nil {
		h.ActorFailed(child.Id, reason)
	}
	st := b.sys.reg
	now := b.sys.cfg.Clock.Now()
	st.mu.Lock()
	e := st.byPID[child.Id]
	if e == nil {
		st.mu.Unlock()
		sup.StopChildren(child)
		return
	}
	e.restart.total++
	e.restart.lastErr = fmt.Sprint(reason)
	e.restart.lastAt = now
	recent := e.restart.times[:0]
	for _, t := range e.restart.times {
		if now.Sub(t) < b.sys.cfg.RestartWindow {
			recent = append(recent, t)
		}
	}
	e.restart.times = append(recent, now)
	park := len(e.restart.times) > b.sys.cfg.RestartLimit
	if park {
		e.restart.parked = true
	}
	st.mu.Unlock()
	b.sys.cfg.Metrics.Restarts.WithLabelValues(string(e.key.kind)).Inc()
	b.sys.log.Error("actor failed", "kind", e.key.kind, "id", e.key.id, "reason", fmt.Sprint(reason), "parked", park)
	if park {
		sup.StopChildren(child)
		return
	}
	st.mu.Lock()
	e.restart.pending = true
	st.mu.Unlock()
	sup.RestartChildren(child)
}
