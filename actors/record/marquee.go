package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/jsonappend"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// HistoryLimit bounds the history kept per marquee: enough to reconstruct a
// stale-callback story over a day of retries, small enough that a noisy
// workflow cannot grow a row without bound.
const HistoryLimit = 200

// HistoryTrimEvery is how often the entries past the window are deleted:
// as one range every this many entries, not one with each, because each
// key a callback's batch writes costs more than its bytes (docs/decisions,
// "What a callback writes"). A marquee stores HistoryLimit to
// HistoryLimit+HistoryTrimEvery-1 entries; History shows the newest
// HistoryLimit (docs/rules/marquee.md, "Besides").
const HistoryTrimEvery = 64

// Marquee is a marquee's durable record.
type Marquee struct {
	State marquee.State `json:"state"`
	// HistorySeq is the sequence of the newest history entry.
	HistorySeq uint64 `json:"history_seq"`
	// WakeAt is the wake-index entry this record owns (zero: none).
	WakeAt time.Time `json:"wake_at,omitzero"`
	// Deliveries is the newest chunk of the marquee's deliveries
	// (persistence.Deliveries.Recent, store format 4), kept here because
	// the record is written with every step anyway: a callback writes one
	// key fewer. The runtime keeps it (runtime.Stager's RecentDeliveries); the
	// machine never reads it.
	Deliveries []byte `json:"deliveries,omitempty"`
}

// NextMarquee is the record after a step. Its wake-index time is now while
// effects are in flight (a crash must reconcile them at once), else the
// earliest deadline; or an entry still ahead that is earlier than the
// deadline, kept. The index may be early, never late: an early entry
// costs one activation that finds nothing due (after a restart only; a
// live actor's timer is armed at the deadline), while moving it costs two
// writes on every callback that pushes a deadline out (the stale timer,
// M21), a third of a callback's batch.
func NextMarquee(rec Marquee, s marquee.State, rd marquee.Outcome, now time.Time) Marquee {
	next := Marquee{State: s, HistorySeq: rec.HistorySeq + uint64(len(rd.Records)), WakeAt: rd.Wake}
	switch {
	case marquee.NeedsReconcile(s):
		next.WakeAt = now
	case rec.WakeAt.After(now) && rec.WakeAt.Before(rd.Wake):
		next.WakeAt = rec.WakeAt
	}
	return next
}

// MarqueeWrites is what a marquee's step writes: its record, secrets
// sealed with Sealer (nil: in clear), and its history entries; its
// deadlines go in the wake index.
type MarqueeWrites struct{ Sealer *trust.Sealer }

func (w MarqueeWrites) Stage(b persistence.Writer, id string, before, next Marquee, rd marquee.Outcome) {
	PutMarquee(b, w.Sealer, next)
	changed := marquee.Changes(before.State, next.State)
	for i, e := range rd.Records {
		if i == len(rd.Records)-1 {
			e.Changed = changed // the step's last entry says what it changed
		}
		appendHistory(b, id, before.HistorySeq+uint64(i)+1, e)
	}
}

func (MarqueeWrites) WakeLetter() string         { return persistence.WakeMarquee }
func (MarqueeWrites) WakeOf(r Marquee) time.Time { return r.WakeAt }

func (MarqueeWrites) RecentDeliveries(r Marquee) persistence.InRecord {
	return persistence.InRecord{Key: string(persistence.MarqueeKey(r.State.ID)), Chunk: r.Deliveries}
}

func (MarqueeWrites) WithRecentDeliveries(r Marquee, chunk []byte) Marquee {
	r.Deliveries = chunk
	return r
}

// SecretField is one sealed field of a connection: its name in the
// associated data and where it lives.
type SecretField struct {
	Name  string
	Value *string
}

// SecretFields lists a connection's sealed fields.
func SecretFields(c *marquee.Connection) []SecretField {
	return []SecretField{{"ssh_private_key", &c.SSHPrivateKey}, {"acme_dns.username", &c.ACMEDNS.Username}, {"acme_dns.password", &c.ACMEDNS.Password}}
}

