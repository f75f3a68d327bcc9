package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// An entity's deliveries are one record beside it, written in
// the batch of every step that takes a delivery: the ids' hashes, the
// bodies' hashes, when, and the first answer, for the last MaxDeliveries
// deliveries younger than the retention. One key per delivery (the d/
// family of store format 1) made a store's live size grow with the
// callback rate times the retention; on etcd each key costs several times
// its value, and 200 callbacks a second for 72 h did not fit in etcd's
// default quota. An entity's record is bounded instead: the store grows
// with the entities, not the traffic. What that costs is in
// docs/rules/marquee.md: a repeat of a delivery that fell out of the
// record is taken as new, and is then answered as a callback it no longer
// fits (stale, duplicate step, ignored), not byte for byte as the first.
//
// Since store format 3 the record is kept in chunks, r/<entity>#<slot>
// (format 2 kept it whole under r/<entity>): a delivery rewrites only its
// own chunk, at most ChunkLen deliveries and about 200 bytes, not the
// whole record (1.5 KB when full), because those bytes, through the WAL,
// the memtable, flushes and compactions, were the largest part of the
// store's work for a callback. Each delivery has a sequence number; chunk
// c holds deliveries c*ChunkLen to c*ChunkLen+ChunkLen-1 in slot c mod
// chunkSlots, more slots than the chunks MaxDeliveries deliveries can
// span, so the live chunks' slots are distinct and a chunk is never
// deleted: its slot is written again. Every chunk written says the oldest
// sequence the record keeps (its cut); a reader takes the cut of the
// chunk holding the newest delivery and ignores older ones other slots
// still hold. '#' sorts before every character of an id, so an entity's
// keys are adjacent (a scan meets them together).
//
// Since store format 4 a kind may keep the newest chunk in the entity's
// own record (Recent), which every step writes anyway: a delivery then
// writes no key of its own, only a chunk's slot when the chunk fills (one
// delivery in ChunkLen), because each key a callback's batch writes costs
// CPU (its memtable insert, then its share of flushes and compactions;
// docs/decisions, "What a callback writes"), far more than its bytes.
// The record's chunk is the newest: a slot
// holding the same chunk is an older copy of it, and is not read.

// MaxDeliveries is how many deliveries an entity's record keeps: a
// workflow run calls back a handful of times, so this is several runs'
// worth within the retention.
const MaxDeliveries = 64

// maxDeliveryReply bounds one stored answer (answers are under a hundred
// bytes; the bound refuses a corrupt length, not a real answer).
const maxDeliveryReply = 4 << 10

// deliveriesV1 is the record's version byte: a binary layout, not JSON,
// because it is rewritten with every delivery (see encode). Store format
// 2 wrote the whole record under r/<entity>; it is read, never written.
const deliveriesV1 = 0x44

// deliveriesChunk is a chunk's version byte (store format 3).
const deliveriesChunk = 0x45

// ChunkLen is how many deliveries a chunk holds, and chunkSlots how many
// chunk keys an entity has: MaxDeliveries deliveries span at most
// MaxDeliveries/ChunkLen+1 chunks.
const (
	ChunkLen   = 8
	chunkSlots = MaxDeliveries/ChunkLen + 1
)

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
	// Seq is the delivery's place among its entity's, from 1 (see With).
	Seq uint64
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
	d.Seq = 1
	if n := len(ds); n > 0 {
		d.Seq = ds[n-1].Seq + 1 // taken before the drops: never reused
	}
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

// DeliveriesKey is an entity's deliveries record of store format 2.
func DeliveriesKey(entity string) []byte { return []byte(DeliveriesFamily + entity) }

// DeliveriesChunkPrefix is what an entity's chunk keys begin with.
func DeliveriesChunkPrefix(entity string) []byte { return []byte(DeliveriesFamily + entity + "#") }

// DeliveriesChunkKey is the key of an entity's chunk slot.
func DeliveriesChunkKey(entity string, slot int) []byte {
	return append(DeliveriesChunkPrefix(entity), byte('0'+slot))
}

// deliveriesRange bounds an entity's deliveries keys: its format-2 record
// and its chunks, and no other entity's ('$' follows '#').
func deliveriesRange(entity string) (lower, upper []byte) {
	return DeliveriesKey(entity), []byte(DeliveriesFamily + entity + "$")
}

// slotOf is the slot of the chunk holding sequence seq.
func slotOf(seq uint64) int { return int(seq / ChunkLen % chunkSlots) }

// newestChunk is where the chunk of ds's newest delivery starts in ds.
func (ds Deliveries) newestChunk() int {
	start, c := len(ds)-1, ds[len(ds)-1].Seq/ChunkLen
	for start > 0 && ds[start-1].Seq/ChunkLen == c {
		start--
	}
	return start
}

