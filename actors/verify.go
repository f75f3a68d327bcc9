package actors

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// Verify reads a whole store, as pg_amcheck reads a database: every
// record decodes and validates, every sealed field opens with a known key,
// and the invariants that span records hold. It reads the store once, in
// key order, keeping a summary of each entity (not its record), so a
// store of 100,000 marquees is checked in one pass and bounded memory.

// VerifyOptions are what the check needs to know of the configuration.
type VerifyOptions struct {
	// Sealer opens sealed fields (nil: secrets are expected in clear).
	Sealer *trust.Sealer
	// Machine and EnvMachine give the deadlines the wake index must cover;
	// their zero values are the defaults warden serve runs with.
	Machine    marquee.Machine
	EnvMachine environment.Machine
	// Pools are the configured limits; a pool missing here is not checked
	// against a limit (its reservations still are against marquees).
	Pools map[string]int
	// DedupRetention is how long deliveries are kept (72h if zero).
	DedupRetention time.Duration
	// Now is the time deadlines and retention are judged at; zero means the
	// newest time any record of the store names (an offline store's "now").
	Now time.Time
}

// Problem is one thing wrong, under the name of its check.
type Problem struct {
	Check  string `json:"check"`
	Key    string `json:"key"`
	Detail string `json:"detail"`
}

// Checks, as the report names them.
const (
	CheckDecode  = "decode"  // a record does not decode or validate
	CheckSeal    = "seal"    // a sealed field does not open with a known key
	CheckFormat  = "format"  // the store is newer than this build
	CheckFamily  = "family"  // a key in no family this build knows
	CheckPool    = "pool"    // reservations against marquees and limits
	CheckWake    = "wake"    // the wake index against every record's deadline
	CheckHistory = "history" // history sequences contiguous, ending at the record's, replaying to its state
	CheckDedup   = "dedup"   // delivery records bounded
	CheckRoute   = "route"   // routes held by the newest generation
	CheckLease   = "lease"   // tombstones own no live lease
)

// maxReported bounds the problems a report lists; the rest are counted.
const maxReported = 1000

// maxDedupBody bounds a stored answer: answers are a few hundred bytes, a
// request body at most httpapi.MaxBody; anything larger was not written
// by warden.
const maxDedupBody = 64 << 10

// dedupSlack is how far past its retention a delivery record may be before
// it counts as not pruned: the pruner runs hourly, and a warden that was
// stopped for a while prunes on its first hour back.
const dedupSlack = 24 * time.Hour

// VerifyReport is what Verify found.
type VerifyReport struct {
	Format   persistence.FormatRecord `json:"format"`
	Records  []FamilyCount            `json:"records"`
	Marquees int                      `json:"marquees"`
	Envs     int                      `json:"environments"`
	Pools    int                      `json:"pools"`
	KeyIDs   []string                 `json:"seal_key_ids"`
	Now      time.Time                `json:"judged_at"`
	Problems []Problem                `json:"problems"`
	Unlisted int                      `json:"problems_not_listed,omitempty"`
	Pending  []Problem                `json:"pending,omitempty"`
}

// FamilyCount is how many records one family holds.
type FamilyCount struct {
	Family string `json:"family"`
	Count  int    `json:"count"`
}

// OK reports a store with no problem.
func (r VerifyReport) OK() bool { return len(r.Problems) == 0 && r.Unlisted == 0 }

// marqueeSummary is what the cross-record checks need of a marquee.
type marqueeSummary struct {
	wakeAt     time.Time
	deadline   time.Time
	historySeq uint64
	admission  *marquee.Admission
	settled    bool
}

type envSummary struct {
	branch     string
	generation uint64
	holdsRoute bool
	superseded uint64
	wakeAt     time.Time
	deadline   time.Time
}

type historySpan struct {
	first, last, count uint64
	jumped             bool
	// replay follows the entries' changes, to the record's state.
	replay *marquee.Replay
}