// sealMarquee returns a copy of r whose secrets are sealed, with the
// record's key and the field's name as associated data (T10).
func sealMarquee(sealer *trust.Sealer, r Marquee) Marquee {
	if sealer == nil || r.State.Connection == nil {
		return r
	}
	c := *r.State.Connection
	key := string(persistence.MarqueeKey(r.State.ID))
	for _, f := range SecretFields(&c) {
		*f.Value = sealer.Seal(*f.Value, key, f.Name)
	}
	r.State.Connection = &c
	return r
}

// OpenMarquee opens a decoded record's secrets and validates it (A9): a
// record that does not open is malformed, never used.
func OpenMarquee(sealer *trust.Sealer, key []byte, r *Marquee) error {
	if c := r.State.Connection; c != nil {
		for _, f := range SecretFields(c) {
			v, err := sealer.Open(*f.Value, string(key), f.Name)
			if err != nil {
				return &persistence.CorruptError{Malformed: persistence.Malformed{Key: string(key), Reason: err.Error()}}
			}
			*f.Value = v
		}
	}
	if err := r.State.Validate(); err != nil {
		return &persistence.CorruptError{Malformed: persistence.Malformed{Key: string(key), Reason: err.Error()}}
	}
	return nil
}

// LoadMarquee reads one marquee's record: persistence.ErrNotFound, a
// *persistence.CorruptError, or the record with its secrets opened.
func LoadMarquee(st *persistence.Store, sealer *trust.Sealer, id string) (Marquee, error) {
	var r Marquee
	key := persistence.MarqueeKey(id)
	if err := st.Get(key, &r); err != nil {
		return Marquee{}, err
	}
	if r.State.ID != id {
		return Marquee{}, &persistence.CorruptError{Malformed: persistence.Malformed{Key: string(key), Reason: fmt.Sprintf("record names marquee %q", r.State.ID)}}
	}
	if err := OpenMarquee(sealer, key, &r); err != nil {
		return Marquee{}, err
	}
	return r, nil
}

// PutMarquee stages the record, its secrets sealed.
func PutMarquee(b persistence.Writer, sealer *trust.Sealer, r Marquee) {
	b.Put(persistence.MarqueeKey(r.State.ID), sealMarquee(sealer, r))
}

// appendHistory stages entry number seq and, every HistoryTrimEvery
// entries, deletes every entry that fell out of the window (from the
// first key of the marquee's history: a store whose entries were deleted
// one by one has none there).
func appendHistory(b persistence.Writer, id string, seq uint64, e marquee.Entry) {
	b.Put(persistence.HistoryKey(id, seq), historyEntry(e))
	if seq > HistoryLimit && seq%HistoryTrimEvery == 0 {
		b.DeleteRange(persistence.HistoryKey(id, 0), persistence.HistoryKey(id, seq-HistoryLimit+1))
	}
}

// MarqueeDeliveries reads a marquee's deliveries as its actor does: its
// chunks, with the newest its record keeps.
func MarqueeDeliveries(st *persistence.Store, id string) (persistence.Deliveries, error) {
	rec, err := MarqueeDeliveriesInRecord(st, id)
	if err != nil {
		return nil, err
	}
	return st.Deliveries(id, rec)
}

// MarqueeDeliveriesInRecord is the chunk of deliveries a stored marquee's
// record keeps (none for a marquee with no record).
func MarqueeDeliveriesInRecord(st *persistence.Store, id string) (persistence.InRecord, error) {
	var r Marquee
	if err := st.Get(persistence.MarqueeKey(id), &r); err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return persistence.InRecord{}, err
	}
	return MarqueeWrites{}.RecentDeliveries(r), nil
}

