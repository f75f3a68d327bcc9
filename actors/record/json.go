package record

import (
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/jsonappend"
	"github.com/wardenhq/warden/persistence"
)

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
	o.Key("runs")
	o.B = append(o.B, '[')
	for i, r := range runs {
		if i > 0 {
			o.B = append(o.B, ',')
		}
		o.Begin()
		o.Uint("id", r.ID)
		o.Uint("generation", r.Generation)
		o.End()
	}
	o.B = append(o.B, ']')
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
		o.Key("changed")
		o.B = append(o.B, '[')
		for i, c := range e.Changed {
			if i > 0 {
				o.B = append(o.B, ',')
			}
			o.Begin()
			o.String("field", c.Field)
			o.String("from", c.From)
			o.String("to", c.To)
			o.End()
		}
		o.B = append(o.B, ']')
	}
	o.End()
	return o.B, o.Err
}