type verifier struct {
	o        VerifyOptions
	r        VerifyReport
	dscan    persistence.DeliveriesScan
	counts   map[string]int
	keyIDs   map[string]bool
	newest   time.Time
	marquees map[string]marqueeSummary
	envs     map[string]envSummary
	history  map[string]historySpan
	reserved map[string][]string // pool -> jobs reserved
	poolSeen map[string]bool
	wakes    map[string]time.Time // "k/id" -> the entry's time
	branches map[string]uint64    // branch -> newest generation given out
	dedupAt  []dedupAge
}

type dedupAge struct {
	key string
	at  time.Time
}

// Verify checks every record of st and the invariants across them.
func Verify(st *persistence.Store, o VerifyOptions) (VerifyReport, error) {
	if o.DedupRetention == 0 {
		o.DedupRetention = 72 * time.Hour
	}
	v := &verifier{o: o, counts: map[string]int{}, keyIDs: map[string]bool{},
		marquees: map[string]marqueeSummary{}, envs: map[string]envSummary{}, history: map[string]historySpan{},
		reserved: map[string][]string{}, poolSeen: map[string]bool{}, wakes: map[string]time.Time{}, branches: map[string]uint64{}}
	f, err := st.Format()
	if err != nil {
		v.problem(CheckDecode, "v/format", "%v", err)
	}
	v.r.Format = f
	if f.Format > persistence.StoreFormat {
		v.problem(CheckFormat, "v/format", "%s", fmt.Sprintf("format %d (written by %s) is newer than this build reads (%d)", f.Format, f.WrittenBy, persistence.StoreFormat))
		return v.r, nil
	}
	if err := st.Scan(nil, nil, func(k, val []byte) (bool, error) { v.record(k, val); return true, nil }); err != nil {
		return v.r, err
	}
	if e, ok := v.dscan.End(); ok {
		v.deliveries(e)
	}
	for _, e := range v.dscan.Unscanned() {
		v.deliveries(e)
	}
	v.r.Now = o.Now
	if v.r.Now.IsZero() {
		v.r.Now = v.newest
	}
	v.crossChecks()
	v.summarize()
	return v.r, nil
}

func (v *verifier) problem(check, key, format string, args ...any) {
	if len(v.r.Problems) == maxReported {
		v.r.Unlisted++
		return
	}
	v.r.Problems = append(v.r.Problems, Problem{Check: check, Key: key, Detail: fmt.Sprintf(format, args...)})
}

// pending is a difference that recovery reconciles (an admission decided
// on one side, not yet told to the other): shown, not a failure.
func (v *verifier) pending(check, key, format string, args ...any) {
	if len(v.r.Pending) < maxReported {
		v.r.Pending = append(v.r.Pending, Problem{Check: check, Key: key, Detail: fmt.Sprintf(format, args...)})
	}
}

func (v *verifier) saw(t time.Time) {
	if t.After(v.newest) {
		v.newest = t
	}
}

func (v *verifier) decodeFailed(err error) {
	var ce *persistence.CorruptError
	if errors.As(err, &ce) {
		v.problem(CheckDecode, ce.Key, "%s", ce.Reason)
		return
	}
	v.problem(CheckDecode, "", "%v", err)
}

// record reads one key and value into the summaries.
func (v *verifier) record(k, val []byte) {
	key := string(k)
	family, rest, ok := strings.Cut(key, "/")
	if !ok {
		v.problem(CheckFamily, key, "a key in no family")
		return
	}
	v.counts[family+"/"]++
	switch family + "/" {
	case persistence.MarqueePrefix:
		v.marquee(k, val, rest)
	case persistence.HistoryFamily:
		v.historyEntry(k, val)
	case persistence.DedupFamily:
		v.dedup(k, val)
	case persistence.DeliveriesFamily:
		if e, ok := v.dscan.Add(k, val); ok {
			v.deliveries(e)
		}
	case persistence.PoolPrefix:
		var m record.PoolMeta
		if err := persistence.Decode(k, val, &m); err != nil {
			v.decodeFailed(err)
		}
		v.poolSeen[rest] = true
	case persistence.AdmissionFamily:
		v.admission(k, val)
	case persistence.EnvPrefix:
		v.env(k, val, rest)
	case persistence.BranchFamily:
		v.branch(k, rest)
	case persistence.WakePrefix:
		v.wake(key)
	case persistence.FormatFamily, "x/", persistence.GuardFamily:
		// The format record (read above), the benchmark floor's writes,
		// and a cluster entity's guard, whose value is a commit's
		// name.
	case "z/":
		var a map[string]any
		if err := persistence.Decode(k, val, &a); err != nil {
			v.decodeFailed(err)
		}
	default:
		v.problem(CheckFamily, key, "family %q is not one this build writes", family+"/")
	}
}

