// Package persistence is warden's durable record: a Store over Pebble v2.
//
// Every entity transition is written as one Batch committed with
// pebble.Sync (fsync of the WAL) before any effect starts and before anyone
// is answered. Concurrent commits from many actors share WAL syncs through
// Pebble's commit pipeline (group commit), so a sync per transition does not
// mean an fsync per transition.
//
// # Key layout
//
// Keys are ASCII, one prefix byte and a slash per record family, so that a
// family is one contiguous range:
//
//	m/<marquee id>                  marquee snapshot (MarqueeRecord)
//	h/<marquee id>/<seq %016x>      history entry; the newest HistoryLimit kept
//	d/<marquee id>/<delivery id>    webhook dedup record (DedupRecord, T5)
//	p/<pool>                        pool metadata (PoolMeta)
//	a/<pool>/<job>                  admission record (admission.Job)
//	e/<environment id>              environment record (EnvRecord)
//	b/<branch>                      the branch's last route generation
//	w/<unix nanos %016x>/<k>/<id>   wake index: the entity (k: m marquee,
//	                                e environment) has a deadline or unsettled
//	                                effects at that time (empty value)
//
// # Encoding
//
// Every value is one version byte followed by JSON. The version says how the
// rest is read; a value whose version or JSON does not decode, or that fails
// validation, is reported as Malformed with its key and reason, never
// skipped silently and never allowed to hide its neighbours (A8).
package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/trust"
)

// codecV1 is the only encoding so far: a version byte then JSON.
const codecV1 byte = 1

// HistoryLimit bounds the history kept per marquee: enough to reconstruct a
// stale-callback story over a day of retries, small enough that a noisy
// workflow cannot grow a row without bound.
const HistoryLimit = 200

// CacheSize is Pebble's block cache: snapshots of active marquees, recent
// history and the filters stay in memory; 64 MiB is small for a 24 GiB host
// and large for the working set of thousands of active marquees.
const CacheSize = 64 << 20

// ErrNotFound is returned for a key that holds nothing.
var ErrNotFound = errors.New("not found")

// Malformed is a stored record that could not be used, with why.
type Malformed struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// CorruptError is a record that failed to decode or validate.
type CorruptError struct{ Malformed }

func (e *CorruptError) Error() string { return fmt.Sprintf("record %s: %s", e.Key, e.Reason) }

// Options for Open.
type Options struct {
	// FS replaces the real filesystem (vfs.NewMem for tests and the
	// simulator). Nil means the OS.
	FS vfs.FS
	// NoSync commits without fsync. Only the benchmark's baseline uses it;
	// it would break I5 in production.
	NoSync bool
	// Sealer encrypts the secrets a record holds before they are written
	// (T10); nil keeps them in clear (in-memory stores of tests and the
	// simulator).
	Sealer *trust.Sealer
}

