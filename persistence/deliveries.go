package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// An entity's deliveries (M20, T5) are one record beside it, r/<entity>,
// rewritten in the batch of every step that takes a delivery: the ids'
// hashes, the bodies' hashes, when, and the first answer, for the last
// MaxDeliveries deliveries younger than the retention. One key per
// delivery (the d/ family this replaces) made a store's live size grow
// with the callback rate times the retention; on etcd each key costs
// several times its value, and 200 callbacks a second for 72 h did not fit
// in etcd's default quota. An entity's record is bounded instead: the
// store grows with the entities, not the traffic. What that costs is in
// docs/rules/marquee.md (M20): a repeat of a delivery that fell out of the
// record is taken as new, and is then answered as a callback it no longer
// fits (stale, duplicate step, ignored), not byte for byte as the first.

// MaxDeliveries is how many deliveries an entity's record keeps: a
// workflow run calls back a handful of times, so this is several runs'
// worth within the retention.
const MaxDeliveries = 64

// maxDeliveryReply bounds one stored answer (answers are under a hundred
// bytes; the bound refuses a corrupt length, not a real answer).
const maxDeliveryReply = 4 << 10

// deliveriesV1 is the record's version byte: a binary layout, not JSON,
// because it is rewritten with every delivery (see encode).
const deliveriesV1 = 0x44

// hashLen is how much of a SHA-256 an entry keeps of the delivery id and
// of the body: the ids compared are one entity's last MaxDeliveries, so 64
// bits leave a collision at about 2^-58 per delivery.
const hashLen = 8

// Delivery is one delivery an entity answered.
type Delivery struct {
	ID   [hashLen]byte // of the delivery id
	Body [hashLen]byte // of the request body
	At   time.Time     // when it was answered, to the second
	// Reply is the first answer, byte for byte.
	Reply []byte
}

// Deliveries is what an entity's record holds, oldest first.
type Deliveries []Delivery

// NewDelivery makes the entry for a delivery answered at at.
func NewDelivery(id string, body [32]byte, at time.Time, reply []byte) Delivery {
	return DeliveryOf(id, body).Answered(at, reply)
}

// DeliveryOf is a delivery's entry before it is answered: the hashes the
// record compares (the webhook path takes them once per delivery).
func DeliveryOf(id string, body [32]byte) Delivery {
	var d Delivery
	h := sha256.Sum256([]byte(id))
	copy(d.ID[:], h[:])
	copy(d.Body[:], body[:])
	return d
}

// Answered is the entry answered at at (kept to the second) with reply.
func (d Delivery) Answered(at time.Time, reply []byte) Delivery {
	d.At, d.Reply = at.Truncate(time.Second), reply
	return d
}

// Find returns the entry of a delivery id, if the record holds it.
func (ds Deliveries) Find(id string) (Delivery, bool) { return ds.Lookup(DeliveryOf(id, [32]byte{})) }

// Lookup returns the entry the record holds for d's delivery id, if any.
func (ds Deliveries) Lookup(d Delivery) (Delivery, bool) {
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].ID == d.ID {
			return ds[i], true
		}
	}
	return Delivery{}, false
}

// With returns the record after d: entries older than the retention
// before d.At dropped, then the oldest beyond MaxDeliveries. ds is not
// changed (the actor keeps it until the batch commits): d goes into room
// past ds's end, which ds does not see. So only the latest record made
// from ds may be kept; a second With from ds reuses the first's room
// (the actor makes one per step, and keeps it only once it committed).
// The room is twice the bound, so the entries are copied once per
// MaxDeliveries deliveries rather than with each (the copy was two
// fifths of the durable path's garbage).
func (ds Deliveries) With(d Delivery, retention time.Duration) Deliveries {
	cutoff := d.At.Add(-retention)
	keep := ds
	for len(keep) > 0 && keep[0].At.Before(cutoff) {
		keep = keep[1:]
	}
	if len(keep) >= MaxDeliveries {
		keep = keep[len(keep)-MaxDeliveries+1:]
	}
	if len(keep) == cap(keep) {
		grown := make(Deliveries, len(keep), 2*MaxDeliveries)
		copy(grown, keep)
		keep = grown
	}
	if n := len(keep); n > 0 && bytes.Equal(keep[n-1].Reply, d.Reply) {
		// The same answer as the last shares its bytes, so that encode
		// tells them equal without reading them (a run's answers repeat).
		d.Reply = keep[n-1].Reply
	}
	return append(keep, d)
}