func (v *verifier) marquee(k, val []byte, id string) {
	var r record.Marquee
	if err := persistence.Decode(k, val, &r); err != nil {
		v.decodeFailed(err)
		return
	}
	v.dscan.Recent(id, persistence.InRecord{Key: string(k), Chunk: r.Deliveries})
	if c := r.State.Connection; c != nil {
		for _, f := range record.SecretFields(c) {
			if trust.IsSealed(*f.Value) {
				v.keyIDs[trust.SealedKeyID(*f.Value)] = true
			}
			clear, err := v.o.Sealer.Open(*f.Value, string(k), f.Name)
			if err != nil {
				v.problem(CheckSeal, string(k), "%v", err)
				return
			}
			*f.Value = clear
		}
	}
	if err := r.State.Validate(); err != nil {
		v.problem(CheckDecode, string(k), "%v", err)
		return
	}
	if r.State.ID != id {
		v.problem(CheckDecode, string(k), "record names marquee %q", r.State.ID)
		return
	}
	s := r.State
	v.replayed(id, s)
	v.saw(s.UpdatedAt)
	settled := s.Lifecycle.Settled() || s.Tombstone != nil
	v.marquees[id] = marqueeSummary{wakeAt: r.WakeAt, deadline: v.o.Machine.Wake(s), historySeq: r.HistorySeq, admission: s.Admission, settled: settled}
}

func (v *verifier) historyEntry(k, val []byte) {
	var e marquee.Entry
	if err := persistence.Decode(k, val, &e); err != nil {
		v.decodeFailed(err)
		return
	}
	rest := strings.TrimPrefix(string(k), persistence.HistoryFamily)
	i := strings.LastIndexByte(rest, '/')
	var seq uint64
	if i < 0 {
		v.problem(CheckHistory, string(k), "history key without a sequence")
		return
	}
	if _, err := fmt.Sscanf(rest[i+1:], "%016x", &seq); err != nil || len(rest[i+1:]) != 16 {
		v.problem(CheckHistory, string(k), "history key's sequence %q does not read", rest[i+1:])
		return
	}
	v.saw(e.At)
	id := rest[:i]
	h, ok := v.history[id]
	switch {
	case !ok:
		h = historySpan{first: seq, last: seq, count: 1, replay: &marquee.Replay{}}
	case seq != h.last+1:
		v.problem(CheckHistory, string(k), "history of %s jumps from %d to %d", id, h.last, seq)
		h.last, h.count, h.jumped = seq, h.count+1, true
	default:
		h.last, h.count = seq, h.count+1
	}
	if !h.jumped {
		h.replay.Entry(seq, e)
	}
	v.history[id] = h
}

// replayed checks that a marquee's history replays to its record's state
// (S14); the history's keys sort before the records', so it has been read.
func (v *verifier) replayed(id string, s marquee.State) {
	h, ok := v.history[id]
	if !ok || h.jumped {
		return // none stored, or a gap already reported
	}
	if b := h.replay.End(s); b != nil {
		v.problem(CheckHistory, string(persistence.HistoryKey(id, b.Seq)), "marquee %s, history entry %d: %s", id, b.Seq, b.Reason)
	}
	h.replay = nil
	v.history[id] = h
}

func (v *verifier) dedup(k, val []byte) {
	var d persistence.DedupRecord
	if err := persistence.Decode(k, val, &d); err != nil {
		v.decodeFailed(err)
		return
	}
	if want := string(persistence.DedupKey(d.Entity, d.DeliveryID)); want != string(k) {
		v.problem(CheckDedup, string(k), "record is delivery %q of %q; its key says otherwise", d.DeliveryID, d.Entity)
	}
	if len(d.Body) > maxDedupBody {
		v.problem(CheckDedup, string(k), "stored answer is %d bytes, over %d", len(d.Body), maxDedupBody)
	}
	v.saw(d.At)
	v.dedupAt = append(v.dedupAt, dedupAge{key: string(k), at: d.At})
}