// Store is the durable record over one Pebble database.
type Store struct {
	db        *pebble.DB
	writeOpts *pebble.WriteOptions
	sealer    *trust.Sealer
	closeOnce sync.Once
	closeErr  error
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)         {}
func (quietLogger) Errorf(string, ...any)        {}
func (quietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// Open opens (or creates) the store in dir.
func Open(dir string, o Options) (*Store, error) {
	po := &pebble.Options{
		Logger: quietLogger{},
		// Every callback with a Webhook-Id looks its delivery up, and almost
		// every lookup misses: bloom filters answer a miss from memory
		// instead of reading a block of every level.
		CacheSize: CacheSize,
		// A history entry is deleted HistoryLimit transitions after it is
		// written; a memtable this size usually holds both, so neither ever
		// reaches an sstable or a compaction.
		MemTableSize: 64 << 20,
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if o.FS != nil {
		po.FS = o.FS
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	wo := pebble.Sync
	if o.NoSync {
		wo = pebble.NoSync
	}
	return &Store{db: db, writeOpts: wo, sealer: o.Sealer}, nil
}

// Close flushes and closes the database. Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("persistence: encode %T: %v", v, err)) // our own types always encode
	}
	return append([]byte{codecV1}, b...)
}

func decode(key, val []byte, v any) error {
	if len(val) == 0 {
		return &CorruptError{Malformed{Key: string(key), Reason: "empty value"}}
	}
	if val[0] != codecV1 {
		return &CorruptError{Malformed{Key: string(key), Reason: fmt.Sprintf("unknown encoding version %d", val[0])}}
	}
	dec := json.NewDecoder(bytes.NewReader(val[1:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &CorruptError{Malformed{Key: string(key), Reason: "does not decode: " + err.Error()}}
	}
	return nil
}

func (s *Store) get(key []byte, v any) error {
	val, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	defer closer.Close()
	return decode(key, val, v)
}

// scan calls f for every key with the prefix, in key order, from start
// (inclusive; nil means the prefix start). f returns false to stop.
func (s *Store) scan(prefix, start []byte, f func(k, v []byte) (bool, error)) error {
	lower := prefix
	if start != nil {
		lower = start
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		more, err := f(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if !more {
			break
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
}

func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// --- keys -------------------------------------------------------------------

func marqueeKey(id string) []byte { return []byte("m/" + id) }
func historyKey(id string, seq uint64) []byte {
	return fmt.Appendf(nil, "h/%s/%016x", id, seq)
}
func dedupKey(marqueeID, deliveryID string) []byte {
	return []byte("d/" + marqueeID + "/" + deliveryID)
}
func poolKey(name string) []byte             { return []byte("p/" + name) }
func admissionKey(pool, job string) []byte   { return []byte("a/" + pool + "/" + job) }
func admissionPrefix(pool string) []byte     { return []byte("a/" + pool + "/") }
func wakeKey(at time.Time, id string) []byte { return wakeKeyOf(at, KindMarquee, id) }

func wakeKeyOf(at time.Time, kind, id string) []byte {
	return fmt.Appendf(nil, "w/%016x/%s/%s", uint64(at.UnixNano()), kind, id)
}

func envKey(id string) []byte { return []byte("e/" + id) }

func branchKey(branch string) []byte { return []byte("b/" + branch) }

// Entity kinds in the wake index.
const (
	KindMarquee     = "m"
	KindEnvironment = "e"
)

// --- records ----------------------------------------------------------------

// MarqueeRecord is a marquee snapshot with the store's bookkeeping.
type MarqueeRecord struct {
	State marquee.State `json:"state"`
	// HistorySeq is the sequence of the newest history entry.
	HistorySeq uint64 `json:"history_seq"`
	// WakeAt is the wake-index entry this snapshot owns (zero: none).
	WakeAt time.Time `json:"wake_at,omitzero"`
}

// DedupRecord is the first answer to a webhook delivery (M20), keyed by
// marquee and delivery id (T5).
type DedupRecord struct {
	DeliveryID string    `json:"delivery_id"`
	At         time.Time `json:"at"`
	MarqueeID  string    `json:"marquee_id"`
	Status     int       `json:"status"`
	Body       []byte    `json:"body"`
	// BodySHA256 is the hash of the request body that got this answer: a
	// repeat with another body is a different message under a reused id.
	BodySHA256 []byte `json:"body_sha256,omitempty"`
}

// SameBody reports whether a delivery's body is the one this record
// answered. A record written before bodies were hashed answers as before.
func (r DedupRecord) SameBody(h [32]byte) bool {
	return len(r.BodySHA256) == 0 || bytes.Equal(r.BodySHA256, h[:])
}

// PoolMeta is what a pool keeps besides its job records.
type PoolMeta struct {
	NextSequence uint64 `json:"next_sequence"`
}

// LoadMarquee reads one marquee snapshot. ErrNotFound if there is none; a
// *CorruptError if it does not decode or validate.
func (s *Store) LoadMarquee(id string) (MarqueeRecord, error) {
	var r MarqueeRecord
	key := marqueeKey(id)
	if err := s.get(key, &r); err != nil {
		return MarqueeRecord{}, err
	}
	if err := s.openMarquee(key, &r); err != nil {
		return MarqueeRecord{}, err
	}
	return r, nil
}

// ListMarquees returns up to limit live (non-tombstone) marquees with ids
// after `after`, in id order, the cursor to continue from ("" at the end),
// and the malformed records met on the way.
func (s *Store) ListMarquees(after string, limit int, keep func(marquee.State) bool) ([]marquee.State, string, []Malformed, error) {
	var out []marquee.State
	var bad []Malformed
	var start []byte
	if after != "" {
		start = append(marqueeKey(after), 0)
	}
	next := ""
	err := s.scan([]byte("m/"), start, func(k, v []byte) (bool, error) {
		var r MarqueeRecord
		if err := decode(k, v, &r); err != nil {
			bad = append(bad, err.(*CorruptError).Malformed)
			return true, nil
		}
		if err := s.openMarquee(k, &r); err != nil {
			bad = append(bad, err.(*CorruptError).Malformed)
			return true, nil
		}
		if r.State.Tombstone != nil || (keep != nil && !keep(r.State)) {
			return true, nil
		}
		if len(out) == limit {
			next = out[len(out)-1].ID
			return false, nil
		}
		out = append(out, r.State)
		return true, nil
	})
	return out, next, bad, err
}

// History returns up to limit entries of a marquee's history, newest first.
func (s *Store) History(id string, limit int) ([]marquee.Entry, error) {
	var all []marquee.Entry
	err := s.scan([]byte("h/"+id+"/"), nil, func(k, v []byte) (bool, error) {
		var e marquee.Entry
		if err := decode(k, v, &e); err != nil {
			return false, err
		}
		all = append(all, e)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]marquee.Entry, 0, min(limit, len(all)))
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, all[i])
	}
	return out, nil
}

// Dedup returns the first answer to a marquee's delivery id, or
// ErrNotFound. The same delivery id of another marquee is another
// delivery (T5).
func (s *Store) Dedup(marqueeID, deliveryID string) (DedupRecord, error) {
	var r DedupRecord
	err := s.get(dedupKey(marqueeID, deliveryID), &r)
	if err == nil && r.MarqueeID != marqueeID {
		// A record of the layout before T5 ("d/<delivery>") whose id
		// happens to read as this marquee's: not this delivery.
		return DedupRecord{}, ErrNotFound
	}
	return r, err
}

// PruneDedup deletes delivery records older than cutoff (http-api.md keeps
// them at least 72 hours) and returns how many went.
func (s *Store) PruneDedup(cutoff time.Time) (int, error) {
	b := s.db.NewBatch()
	defer b.Close()
	n := 0
	err := s.scan([]byte("d/"), nil, func(k, v []byte) (bool, error) {
		var r DedupRecord
		if err := decode(k, v, &r); err != nil || r.At.Before(cutoff) {
			// A record that does not decode can never answer a duplicate.
			n++
			return true, b.Delete(append([]byte(nil), k...), nil)
		}
		return true, nil
	})
	if err != nil || n == 0 {
		return 0, err
	}
	return n, b.Commit(s.writeOpts)
}

// LoadPool reads a pool's metadata and every admission record (A7). The
// records come back in key order; admission.Rebuild orders them by
// sequence. Records that fail to decode are returned as malformed (A8).
func (s *Store) LoadPool(name string) (PoolMeta, []admission.Job, []Malformed, error) {
	var meta PoolMeta
	if err := s.get(poolKey(name), &meta); err != nil && !errors.Is(err, ErrNotFound) {
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return meta, nil, nil, err
		}
		// The sequence is recovered from the records themselves.
	}
	var jobs []admission.Job
	var bad []Malformed
	err := s.scan(admissionPrefix(name), nil, func(k, v []byte) (bool, error) {
		var j admission.Job
		if err := decode(k, v, &j); err != nil {
			bad = append(bad, err.(*CorruptError).Malformed)
			return true, nil
		}
		if want := string(admissionKey(name, j.ID)); want != string(k) {
			bad = append(bad, Malformed{Key: string(k), Reason: fmt.Sprintf("record names job %q, key does not", j.ID)})
			return true, nil
		}
		jobs = append(jobs, j)
		return true, nil
	})
	return meta, jobs, bad, err
}

// Wake is one entry of the wake index.
type Wake struct {
	At   time.Time
	Kind string // KindMarquee or KindEnvironment
	ID   string
}

// Wakes returns every wake-index entry due at or before until, earliest
// first. Only entities with work due are listed, so start-up cost follows the
// work, not the number of stored marquees.
func (s *Store) Wakes(until time.Time) ([]Wake, error) {
	var out []Wake
	end := wakeKey(until, "\xff")
	err := s.scan([]byte("w/"), nil, func(k, _ []byte) (bool, error) {
		if bytes.Compare(k, end) > 0 {
			return false, nil
		}
		var nanos uint64
		parts := strings.SplitN(string(k), "/", 4)
		if len(parts) != 4 || (parts[2] != KindMarquee && parts[2] != KindEnvironment) {
			return true, nil // not ours; never written by this version
		}
		if _, err := fmt.Sscanf(parts[1], "%016x", &nanos); err != nil {
			return true, nil
		}
		out = append(out, Wake{At: time.Unix(0, int64(nanos)).UTC(), Kind: parts[2], ID: parts[3]})
		return true, nil
	})
	return out, err
}

// EnvRecord is an environment's durable record with the store's
// bookkeeping.
type EnvRecord struct {
	Env    environment.Env `json:"env"`
	WakeAt time.Time       `json:"wake_at,omitzero"`
}

// LoadEnv reads one environment record; ErrNotFound or a *CorruptError.
func (s *Store) LoadEnv(id string) (EnvRecord, error) {
	var r EnvRecord
	key := envKey(id)
	if err := s.get(key, &r); err != nil {
		return EnvRecord{}, err
	}
	if !environment.ValidID(r.Env.ID) || r.Env.ID != id {
		return EnvRecord{}, &CorruptError{Malformed{Key: string(key), Reason: fmt.Sprintf("record names environment %q", r.Env.ID)}}
	}
	return r, nil
}

// ListEnvs returns every environment record in id order (tombstones
// included: they are kept for leak audits, E12), and the malformed ones.
func (s *Store) ListEnvs() ([]environment.Env, []Malformed, error) {
	var out []environment.Env
	var bad []Malformed
	err := s.scan([]byte("e/"), nil, func(k, v []byte) (bool, error) {
		var r EnvRecord
		if err := decode(k, v, &r); err != nil {
			bad = append(bad, err.(*CorruptError).Malformed)
			return true, nil
		}
		out = append(out, r.Env)
		return true, nil
	})
	return out, bad, err
}

// ListEnvIDs lists every stored environment's id, in key order, without
// decoding the records (the reconciler's sweep; each actor reads its own).
func (s *Store) ListEnvIDs() ([]string, error) {
	var out []string
	err := s.scan([]byte("e/"), nil, func(k, _ []byte) (bool, error) {
		out = append(out, string(k[len("e/"):]))
		return true, nil
	})
	return out, err
}

// BranchGeneration reads the last route generation given out for a branch.
func (s *Store) BranchGeneration(branch string) (uint64, error) {
	var g uint64
	err := s.get(branchKey(branch), &g)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return g, err
}

// ForEach calls f with every key and value in the store, in key order:
// a raw view for tests that prove a refusal wrote nothing (T12) and for
// debugging. The value is only valid during the call.
func (s *Store) ForEach(f func(k, v []byte) error) error {
	return s.scan(nil, nil, func(k, v []byte) (bool, error) { return true, f(k, v) })
}

// --- batches ------------------------------------------------------------------

// Batch collects one transition's writes; Commit makes them durable
// together.
type Batch struct {
	s *Store
	b *pebble.Batch
}

// NewBatch starts a transition.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, b: s.db.NewBatch()} }

// PutMarquee writes the snapshot and moves its wake-index entry from
// oldWake to r.WakeAt.
func (b *Batch) PutMarquee(r MarqueeRecord, oldWake time.Time) {
	id := r.State.ID
	if !oldWake.IsZero() && !oldWake.Equal(r.WakeAt) {
		_ = b.b.Delete(wakeKey(oldWake, id), nil)
	}
	if !r.WakeAt.IsZero() {
		_ = b.b.Set(wakeKey(r.WakeAt, id), nil, nil)
	}
	_ = b.b.Set(marqueeKey(id), encode(b.s.sealMarquee(r)), nil)
}

// PutEnv writes an environment record and moves its wake-index entry from
// oldWake to r.WakeAt.
func (b *Batch) PutEnv(r EnvRecord, oldWake time.Time) {
	id := r.Env.ID
	if !oldWake.IsZero() && !oldWake.Equal(r.WakeAt) {
		_ = b.b.Delete(wakeKeyOf(oldWake, KindEnvironment, id), nil)
	}
	if !r.WakeAt.IsZero() {
		_ = b.b.Set(wakeKeyOf(r.WakeAt, KindEnvironment, id), nil, nil)
	}
	_ = b.b.Set(envKey(id), encode(r), nil)
}

// PutBranchGeneration records the last route generation of a branch.
func (b *Batch) PutBranchGeneration(branch string, g uint64) {
	_ = b.b.Set(branchKey(branch), encode(g), nil)
}

// AppendHistory writes entry number seq and drops the one that falls out of
// the window, so a marquee never holds more than HistoryLimit entries.
func (b *Batch) AppendHistory(id string, seq uint64, e marquee.Entry) {
	_ = b.b.Set(historyKey(id, seq), encode(e), nil)
	if seq > HistoryLimit {
		_ = b.b.Delete(historyKey(id, seq-HistoryLimit), nil)
	}
}

// PutDedup records the first answer to a delivery.
func (b *Batch) PutDedup(r DedupRecord) {
	_ = b.b.Set(dedupKey(r.MarqueeID, r.DeliveryID), encode(r), nil)
}

// PutAdmission writes a job record; a job with status None is deleted.
func (b *Batch) PutAdmission(pool string, j admission.Job) {
	if j.Status == admission.None {
		_ = b.b.Delete(admissionKey(pool, j.ID), nil)
		return
	}
	_ = b.b.Set(admissionKey(pool, j.ID), encode(j), nil)
}

// PutPoolMeta writes a pool's metadata.
func (b *Batch) PutPoolMeta(pool string, m PoolMeta) { _ = b.b.Set(poolKey(pool), encode(m), nil) }

// PutRaw writes bytes as they are. Tests use it to plant malformed records.
func (b *Batch) PutRaw(key string, val []byte) { _ = b.b.Set([]byte(key), val, nil) }

// Commit makes the batch durable (fsync unless the store is NoSync).
func (b *Batch) Commit() error {
	defer b.b.Close()
	if err := b.b.Commit(b.s.writeOpts); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Discard drops an uncommitted batch.
func (b *Batch) Discard() { _ = b.b.Close() }

var _ io.Closer = (*Store)(nil)