// KeptPast reports whether the record keeps a delivery older than the
// retention before its newest, which With drops: verify's and the
// simulator's check of a stored record.
func (ds Deliveries) KeptPast(retention time.Duration) bool {
	return len(ds) > 0 && ds[0].At.Before(ds[len(ds)-1].At.Add(-retention))
}

// DeliveriesKey is an entity's deliveries record.
func DeliveriesKey(entity string) []byte { return []byte(DeliveriesFamily + entity) }

// encode lays the record out as: version; the distinct answers (count,
// then each as length and bytes); the entries (count, then each as id
// hash, body hash, unix seconds, answer index). Answers repeat (a reply
// says the result and the generations), so each is stored once. It
// appends to dst (the batch copies what it is given, so the caller's
// buffer is reused).
func (ds Deliveries) encode(dst []byte) []byte {
	var distinct [MaxDeliveries][]byte
	var index [MaxDeliveries]byte
	replies := distinct[:0]
	if len(ds) > len(index) {
		panic("persistence: a deliveries record over its bound") // With and the decoder never make one
	}
	for i, d := range ds {
		var j int
		if i > 0 && sameBytes(ds[i-1].Reply, d.Reply) {
			j = int(index[i-1])
		} else {
			j = slices.IndexFunc(replies, func(r []byte) bool { return sameReply(r, d.Reply) })
		}
		if j < 0 {
			j = len(replies)
			replies = append(replies, d.Reply)
		}
		index[i] = byte(j)
	}
	b := slices.Grow(dst, 8+len(ds)*(2*hashLen+8)+len(replies)*96)
	b = append(b, deliveriesV1)
	b = binary.AppendUvarint(b, uint64(len(replies)))
	for _, r := range replies {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	b = binary.AppendUvarint(b, uint64(len(ds)))
	for i, d := range ds {
		b = append(b, d.ID[:]...)
		b = append(b, d.Body[:]...)
		b = binary.AppendVarint(b, d.At.Unix())
		b = binary.AppendUvarint(b, uint64(index[i]))
	}
	return b
}

// sameReply compares two answers: those read from one record share their
// bytes, so most are told equal without reading them.
func sameReply(a, b []byte) bool { return sameBytes(a, b) || bytes.Equal(a, b) }

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// errDeliveries says why a deliveries record does not decode.
var errDeliveries = errors.New("deliveries record")

// DecodeDeliveries reads a record encode wrote, refusing anything out of
// its bounds (a corrupt count or length is not allocated).
func DecodeDeliveries(v []byte) (Deliveries, error) {
	r := reader{b: v}
	if ver := r.byte(); ver != deliveriesV1 {
		return nil, fmt.Errorf("%w: version %#x, want %#x", errDeliveries, ver, deliveriesV1)
	}
	nr := r.count(MaxDeliveries)
	replies := make([][]byte, 0, nr)
	for range nr {
		// A copy: v is the backend's buffer, valid only during the read
		// (the simulator found answers from a reused one).
		replies = append(replies, bytes.Clone(r.bytes(r.count(maxDeliveryReply))))
	}
	n := r.count(MaxDeliveries)
	ds := make(Deliveries, 0, n)
	for range n {
		var d Delivery
		copy(d.ID[:], r.bytes(hashLen))
		copy(d.Body[:], r.bytes(hashLen))
		d.At = time.Unix(r.varint(), 0).UTC()
		if i := r.count(nr - 1); r.err == nil {
			d.Reply = replies[i]
		}
		ds = append(ds, d)
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case len(r.b) != 0:
		return nil, fmt.Errorf("%w: %d bytes after the last entry", errDeliveries, len(r.b))
	}
	return ds, nil
}

// reader takes a record apart, keeping its first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errDeliveries, what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail("empty")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// count reads a uvarint that must be at most max.
func (r *reader) count(max int) int {
	v, n := binary.Uvarint(r.b)
	switch {
	case n <= 0:
		r.fail("cut short")
		return 0
	case max < 0:
		r.fail("an entry names an answer where none is stored")
		return 0
	case v > uint64(max):
		r.fail(fmt.Sprintf("count %d over %d", v, max))
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("cut short")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if len(r.b) < n {
		r.fail("cut short")
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

// Deliveries reads an entity's record; an entity that never took one has
// none. Records of the layout before (d/<entity>/<delivery id>, kept until
// their retention ends) are read in while the entity has no record of its
// own: its first delivery since writes them into one.
func (s *Store) Deliveries(entity string) (Deliveries, error) {
	var ds Deliveries
	err := s.read(func(kv Backend) error {
		return kv.Get(DeliveriesKey(entity), func(v []byte) error {
			var err error
			ds, err = DecodeDeliveries(v)
			if err != nil {
				return &CorruptError{Malformed{Key: string(DeliveriesKey(entity)), Reason: err.Error()}}
			}
			return nil
		})
	})
	switch {
	case !errors.Is(err, ErrNotFound):
		return ds, err
	case !s.mayHoldLegacy():
		return nil, nil
	}
	return s.legacyDeliveries(entity)
}

// Whether the store may hold d/ records: one look at the family, at the
// first entity with no record of its own, saves every later one a second
// read (on etcd, a second round trip).
const (
	legacyUnknown = iota
	legacyPresent
	legacyAbsent
)

func (s *Store) mayHoldLegacy() bool {
	switch s.legacyState.Load() {
	case legacyPresent:
		return true
	case legacyAbsent:
		return false
	}
	found := false
	err := s.Scan([]byte(DedupFamily), nil, func([]byte, []byte) (bool, error) { found = true; return false, nil })
	if err != nil {
		return true // look again next time; meanwhile read as if present
	}
	s.noteLegacy(found)
	return found
}

func (s *Store) noteLegacy(present bool) {
	if present {
		s.legacyState.Store(legacyPresent)
	} else {
		s.legacyState.Store(legacyAbsent)
	}
}

// legacyDeliveries reads an entity's d/ records, newest MaxDeliveries.
func (s *Store) legacyDeliveries(entity string) (Deliveries, error) {
	var ds Deliveries
	prefix := DedupPrefix(entity)
	err := s.Scan(prefix, nil, func(k, v []byte) (bool, error) {
		var r DedupRecord
		if Decode(k, v, &r) != nil || r.Entity != entity || len(r.BodySHA256) == 0 {
			// Unusable, another layout's, or from before bodies were
			// hashed (long past any retention): it answers nothing.
			return true, nil
		}
		var body [32]byte
		copy(body[:], r.BodySHA256)
		ds = append(ds, NewDelivery(r.DeliveryID, body, r.At, r.Body))
		return true, nil
	})
	slices.SortStableFunc(ds, func(a, b Delivery) int { return a.At.Compare(b.At) })
	if len(ds) > MaxDeliveries {
		ds = ds[len(ds)-MaxDeliveries:]
	}
	return ds, err
}

// PutDeliveries stages an entity's record as it is after a delivery.
func (b *Batch) PutDeliveries(entity, _ string, ds Deliveries) {
	buf := deliveriesBuffers.Get().(*[]byte)
	*buf = ds.encode((*buf)[:0])
	b.w.Set(DeliveriesKey(entity), *buf)
	deliveriesBuffers.Put(buf)
}

// deliveriesBuffers hold PutDeliveries' encodings, every one kept (a
// record is bounded: at most MaxDeliveries answers of maxDeliveryReply):
// Set copies (Writes), so a buffer is free again once it returns.
var deliveriesBuffers = sync.Pool{New: func() any { return new([]byte) }}