// deliveries checks an entity's deliveries record, read from its keys: it
// decodes within its bounds, holds at least one entry, and keeps none
// older than the retention before its newest (the record drops them when
// written, M20).
func (v *verifier) deliveries(e persistence.EntityDeliveries) {
	key, ds := persistence.DeliveriesFamily+e.Entity, e.Deliveries
	switch {
	case e.Err != nil:
		v.decodeFailed(e.Err)
		return
	case len(ds) == 0:
		v.problem(CheckDedup, key, "a deliveries record with no delivery")
		return
	}
	newest := ds[len(ds)-1].At
	if ds.KeptPast(v.o.DedupRetention) {
		v.problem(CheckDedup, key, "keeps a delivery of %s, over %s before its newest (%s)",
			ds[0].At.Format(time.RFC3339), v.o.DedupRetention, newest.Format(time.RFC3339))
	}
	v.saw(newest)
}

func (v *verifier) admission(k, val []byte) {
	var j admission.Job
	if err := persistence.Decode(k, val, &j); err != nil {
		v.decodeFailed(err)
		return
	}
	pool, job, _ := strings.Cut(strings.TrimPrefix(string(k), persistence.AdmissionFamily), "/")
	if job != j.ID {
		v.problem(CheckDecode, string(k), "record names job %q", j.ID)
		return
	}
	if j.Status == admission.Reserved {
		v.reserved[pool] = append(v.reserved[pool], job)
	}
}

func (v *verifier) env(k, val []byte, id string) {
	var r record.Environment
	if err := persistence.Decode(k, val, &r); err != nil {
		v.decodeFailed(err)
		return
	}
	v.dscan.Recent(id, persistence.InRecord{Key: string(k), Chunk: r.Deliveries})
	e := r.Env
	if e.ID != id || !environment.ValidID(e.ID) {
		v.problem(CheckDecode, string(k), "record names environment %q", e.ID)
		return
	}
	v.saw(e.UpdatedAt)
	if e.Tombstone != nil && e.Attempt != nil {
		v.problem(CheckLease, string(k), "tombstone (removed %s) still holds attempt %s leased to %s until %s",
			e.Tombstone.RemovedAt.Format(time.RFC3339), e.Attempt.ID, e.Attempt.Lease.Owner, e.Attempt.Lease.ExpiresAt.Format(time.RFC3339))
	}
	holds := false
	for _, res := range e.Resources {
		if res.Capability == environment.Route && res.Status == "present" {
			holds = true
		}
	}
	v.envs[id] = envSummary{branch: e.Branch, generation: e.Generation, holdsRoute: holds && e.Tombstone == nil,
		superseded: e.SupersededBy, wakeAt: r.WakeAt, deadline: v.o.EnvMachine.Wake(e)}
}

func (v *verifier) branch(k []byte, rest string) {
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return // a branch key of the layout before generations had keys
	}
	branch := rest[:i]
	g, ok := persistence.ParseBranchGeneration(persistence.BranchGenerationPrefix(branch), k)
	if !ok {
		v.problem(CheckRoute, string(k), "route generation key does not read")
		return
	}
	if g > v.branches[branch] {
		v.branches[branch] = g
	}
}

func (v *verifier) wake(key string) {
	parts := strings.SplitN(key, "/", 4)
	var nanos uint64
	if len(parts) != 4 || (parts[2] != persistence.WakeMarquee && parts[2] != persistence.WakeEnvironment) || len(parts[1]) != 16 {
		v.problem(CheckWake, key, "wake entry does not read")
		return
	}
	if _, err := fmt.Sscanf(parts[1], "%016x", &nanos); err != nil {
		v.problem(CheckWake, key, "wake entry's time does not read")
		return
	}
	who := parts[2] + "/" + parts[3]
	if _, dup := v.wakes[who]; dup {
		v.problem(CheckWake, key, "a second wake entry for %s", who)
	}
	v.wakes[who] = time.Unix(0, int64(nanos)).UTC()
}