// ListMarquees is one page of stored marquees that keep accepts (see
// persistence.ListPage). Sealed secrets stay sealed: a list shows
// summaries, never connections.
func ListMarquees(st *persistence.Store, after string, limit, maxScan int, keep func(marquee.State) bool) ([]marquee.State, string, []persistence.Malformed, error) {
	return listPage(st, persistence.MarqueePrefix, after, limit, maxScan, func(r Marquee) marquee.State { return r.State }, keep)
}

// History returns up to limit entries of a marquee's history, newest
// first: of its window, the newest HistoryLimit (entries past it wait for
// the next trim, appendHistory).
func History(st *persistence.Store, id string, limit int) ([]marquee.Entry, error) {
	var all []marquee.Entry
	err := st.Scan(persistence.HistoryPrefix(id), nil, func(k, v []byte) (bool, error) {
		var e marquee.Entry
		if err := persistence.Decode(k, v, &e); err != nil {
			return false, err
		}
		all = append(all, e)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	limit = min(limit, HistoryLimit)
	out := make([]marquee.Entry, 0, min(limit, len(all)))
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, all[i])
	}
	return out, nil
}

// SealedUnder reports the key ids a stored marquee value names ("" for a
// secret in clear).
func SealedUnder(r Marquee) []string {
	c := r.State.Connection
	if c == nil {
		return nil
	}
	var ids []string
	for _, f := range SecretFields(c) {
		if *f.Value != "" {
			ids = append(ids, trust.SealedKeyID(*f.Value))
		}
	}
	return ids
}

// A marquee's record and its history entry are written with every step,
// so they encode by hand (jsonappend), byte for byte as encoding/json
// would: TestRecordsEncodeAsEncodingJSONDoes holds every field to it.

var (
	_ persistence.JSONAppender = Marquee{}
	_ persistence.JSONAppender = historyEntry{}
)

// AppendJSON appends the record as encoding/json encodes it.
func (r Marquee) AppendJSON(b []byte) ([]byte, error) {
	o := jsonappend.Object{B: b}
	o.Begin()
	o.Open("state")
	appendState(&o, &r.State)
	o.End()
	o.Uint("history_seq", r.HistorySeq)
	o.TimeOmitZero("wake_at", r.WakeAt)
	o.BytesOmitEmpty("deliveries", r.Deliveries)
	o.End()
	return o.B, o.Err
}

// appendState writes a state's fields into the object open for it.
func appendState(o *jsonappend.Object, s *marquee.State) {
	o.String("id", s.ID)
	o.String("kind", string(s.Kind))
	o.StringOmitEmpty("pool", s.Pool)
	o.String("serving", string(s.Serving))
	o.StringOmitEmpty("lifecycle", string(s.Lifecycle))
	o.Text("progress", s.Progress)
	o.Uint("generation", s.Generation)
	o.Uint("dispatched_generation", s.DispatchedGeneration)
	if c := s.Connection; c != nil {
		o.Open("connection")
		appendConnection(o, c)
		o.End()
	}
	o.UintOmitEmpty("connection_generation", s.ConnectionGeneration)
	o.TimeOmitZero("null_pending_until", s.NullPendingUntil)
	o.Int("retry_count", s.RetryCount)
	if a := s.Attempt; a != nil {
		o.Open("attempt")
		o.Uint("generation", a.Generation)
		o.String("action", string(a.Action))
		o.String("dispatch", string(a.Dispatch))
		o.TimeOmitZero("dispatched_at", a.DispatchedAt)
		o.TimeOmitZero("last_callback_at", a.LastCallbackAt)
		o.UintOmitEmpty("run_id", a.RunID)
		o.StringOmitEmpty("run_url", a.RunURL)
		o.End()
	}
	if a := s.Admission; a != nil {
		o.Open("admission")
		o.String("pool", a.Pool)
		o.String("status", string(a.Status))
		o.UintOmitEmpty("sequence", a.Sequence)
		o.End()
	}
	if bs := s.Bootstrap; bs != nil {
		o.Open("bootstrap")
		o.Uint("generation", bs.Generation)
		o.Int("failures", bs.Failures)
		o.Bool("running", bs.Running)
		o.TimeOmitZero("retry_at", bs.RetryAt)
		o.End()
	}
	if d := s.Downgrade; d != nil {
		o.Open("downgrade")
		o.String("verb", string(d.Verb))
		o.Uint("generation", d.Generation)
		o.StringOmitEmpty("reason", d.Reason)
		o.Bool("asking", d.Asking)
		o.TimeOmitZero("recheck_at", d.RecheckAt)
		o.Int("unanswered", d.Unanswered)
		o.End()
	}
	appendRuns(o, s.Runs)
	o.BoolOmitEmpty("reap_on_destroyed", s.ReapOnDestroyed)
	appendOutcomes(o, s)
	o.Time("created_at", s.CreatedAt)
	o.Time("updated_at", s.UpdatedAt)
}

