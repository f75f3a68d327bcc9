package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// The marquee kind: its machine on the runtime (its record and what a
// step writes are actors/record's), its effects, and the API that asks it.

type marquees = runtime.Entities[record.Marquee, marquee.Event, marquee.Outcome]

// marqueeKind is the marquee machine on the runtime; its record's writes
// are record.MarqueeWrites.
type marqueeKind struct {
	record.MarqueeWrites
	sys *System
	// step is the machine's Step (Config.Steps).
	step MarqueeStep
}

func (marqueeKind) Name() string { return marqueeKindName }

func (k marqueeKind) Load(id string) (record.Marquee, bool, error) {
	r, err := record.LoadMarquee(k.sys.cfg.Store, k.sys.cfg.Sealer, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return record.Marquee{}, false, nil
	}
	return r, err == nil, err
}

func (k marqueeKind) Stored(id string) (bool, error) {
	return k.sys.cfg.Store.Has(persistence.MarqueeKey(id))
}

// Step is the machine on the record; its outcome carries the messages to
// its pool that its effects ask for (A3, A5), and a create of a marquee
// that exists is refused: an id is never reused, even after a reap, and
// "already exists" alone sent a reader looking for a live marquee.
func (k marqueeKind) Step(rec record.Marquee, ev marquee.Event, now time.Time) (record.Marquee, marquee.Outcome) {
	m := k.sys.cfg.Machine
	var s marquee.State
	var rd marquee.Outcome
	if c, ok := ev.(marquee.Create); ok {
		if rec.State.ID != "" {
			return rec, marquee.Outcome{Err: existsError(rec)}
		}
		s, rd = m.Create(c, now)
	} else {
		s, rd = k.step(rec.State, ev, now)
	}
	rd.Messages = poolMessages(s.ID, rd)
	return record.NextMarquee(rec, s, rd, now), rd
}