// crossChecks runs the invariants that span records, in a fixed order.
func (v *verifier) crossChecks() {
	v.checkMarquees()
	v.checkHistoryOwners()
	v.checkPools()
	v.checkEnvs()
	v.checkWakeOwners()
	v.checkDedupAge()
}

func (v *verifier) checkMarquees() {
	for _, id := range slices.Sorted(maps.Keys(v.marquees)) {
		m := v.marquees[id]
		key := string(persistence.MarqueeKey(id))
		v.checkWakeOf(persistence.WakeMarquee, id, key, m.wakeAt, m.deadline)
		h, ok := v.history[id]
		switch {
		case !ok && m.historySeq > 0:
			v.problem(CheckHistory, key, "record says history ends at %d; none is stored", m.historySeq)
		case ok && h.last != m.historySeq:
			v.problem(CheckHistory, key, "history ends at %d; the record says %d", h.last, m.historySeq)
		}
	}
}

// checkWakeOf: an entity with a deadline has a wake entry no later than
// it (an early one is allowed: the entity wakes, finds nothing due and
// re-arms), and the entry it records is the one stored.
func (v *verifier) checkWakeOf(kind, id, key string, wakeAt, deadline time.Time) {
	stored, has := v.wakes[kind+"/"+id]
	switch {
	case !wakeAt.IsZero() && !has:
		v.problem(CheckWake, key, "record owns wake entry %s; the index has none", wakeAt.Format(time.RFC3339Nano))
	case !wakeAt.IsZero() && !stored.Equal(wakeAt):
		v.problem(CheckWake, key, "record owns wake entry %s; the index has %s", wakeAt.Format(time.RFC3339Nano), stored.Format(time.RFC3339Nano))
	case wakeAt.IsZero() && has:
		v.problem(CheckWake, key, "the index wakes it at %s; the record owns no entry", stored.Format(time.RFC3339Nano))
	case !deadline.IsZero() && (wakeAt.IsZero() || wakeAt.After(deadline)):
		v.problem(CheckWake, key, "deadline %s is not covered by the wake index (entry: %s)", deadline.Format(time.RFC3339Nano), wakeLabel(wakeAt))
	}
}

func wakeLabel(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.Format(time.RFC3339Nano)
}

func (v *verifier) checkHistoryOwners() {
	for _, id := range slices.Sorted(maps.Keys(v.history)) {
		if _, ok := v.marquees[id]; !ok {
			v.problem(CheckHistory, string(persistence.HistoryPrefix(id)), "%d history entries of a marquee that has no record", v.history[id].count)
		}
	}
}