// appendConnection writes a connection's fields into the object open for
// it.
func appendConnection(o *jsonappend.Object, c *marquee.Connection) {
	o.String("host", c.Host)
	o.Int("port", c.Port)
	o.String("user", c.User)
	o.String("ssh_private_key", c.SSHPrivateKey)
	o.String("free_domain", c.FreeDomain)
	o.Open("acme_dns")
	o.String("server_url", c.ACMEDNS.ServerURL)
	o.String("username", c.ACMEDNS.Username)
	o.String("password", c.ACMEDNS.Password)
	o.String("subdomain", c.ACMEDNS.Subdomain)
	o.String("full_domain", c.ACMEDNS.FullDomain)
	o.End()
}

// appendRuns writes the runs (omitempty leaves out an empty list as well
// as a nil one).
func appendRuns(o *jsonappend.Object, runs []marquee.Run) {
	if len(runs) == 0 {
		return
	}
	o.OpenList("runs")
	for _, r := range runs {
		o.Item()
		o.Uint("id", r.ID)
		o.Uint("generation", r.Generation)
		o.End()
	}
	o.CloseList()
}

// appendOutcomes writes how the marquee last failed, was vetoed or reaped.
func appendOutcomes(o *jsonappend.Object, s *marquee.State) {
	if f := s.Failure; f != nil {
		o.Open("failure")
		o.String("reason", f.Reason)
		o.String("rule", f.Rule)
		o.Time("at", f.At)
		o.Uint("generation", f.Generation)
		o.End()
	}
	if v := s.LastVeto; v != nil {
		o.Open("last_veto")
		o.String("verb", string(v.Verb))
		o.Int("live", v.Live)
		o.Time("at", v.At)
		o.End()
	}
	if t := s.Tombstone; t != nil {
		o.Open("tombstone")
		o.String("reason", t.Reason)
		o.Time("at", t.At)
		o.End()
	}
}

// historyEntry is a history entry as stored: encoded by hand.
type historyEntry marquee.Entry

// AppendJSON appends the entry as encoding/json encodes a marquee.Entry.
func (e historyEntry) AppendJSON(b []byte) ([]byte, error) {
	o := jsonappend.Object{B: b}
	o.Begin()
	o.Time("at", e.At)
	o.String("source", string(e.Source))
	o.String("verb", e.Verb)
	o.Uint("generation", e.Generation)
	o.UintOmitEmpty("received_generation", e.ReceivedGeneration)
	o.String("result", string(e.Result))
	o.StringOmitEmpty("detail", e.Detail)
	o.StringOmitEmpty("delivery_id", e.DeliveryID)
	o.StringOmitEmpty("actor", e.Actor)
	o.StringOmitEmpty("auth", e.Auth)
	if len(e.Changed) > 0 {
		o.OpenList("changed")
		for _, c := range e.Changed {
			o.Item()
			o.String("field", c.Field)
			o.String("from", c.From)
			o.String("to", c.To)
			o.End()
		}
		o.CloseList()
	}
	o.End()
	return o.B, o.Err
}