func existsError(rec record.Marquee) error {
	if ts := rec.State.Tombstone; ts != nil {
		return fmt.Errorf("%w: marquee %s already exists as a tombstone (reaped %s); ids are not reused, pick another", errs.Conflict, rec.State.ID, ts.At.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: marquee %s already exists", errs.Conflict, rec.State.ID)
}

func (k marqueeKind) Run(h *marqueeHandle, next record.Marquee, rd marquee.Outcome) {
	k.sys.startMarqueeEffects(h, next.State, rd.Effects)
}

// poolMessages are the messages a step's effects ask of the marquee's
// pool: an admission's ask or its release, sent once the step is durable.
func poolMessages(id string, rd marquee.Outcome) []entity.Message {
	var msgs []entity.Message
	for _, eff := range rd.Effects {
		switch e := eff.(type) {
		case marquee.AskAdmission:
			msgs = append(msgs, entity.Message{Kind: poolKindName, ID: e.Pool, Event: admissionAsk(id)})
		case marquee.ReleaseAdmission:
			msgs = append(msgs, entity.Message{Kind: poolKindName, ID: e.Pool, Event: admissionRelease(id)})
		}
	}
	return msgs
}

// Activated reconciles, after a crash or restart, whatever was in flight
// before doing new work, then fires what is due.
func (k marqueeKind) Activated(h *marqueeHandle, afterFailure bool) {
	st := h.Record().State
	if afterFailure || marquee.NeedsReconcile(st) {
		h.Apply(marquee.Reconcile{AfterFailure: afterFailure})
	} else if pool, ok := marquee.SlotMayBeHeld(st); ok {
		// The owner before this one may have died between settling and
		// its release reaching the pool: a node does not know how
		// the last owner ended, so it says the release again.
		k.sys.pools.Tell(pool, admissionRelease(h.ID()))
	}
	k.fireDue(h)
}

func (k marqueeKind) Woken(h *marqueeHandle) { k.fireDue(h) }

// fireDue steps each due deadline as its own durable transition, so a
// deadline fires once: after it, the state no longer holds it.
func (k marqueeKind) fireDue(h *marqueeHandle) {
	if !h.Exists() {
		return
	}
	m := k.sys.cfg.Machine
	const maxPerWake = 16 // every deadline kind at most once or twice; a bound, not a loop forever
	stalled := false
	for range maxPerWake {
		due := m.Due(h.Record().State, h.Now())
		if len(due) == 0 {
			break
		}
		before := h.Record().State.UpdatedAt
		h.Apply(due[0])
		if stalled = h.Record().State.UpdatedAt.Equal(before); stalled {
			break // not applied (a failed write, retried after a back-off) or not really due
		}
	}
	wake := m.Wake(h.Record().State)
	if stalled && !wake.IsZero() && !wake.After(h.Now()) {
		// Waking again at once would find the same deadline and fail the
		// same way: a node whose store refused writes (etcd out of reach)
		// spun on it, arming a retry every turn (cluster seed 646).
		wake = h.Now().Add(stalledWakeAfter)
	}
	h.ArmWake(wake)
}

// stalledWakeAfter is how long a marquee whose due deadline could not be
// applied waits before looking again: the runtime's first retry of the
// failed write comes after as long.
const stalledWakeAfter = time.Second

// Admit: a GitHub token speaks for a run, and only the marquee knows which
// runs it dispatched; refused before anything is read or written (T4,
// T12).
func (k marqueeKind) Admit(rec record.Marquee, ev marquee.Event) error {
	cb, ok := ev.(marquee.Callback)
	if !ok || cb.OIDC == nil {
		return nil
	}
	if err := marquee.AuthorizeRun(rec.State, cb.OIDC.RunID, cb.Generation, cb.OIDC.ScopedVouched); err != nil {
		k.sys.log.Info("callback refused", "marquee", rec.State.ID, "auth", cb.Auth, "err", err)
		return err
	}
	return nil
}

// Holds: an operator's answer waits until the pool's decision is durable
// here.
func (marqueeKind) Holds(rec record.Marquee) bool {
	ad := rec.State.Admission
	return ad != nil && ad.Status == marquee.AdmissionAsking
}

// Idle: never with effects in flight whose results must come back to this
// instance.
func (marqueeKind) Idle(rec record.Marquee, exists bool) bool {
	return !exists || !marquee.NeedsReconcile(rec.State)
}

func (marqueeKind) Copy(rec record.Marquee) record.Marquee {
	rec.State = rec.State.Clone()
	return rec
}

// The events a pool on another node sends a marquee: its admission,
// or that its queue is full.
type marqueeWire struct {
	Type     string `json:"type"`
	Status   string `json:"status,omitempty"`
	Sequence uint64 `json:"sequence,omitempty"`
}

func (marqueeKind) EncodeEvent(ev marquee.Event) ([]byte, bool) {
	var w marqueeWire
	switch v := ev.(type) {
	case marquee.AdmissionDecided:
		w = marqueeWire{Type: "admission_decided", Status: string(v.Status), Sequence: v.Sequence}
	case marquee.DispatchFinished:
		if v != queueFull {
			return nil, false
		}
		w = marqueeWire{Type: "queue_full"}
	default:
		return nil, false
	}
	b, _ := json.Marshal(w)
	return b, true
}

func (marqueeKind) DecodeEvent(b []byte) (marquee.Event, error) {
	var w marqueeWire
	if err := strictJSON(b, &w); err != nil {
		return nil, err
	}
	switch {
	case w.Type == "queue_full":
		return queueFull, nil
	case w.Type == "admission_decided" && (w.Status == string(marquee.AdmissionReserved) || w.Status == string(marquee.AdmissionQueued)):
		return marquee.AdmissionDecided{Status: marquee.AdmissionStatus(w.Status), Sequence: w.Sequence}, nil
	}
	return nil, fmt.Errorf("marquee event %q (status %q)", w.Type, w.Status)
}

// queueFull is what a marquee hears from a pool whose queue is full: it
// cannot wait forever for a place it will not get, so it fails like a
// dispatch that cannot be made.
var queueFull = marquee.DispatchFinished{Outcome: marquee.DispatchConfiguration}

// --- effects --------------------------------------------------------------------

type marqueeHandle = runtime.Handle[record.Marquee, marquee.Event, marquee.Outcome]

// startMarqueeEffects runs each effect outside the mailbox. Results come
// back as events carrying the generation they were started for.
func (s *System) startMarqueeEffects(h *marqueeHandle, st marquee.State, effects []marquee.Effect) {
	id := h.ID()
	for _, eff := range effects {
		switch e := eff.(type) {
		case marquee.StartDispatch:
			req := driver.DispatchRequest{MarqueeID: id, Generation: e.Generation, Action: string(e.Action), CallbackURL: s.cfg.CallbackURL,
				CallbackToken: s.mintCallbackToken(id, e.Generation), Epoch: h.Epoch()}
			h.Go(runtime.Effect{Run: func(ctx context.Context) { s.dispatch(ctx, req) }})
		case marquee.StartBootstrap:
			if st.Connection == nil {
				panic("marquee: bootstrap without a connection") // the machine never asks for one
			}
			c := *st.Connection
			req := driver.BootstrapRequest{MarqueeID: id, Generation: e.Generation, Host: c.Host, Port: c.Port, User: c.User,
				SSHKey: c.SSHPrivateKey, FreeDomain: c.FreeDomain, ACMEDNS: c.ACMEDNS}
			h.Go(runtime.Effect{Run: func(ctx context.Context) { s.bootstrap(ctx, req, c) }})
		case marquee.AskChats:
			gen := e.Generation
			h.Go(runtime.Effect{Run: func(ctx context.Context) {
				start := s.cfg.Clock.Now()
				chats, err := s.cfg.ControlPlane.Chats(ctx, id)
				s.observeDriver("control_plane", start, err)
				res := marquee.ChatsAnswered{Generation: gen, Live: chats.Live, Reachable: chats.Reachable}
				if err != nil {
					res.Err = err.Error()
				}
				s.marquees.Tell(id, res)
			}})
		case marquee.TeardownPlaygrounds:
			gen := e.Generation
			h.Go(runtime.Effect{Run: func(ctx context.Context) {
				err := s.cfg.ControlPlane.TeardownPlaygrounds(ctx, id, gen)
				switch {
				case errors.Is(err, driver.ErrNoControlPlane):
					// Nothing to tear down without a control plane: not a
					// warning on every destroy (make run has none).
					s.log.Debug("playground teardown skipped: no control plane configured", "marquee", id, "generation", gen)
				case err != nil:
					s.log.Warn("playground teardown not confirmed", "marquee", id, "generation", gen, "err", err)
				}
			}})
		case marquee.AskAdmission, marquee.ReleaseAdmission:
			// Messages, which the outcome carries (poolMessages).
		default:
			panic(fmt.Sprintf("marquee: unknown effect %T", eff))
		}
	}
}

func (s *System) dispatch(ctx context.Context, req driver.DispatchRequest) {
	start := s.cfg.Clock.Now()
	run, err := s.cfg.Dispatcher.Dispatch(ctx, req)
	s.observeDriver("dispatch", start, err)
	res := marquee.DispatchFinished{Generation: req.Generation, Outcome: marquee.DispatchOK, RunID: run.ID, RunURL: run.URL}
	if err != nil {
		err = redacted(err, append([]string{req.CallbackToken}, s.cfg.Secrets...)...)
		res.Detail = err.Error()
		res.Outcome = marquee.DispatchTransient
		if driver.ClassOf(err) == driver.Configuration {
			res.Outcome = marquee.DispatchConfiguration
		}
		s.log.Warn("dispatch failed", "marquee", req.MarqueeID, "generation", req.Generation, "err", err)
	}
	s.marquees.Tell(req.MarqueeID, res)
}

func (s *System) bootstrap(ctx context.Context, req driver.BootstrapRequest, c marquee.Connection) {
	start := s.cfg.Clock.Now()
	err := s.cfg.Bootstrapper.Bootstrap(ctx, req)
	s.observeDriver("bootstrap", start, err)
	res := marquee.BootstrapFinished{Generation: req.Generation, OK: err == nil}
	if err != nil {
		// A script may echo what it was given; none of it reaches history,
		// logs or answers.
		secrets := append([]string{c.SSHPrivateKey, c.ACMEDNS.Password, c.ACMEDNS.Username}, s.cfg.Secrets...)
		res.Detail = redacted(err, secrets...).Error()
	}
	s.marquees.Tell(req.MarqueeID, res)
}

// mintCallbackToken derives the scoped credential of one dispatch (T1); ""
// when no signing keys are configured.
func (s *System) mintCallbackToken(marqueeID string, generation uint64) string {
	if s.cfg.CallbackKeys == nil {
		return ""
	}
	return trust.MintScoped(s.cfg.CallbackKeys, marqueeID, generation, s.cfg.Clock.Now().Add(s.cfg.CallbackTokenTTL))
}

// redacted replaces every secret value found in err's text. Driver errors
// carry a script's stderr, which may echo its input.
func redacted(err error, secrets ...string) error {
	msg := redactString(err.Error(), secrets...)
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// redactString replaces every secret (of four bytes or more) in s.
func redactString(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// --- logs and metrics --------------------------------------------------

// Observe makes every marquee step a log line: at info when something a
// person cares about changed (a lifecycle, a serving status, a failure,
// an operator's action, a held-back downgrade), at debug for routine
// steps such as an accepted progress callback; never a secret.
func (k marqueeKind) Observe(_ runtime.View[record.Marquee], ev marquee.Event, before, next record.Marquee, rd marquee.Outcome) {
	s := k.sys
	if cb, ok := ev.(marquee.Callback); ok && rd.Err == nil {
		s.cfg.Metrics.Callbacks.WithLabelValues(string(cb.Verb), string(rd.Answer)).Inc()
		k.logCallback(next.State, cb, rd)
	}
	b, n := before.State, next.State
	m := s.cfg.Metrics
	failed := n.Failure != nil && (b.Failure == nil || *b.Failure != *n.Failure)
	if failed {
		m.Failures.WithLabelValues(n.Failure.Rule).Inc()
	}
	if n.RetryCount > b.RetryCount {
		m.Retries.WithLabelValues("stuck").Inc()
	}
	bootstrapFailed := n.Bootstrap != nil && b.Bootstrap != nil && n.Bootstrap.Failures > b.Bootstrap.Failures
	if bootstrapFailed && n.Bootstrap.Failures <= s.cfg.Machine.Config.BootstrapRetries {
		m.Retries.WithLabelValues("bootstrap").Inc()
	}
	var actor string
	for _, e := range rd.Records {
		if e.Source == marquee.SourceOperator && e.Actor != "" {
			actor = e.Actor
		}
	}
	changed := b.Lifecycle != n.Lifecycle || b.Serving != n.Serving || (b.Tombstone == nil) != (n.Tombstone == nil) || b.Generation != n.Generation
	level := slog.LevelDebug
	switch {
	case failed || bootstrapFailed:
		level = slog.LevelWarn
	case changed || actor != "" || (n.Downgrade != nil) != (b.Downgrade != nil) || !sameVeto(b.LastVeto, n.LastVeto):
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !s.log.Enabled(ctx, level) {
		return // the webhook path's routine steps stop here, having built nothing
	}
	details := make([]string, 0, len(rd.Records))
	for _, e := range rd.Records {
		details = append(details, e.Detail)
	}
	attrs := []slog.Attr{slog.String("marquee", n.ID), slog.String("event", eventName(ev)), slog.Uint64("generation", n.Generation),
		slog.String("result", string(rd.Answer)), slog.String("detail", strings.Join(details, "; "))}
	if b.Lifecycle != n.Lifecycle {
		attrs = append(attrs, slog.String("lifecycle", fmt.Sprintf("%s -> %s", orNone(string(b.Lifecycle)), n.Lifecycle)))
	}
	if b.Serving != n.Serving {
		attrs = append(attrs, slog.String("serving", fmt.Sprintf("%s -> %s", orNone(string(b.Serving)), n.Serving)))
	}
	if actor != "" {
		attrs = append(attrs, slog.String("operator", actor))
	}
	if failed {
		attrs = append(attrs, slog.String("rule", n.Failure.Rule), slog.String("reason", n.Failure.Reason))
	}
	s.log.LogAttrs(ctx, level, "marquee transition", attrs...)
}

// logCallback: rejections and held-back downgrades are logged with both
// numbers (M10); routine progress only at debug level, off the hot path.
func (k marqueeKind) logCallback(st marquee.State, cb marquee.Callback, rd marquee.Outcome) {
	level := slog.LevelDebug
	switch rd.Answer {
	case marquee.Stale, marquee.Locked, marquee.Vetoed, marquee.Checking, marquee.PendingConfirmation:
		level = slog.LevelInfo
	}
	if k.sys.log.Enabled(context.Background(), level) {
		k.sys.log.Log(context.Background(), level, "callback", "marquee", st.ID, "verb", cb.Verb, "generation", st.Generation,
			"received_generation", cb.Generation, "result", rd.Answer, "auth", cb.Auth)
	}
}

func sameVeto(a, b *marquee.Veto) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// resealBatch bounds one batch of Reseal: a crash loses at most this much
// progress, and a batch stays small in memory.
const resealBatch = 256

// SealKeyIDs lists, in order, the seal key ids the stored marquees'
// secrets name: what a keyring must hold to open everything the store
// holds (T10). It reads the records' bytes without decoding them, so that
// a start over a large store can afford it.
func SealKeyIDs(st *persistence.Store) ([]string, error) {
	ids := map[string]bool{}
	prefix := []byte(trust.SealedPrefix)
	err := st.Scan([]byte(persistence.MarqueePrefix), nil, func(_, v []byte) (bool, error) {
		for rest := v; ; {
			i := bytes.Index(rest, prefix)
			if i < 0 {
				break
			}
			rest = rest[i+len(prefix):]
			if j := bytes.IndexByte(rest, ':'); j > 0 && j <= trust.MaxKeyIDLen {
				ids[string(rest[:j])] = true
			}
		}
		return true, nil
	})
	return slices.Sorted(maps.Keys(ids)), err
}

// Reseal rewrites every marquee record whose secrets are not sealed under
// sealer's active key (in clear, or under an older key), in synced batches
// (`warden rekey`, T10). It is safe to run again after a crash: a record
// already under the active key is left alone. It returns how many records
// it rewrote; afterwards no record names any other key.
func Reseal(st *persistence.Store, sealer *trust.Sealer) (rewritten int, err error) {
	if sealer == nil {
		return 0, errors.New("reseal: no seal key")
	}
	active := sealer.ActiveKeyID()
	var pending []record.Marquee
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		b := st.NewBatch()
		for _, r := range pending {
			record.PutMarquee(b, sealer, r)
		}
		if err := b.Commit(); err != nil {
			return err
		}
		rewritten += len(pending)
		pending = pending[:0]
		return nil
	}
	err = st.Scan([]byte(persistence.MarqueePrefix), nil, func(k, v []byte) (bool, error) {
		var raw record.Marquee
		if err := persistence.Decode(k, v, &raw); err != nil {
			return true, nil // malformed records are reported elsewhere; nothing to reseal
		}
		if !slices.ContainsFunc(record.SealedUnder(raw), func(id string) bool { return id != active }) {
			return true, nil
		}
		if err := record.OpenMarquee(sealer, k, &raw); err != nil {
			return false, fmt.Errorf("reseal %s: %w", k, err)
		}
		pending = append(pending, raw)
		if len(pending) >= resealBatch {
			return true, flush()
		}
		return true, nil
	})
	if err == nil {
		err = flush()
	}
	return rewritten, err
}

// errNotFound is the kinds' refusal for an id that never existed.
func errNotFound(kind, id string) error { return fmt.Errorf("%w: %s %s", errs.NotFound, kind, id) }

// ResealResult is what an online reseal did on this node.
type ResealResult struct {
	// Rewritten records now sealed under the active key.
	Rewritten int `json:"rewritten"`
	// Elsewhere are records under an older key in shards another node
	// owns: that node reseals them when asked.
	Elsewhere int `json:"elsewhere"`
	// Failed records could not be rewritten now (the shard moving, the
	// store refusing); asking again retries them.
	Failed int `json:"failed"`
	// Active is the key the records are sealed under now.
	Active string `json:"active_key_id"`
}

// ResealOwned re-seals, while serving, every marquee of this node's
// shards whose secrets are under a key other than the active one (T10,
// D9): each through its own actor's mailbox as a fenced rewrite of its
// record, so it never races the entity's own writes and a node that lost
// the shard commits nothing. On a single node every marquee is its own.
func (s *System) ResealOwned(ctx context.Context) (ResealResult, error) {
	out := ResealResult{}
	if s.cfg.Sealer == nil {
		return out, errors.New("reseal: no seal key")
	}
	out.Active = s.cfg.Sealer.ActiveKeyID()
	var stale []string
	err := s.cfg.Store.Scan([]byte(persistence.MarqueePrefix), nil, func(k, v []byte) (bool, error) {
		var raw record.Marquee
		if persistence.Decode(k, v, &raw) != nil {
			return true, nil // reported by verify; nothing to reseal
		}
		if slices.ContainsFunc(record.SealedUnder(raw), func(id string) bool { return id != out.Active }) {
			stale = append(stale, strings.TrimPrefix(string(k), persistence.MarqueePrefix))
		}
		return true, nil
	})
	if err != nil {
		return out, err
	}
	for _, id := range stale {
		if !s.rt.Owns(s.marquees.Key(id)) {
			out.Elsewhere++
			continue
		}
		if _, err := s.marquees.Ask(ctx, id, runtime.Request[marquee.Event]{Mode: runtime.Rewrite}); err != nil {
			if !s.rt.Owns(s.marquees.Key(id)) {
				out.Elsewhere++ // the shard moved away while we asked
				continue
			}
			s.log.Warn("reseal: not rewritten now", "marquee", id, "err", err)
			out.Failed++
			continue
		}
		out.Rewritten++
	}
	return out, nil
}