func (v *verifier) checkPools() {
	for _, pool := range slices.Sorted(maps.Keys(v.reserved)) {
		jobs := v.reserved[pool]
		if limit, ok := v.o.Pools[pool]; ok && len(jobs) > limit {
			v.problem(CheckPool, string(persistence.AdmissionPrefix(pool)), "I7: %d jobs reserved, limit %d", len(jobs), limit)
		}
		for _, job := range jobs {
			key := string(persistence.AdmissionKey(pool, job))
			m, ok := v.marquees[job]
			switch {
			case !ok:
				v.problem(CheckPool, key, "a slot reserved for marquee %s, which has no record", job)
			case m.admission == nil || m.admission.Pool != pool || m.admission.Status != marquee.AdmissionReserved:
				v.pending(CheckPool, key, "reserved in the pool; the marquee has not been told (recovery tells it, A7)")
			case m.settled:
				v.pending(CheckPool, key, "a settled marquee holds a slot (its release is reconciled on recovery, I9)")
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.marquees)) {
		a := v.marquees[id].admission
		if a != nil && a.Status == marquee.AdmissionReserved && !slices.Contains(v.reserved[a.Pool], id) {
			v.pending(CheckPool, string(persistence.MarqueeKey(id)), "holds a slot of pool %s that the pool does not list (recovery reconciles it, A7)", a.Pool)
		}
	}
}

func (v *verifier) checkEnvs() {
	holder := map[string]string{} // branch -> env holding its route at the highest generation
	for _, id := range slices.Sorted(maps.Keys(v.envs)) {
		e := v.envs[id]
		key := string(persistence.EnvKey(id))
		v.checkWakeOf(persistence.WakeEnvironment, id, key, e.wakeAt, e.deadline)
		if newest, ok := v.branches[e.branch]; e.generation > 0 && (!ok || newest < e.generation) {
			v.problem(CheckRoute, key, "generation %d of branch %s was never given out (newest: %d)", e.generation, e.branch, newest)
		}
		if !e.holdsRoute {
			continue
		}
		if e.superseded > 0 {
			v.problem(CheckRoute, key, "I14: holds the route of %s though generation %d superseded it", e.branch, e.superseded)
		}
		if other, ok := holder[e.branch]; ok {
			older, newer := other, id
			if v.envs[other].generation > e.generation {
				older, newer = id, other
			}
			v.problem(CheckRoute, string(persistence.EnvKey(older)), "I14: holds the route of %s at generation %d while %s holds it at %d",
				e.branch, v.envs[older].generation, newer, v.envs[newer].generation)
			if older == other {
				holder[e.branch] = id
			}
			continue
		}
		holder[e.branch] = id
	}
}

func (v *verifier) checkWakeOwners() {
	for _, who := range slices.Sorted(maps.Keys(v.wakes)) {
		kind, id, _ := strings.Cut(who, "/")
		var owned bool
		if kind == persistence.WakeMarquee {
			_, owned = v.marquees[id]
		} else {
			_, owned = v.envs[id]
		}
		if !owned {
			v.problem(CheckWake, string(persistence.WakeKey(v.wakes[who], kind, id)), "wake entry of %s, which has no record", who)
		}
	}
}

func (v *verifier) checkDedupAge() {
	cutoff := v.r.Now.Add(-v.o.DedupRetention - dedupSlack)
	for _, d := range v.dedupAt {
		if d.at.Before(cutoff) {
			v.problem(CheckDedup, d.key, "delivered %s, over %s before %s: the pruner has not run",
				d.at.Format(time.RFC3339), v.o.DedupRetention+dedupSlack, v.r.Now.Format(time.RFC3339))
		}
	}
}

func (v *verifier) summarize() {
	for _, f := range slices.Sorted(maps.Keys(v.counts)) {
		v.r.Records = append(v.r.Records, FamilyCount{Family: f, Count: v.counts[f]})
	}
	v.r.KeyIDs = slices.Sorted(maps.Keys(v.keyIDs))
	v.r.Marquees, v.r.Envs = len(v.marquees), len(v.envs)
	pools := map[string]bool{}
	for p := range v.poolSeen {
		pools[p] = true
	}
	for p := range v.reserved {
		pools[p] = true
	}
	v.r.Pools = len(pools)
}

// Text is the report for people: what was read, then each problem.
func (r VerifyReport) Text() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "store format %d", r.Format.Format)
	if r.Format.WrittenBy != "" {
		fmt.Fprintf(&b, ", last written by warden %s", r.Format.WrittenBy)
	}
	fmt.Fprintf(&b, "\n%d marquees, %d environments, %d pools; judged at %s\n", r.Marquees, r.Envs, r.Pools, wakeLabel(r.Now))
	for _, f := range r.Records {
		fmt.Fprintf(&b, "  %-4s %d records\n", f.Family, f.Count)
	}
	if len(r.KeyIDs) > 0 {
		fmt.Fprintf(&b, "sealed under key ids: %s\n", strings.Join(r.KeyIDs, ", "))
	}
	for _, p := range r.Pending {
		fmt.Fprintf(&b, "pending  %-7s %s: %s\n", p.Check, p.Key, p.Detail)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "PROBLEM  %-7s %s: %s\n", p.Check, p.Key, p.Detail)
	}
	if r.Unlisted > 0 {
		fmt.Fprintf(&b, "... and %d more problems not listed\n", r.Unlisted)
	}
	if r.OK() {
		fmt.Fprintf(&b, "ok: no problem found\n")
	} else {
		fmt.Fprintf(&b, "%d problem(s) found\n", len(r.Problems)+r.Unlisted)
	}
	return b.String()
}