// Recent is the newest chunk of ds, with its cut, as a kind that keeps it
// in its entity's record stores it there (store format 4); nil for none.
// It is a new slice: the record keeps it.
func (ds Deliveries) Recent() []byte {
	if len(ds) == 0 {
		return nil
	}
	return ds[ds.newestChunk():].encodeChunk(nil, ds[0].Seq)
}

// InRecord is the newest chunk of an entity's deliveries as its record
// keeps it (Recent), with the record's key, which names it when it does
// not decode. The zero InRecord: the kind keeps none, or the record holds
// none yet.
type InRecord struct {
	Key   string
	Chunk []byte
}

// encode lays the record out as: version; the distinct answers (count,
// then each as length and bytes); the entries (count, then each as id
// hash, body hash, unix seconds, answer index). Answers repeat (a reply
// says the result and the generations), so each is stored once. It
// appends to dst (the batch copies what it is given, so the caller's
// buffer is reused).
func (ds Deliveries) encode(dst []byte) []byte {
	return ds.appendBody(append(dst, deliveriesV1))
}

// encodeChunk lays out a chunk: version, the record's cut (the oldest
// sequence it keeps), the chunk's first sequence, then the entries as
// encode lays them out. ds is the chunk's entries, in order.
func (ds Deliveries) encodeChunk(dst []byte, cut uint64) []byte {
	b := append(dst, deliveriesChunk)
	b = binary.AppendUvarint(b, cut)
	b = binary.AppendUvarint(b, ds[0].Seq)
	return ds.appendBody(b)
}

// appendBody is a record's answers and entries, after its header.
func (ds Deliveries) appendBody(dst []byte) []byte {
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
// A format-2 record's deliveries are numbered from 1, oldest first.
func DecodeDeliveries(v []byte) (Deliveries, error) {
	r := reader{b: v}
	if ver := r.byte(); ver != deliveriesV1 {
		return nil, fmt.Errorf("%w: version %#x, want %#x", errDeliveries, ver, deliveriesV1)
	}
	return r.body(MaxDeliveries, 1)
}

// decodeChunk reads a chunk encodeChunk wrote: the record's cut and the
// chunk's deliveries, numbered.
func decodeChunk(v []byte) (cut uint64, ds Deliveries, err error) {
	r := reader{b: v}
	if ver := r.byte(); ver != deliveriesChunk {
		return 0, nil, fmt.Errorf("%w: version %#x, want %#x", errDeliveries, ver, deliveriesChunk)
	}
	cut = r.uvarint()
	first := r.uvarint()
	switch {
	case r.err != nil:
		return 0, nil, r.err
	case first == 0 || first > 1<<62:
		return 0, nil, fmt.Errorf("%w: chunk starts at sequence %d", errDeliveries, first)
	case cut == 0 || cut > first:
		return 0, nil, fmt.Errorf("%w: cut %d after the chunk's first delivery %d", errDeliveries, cut, first)
	}
	ds, err = r.body(ChunkLen, first)
	if err == nil && len(ds) == 0 {
		err = fmt.Errorf("%w: a chunk with no delivery", errDeliveries)
	}
	if err == nil && first/ChunkLen != ds[len(ds)-1].Seq/ChunkLen {
		err = fmt.Errorf("%w: deliveries %d to %d are not one chunk", errDeliveries, first, ds[len(ds)-1].Seq)
	}
	return cut, ds, err
}

// body reads a record's answers and at most max entries, numbering them
// from first.
func (r *reader) body(max int, first uint64) (Deliveries, error) {
	nr := r.count(max)
	replies := make([][]byte, 0, nr)
	for range nr {
		// A copy: v is the backend's buffer, valid only during the read
		// (the simulator found answers from a reused one).
		replies = append(replies, bytes.Clone(r.bytes(r.count(maxDeliveryReply))))
	}
	n := r.count(max)
	ds := make(Deliveries, 0, n)
	for i := range n {
		d := Delivery{Seq: first + uint64(i)}
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

func (r *reader) uvarint() uint64 { return readNumber(r, binary.Uvarint) }
func (r *reader) varint() int64   { return readNumber(r, binary.Varint) }

// readNumber takes one varint off the record with read.
func readNumber[T uint64 | int64](r *reader, read func([]byte) (T, int)) T {
	v, n := read(r.b)
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

// Deliveries reads an entity's deliveries (LoadDeliveries, without what
// its next write must do).
func (s *Store) Deliveries(entity string, rec InRecord) (Deliveries, error) {
	ds, _, err := s.LoadDeliveries(entity, rec)
	return ds, err
}

// LoadDeliveries reads an entity's deliveries: its chunks and the newest
// one its record keeps (rec), else its format-2 record, else the d/
// records of format 1 (kept until their retention ends); an entity that
// never took one has none. rewrite says that the entity's next write must
// write the whole record as chunks and clear every other slot and the
// format-2 record (PutDeliveries): what was read is of a layout before,
// or does not decode (then err is a CorruptError, and nothing in it can
// be told apart).
func (s *Store) LoadDeliveries(entity string, rec InRecord) (ds Deliveries, rewrite bool, err error) {
	var recs deliveryRecords
	recs.addRecent(rec)
	lower, upper := deliveriesRange(entity)
	err = s.read(func(kv Backend) error {
		return kv.Scan(lower, upper, func(k, v []byte) (bool, error) { recs.add(k, v); return true, nil })
	})
	switch {
	case err != nil:
		return nil, false, err
	case len(recs) > 0:
		return recs.merge()
	case !s.mayHoldLegacy():
		return nil, false, nil
	}
	ds, err = s.legacyDeliveries(entity)
	return ds, len(ds) > 0, err
}

// deliveryRecord is one of an entity's deliveries keys, decoded, or the
// chunk its record keeps (recent).
type deliveryRecord struct {
	key    string
	chunk  bool
	recent bool
	cut    uint64
	ds     Deliveries
	err    error
}

// deliveryRecords are an entity's deliveries keys, in key order.
type deliveryRecords []deliveryRecord

// add decodes one record (v is valid only during the scan's call).
func (rs *deliveryRecords) add(k, v []byte) {
	r := deliveryRecord{key: string(k)}
	var slot string
	_, slot, r.chunk = strings.Cut(r.key, "#")
	if r.chunk {
		r.cut, r.ds, r.err = decodeChunk(v)
		if r.err == nil && (len(slot) != 1 || int(slot[0])-'0' != slotOf(r.ds[0].Seq)) {
			r.err = fmt.Errorf("%w: deliveries from %d in slot %q, not %d", errDeliveries, r.ds[0].Seq, slot, slotOf(r.ds[0].Seq))
		}
	} else {
		r.ds, r.err = DecodeDeliveries(v)
	}
	*rs = append(*rs, r)
}

// addRecent takes the chunk an entity's record keeps, if any.
func (rs *deliveryRecords) addRecent(rec InRecord) {
	if len(rec.Chunk) == 0 {
		return
	}
	r := deliveryRecord{key: rec.Key, chunk: true, recent: true}
	r.cut, r.ds, r.err = decodeChunk(rec.Chunk)
	*rs = append(*rs, r)
}

// merge makes an entity's record of its keys: the chunks from the cut of
// the one holding the newest delivery, the record's own chunk standing
// for the slot of the same chunk; with no chunk, the format-2 record.
// Every delivery from the cut on must be there exactly once.
func (rs deliveryRecords) merge() (Deliveries, bool, error) {
	var (
		legacy      *deliveryRecord
		newest, cut uint64
		newestKey   string
		corrupt     = func(key, format string, args ...any) (Deliveries, bool, error) {
			return nil, true, &CorruptError{Malformed{Key: key, Reason: fmt.Sprintf(format, args...)}}
		}
	)
	for i := range rs {
		r := &rs[i]
		switch {
		case r.err != nil:
			return corrupt(r.key, "%v", r.err)
		case !r.chunk:
			legacy = r
		case r.ds[len(r.ds)-1].Seq > newest:
			newest, cut, newestKey = r.ds[len(r.ds)-1].Seq, r.cut, r.key
		}
	}
	rs = rs.superseded()
	if newest == 0 {
		return legacy.ds, true, nil
	}
	if newest-cut >= MaxDeliveries {
		return corrupt(newestKey, "%v: keeps deliveries %d to %d, over %d", errDeliveries, cut, newest, MaxDeliveries)
	}
	out := make(Deliveries, newest-cut+1)
	for _, r := range rs {
		for _, d := range r.ds {
			switch {
			case !r.chunk || d.Seq < cut:
				// Past the cut: an older chunk its slot still holds.
			case out[d.Seq-cut].Seq != 0:
				return corrupt(r.key, "%v: delivery %d twice", errDeliveries, d.Seq)
			default:
				out[d.Seq-cut] = d
			}
		}
	}
	for i, d := range out {
		if d.Seq == 0 {
			return corrupt(newestKey, "%v: delivery %d of %d to %d missing", errDeliveries, cut+uint64(i), cut, newest)
		}
	}
	return out, legacy != nil, nil
}

// superseded drops a slot holding the chunk the record keeps: the record
// is written with every delivery, the slot only when its chunk filled (or
// by a build of format 3, with each), so the record's is the newer copy.
func (rs deliveryRecords) superseded() deliveryRecords {
	i := slices.IndexFunc(rs, func(r deliveryRecord) bool { return r.recent })
	if i < 0 {
		return rs
	}
	c := rs[i].ds[0].Seq / ChunkLen
	return slices.DeleteFunc(slices.Clone(rs), func(r deliveryRecord) bool {
		return r.chunk && !r.recent && r.ds[0].Seq/ChunkLen == c
	})
}

// DeliveriesScan gathers the r/ family's records entity by entity, as a
// scan in key order meets them ('#' keeps an entity's keys together):
// verify's and the simulator's reading of every stored record. The chunks
// entities' records keep are given first (Recent): the records' families
// sort before r/.
type DeliveriesScan struct {
	entity  string
	recs    deliveryRecords
	recents map[string]InRecord
}

// Recent gives the chunk an entity's record keeps, if it keeps one, for
// the scan to read with the entity's keys.
func (sc *DeliveriesScan) Recent(entity string, rec InRecord) {
	if len(rec.Chunk) == 0 {
		return
	}
	if sc.recents == nil {
		sc.recents = map[string]InRecord{}
	}
	sc.recents[entity] = rec
}

// Unscanned returns, by entity, the deliveries of entities whose record
// keeps a chunk but that have no r/ key (fewer than ChunkLen deliveries),
// once the scan is over.
func (sc *DeliveriesScan) Unscanned() []EntityDeliveries {
	var out []EntityDeliveries
	for _, entity := range slices.Sorted(maps.Keys(sc.recents)) {
		var rs deliveryRecords
		rs.addRecent(sc.recents[entity])
		ds, _, err := rs.merge()
		out = append(out, EntityDeliveries{Entity: entity, Deliveries: ds, Err: err})
	}
	sc.recents = nil
	return out
}

// EntityDeliveries is one entity's deliveries as stored; Err is a
// CorruptError naming a record that does not decode or agree.
type EntityDeliveries struct {
	Entity     string
	Deliveries Deliveries
	Err        error
}

// Add takes the next record of the r/ family. When it is another
// entity's, the one before is done, and returned.
func (sc *DeliveriesScan) Add(k, v []byte) (EntityDeliveries, bool) {
	entity, _, _ := strings.Cut(strings.TrimPrefix(string(k), DeliveriesFamily), "#")
	var done EntityDeliveries
	ok := false
	if entity != sc.entity {
		done, ok = sc.End()
		sc.entity = entity
		sc.recs.addRecent(sc.recents[entity])
		delete(sc.recents, entity)
	}
	sc.recs.add(k, v)
	return done, ok
}

// End returns the last entity's deliveries, once the scan is over.
func (sc *DeliveriesScan) End() (EntityDeliveries, bool) {
	if len(sc.recs) == 0 {
		return EntityDeliveries{}, false
	}
	ds, _, err := sc.recs.merge()
	sc.recs = sc.recs[:0]
	return EntityDeliveries{Entity: sc.entity, Deliveries: ds, Err: err}, true
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
	for i := range ds {
		ds[i].Seq = uint64(i) + 1
	}
	return ds, err
}

// PutDeliveries stages an entity's record as it is after a delivery: the
// newest delivery's chunk, with the record's cut. inRecord says the
// entity's record keeps that chunk (Recent, in the same batch): then the
// chunk is written to its slot only once it is full, before the next
// delivery starts another. With rewrite (the record was read from a
// layout before, or did not decode; LoadDeliveries) it writes every chunk
// of the record, clears the other slots and deletes the format-2 record.
func (b *Batch) PutDeliveries(entity, _ string, ds Deliveries, rewrite, inRecord bool) {
	full := func(end int) bool { return ds[end-1].Seq%ChunkLen == ChunkLen-1 }
	if len(ds) == 0 || inRecord && !rewrite && !full(len(ds)) {
		return // the record carries the chunk until it fills (most callbacks)
	}
	buf := deliveriesBuffers.Get().(*[]byte)
	var written [chunkSlots]bool
	for end := len(ds); end > 0; {
		start := ds[:end].newestChunk()
		if slot := slotOf(ds[start].Seq); !inRecord || end < len(ds) || full(end) {
			*buf = ds[start:end].encodeChunk((*buf)[:0], ds[0].Seq)
			b.w.Set(DeliveriesChunkKey(entity, slot), *buf)
			written[slot] = true
		}
		if !rewrite {
			break
		}
		end = start
	}
	deliveriesBuffers.Put(buf)
	if rewrite {
		for slot, w := range written {
			if !w {
				b.w.Delete(DeliveriesChunkKey(entity, slot))
			}
		}
		b.w.Delete(DeliveriesKey(entity))
	}
}

// deliveriesBuffers hold PutDeliveries' encodings, every one kept (a
// record is bounded: at most MaxDeliveries answers of maxDeliveryReply):
// Set copies (Writes), so a buffer is free again once it returns.
var deliveriesBuffers = sync.Pool{New: func() any { return new([]byte) }}
