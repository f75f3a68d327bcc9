package persistence

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// find looks a delivery up in its entity's record as the actor does.
func find(t *testing.T, s *Store, entity, id string) (Delivery, bool) {
	t.Helper()
	ds, err := s.Deliveries(entity, InRecord{})
	require.NoError(t, err)
	return ds.Find(id)
}

func reply(n int) []byte { return fmt.Appendf(nil, `{"result":"applied","generation":%d}`, n) }

// TestM20DeliveriesKeepTheLastWithinTheRetention: a record drops what is
// older than the retention before its newest delivery, then the oldest
// beyond MaxDeliveries, and leaves the record it was made from as it was
// (the actor keeps that one until the batch commits).
func TestM20DeliveriesKeepTheLastWithinTheRetention(t *testing.T) {
	var ds Deliveries
	for i := range MaxDeliveries + 10 {
		ds = ds.With(NewDelivery(fmt.Sprint("d-", i), [32]byte{byte(i)}, t0.Add(time.Duration(i)*time.Minute), reply(i/8)), 72*time.Hour)
	}
	require.Len(t, ds, MaxDeliveries)
	_, ok := ds.Find("d-9")
	require.False(t, ok, "the oldest went past the bound")
	d, ok := ds.Find("d-10")
	require.True(t, ok)
	require.Equal(t, reply(1), d.Reply)
	require.Equal(t, DeliveryOf("", [32]byte{10}).Body, d.Body)
	require.NotEqual(t, DeliveryOf("", [32]byte{11}).Body, d.Body)

	before := slices.Clone(ds)
	later := ds.With(NewDelivery("late", [32]byte{}, t0.Add(200*time.Hour), reply(9)), 72*time.Hour)
	require.Len(t, later, 1, "everything else is older than 72 h before it")
	require.Equal(t, before, ds, "With does not change the record it is given")
	require.False(t, ds.KeptPast(72*time.Hour))
	require.True(t, append(Deliveries{ds[0]}, later...).KeptPast(72*time.Hour), "what With would have dropped")

	// Made again from ds (as after a commit that failed), a record takes
	// the same room: the one made before is no longer to be kept.
	full := ds.With(NewDelivery("next", [32]byte{}, ds[len(ds)-1].At, reply(9)), 72*time.Hour)
	require.Equal(t, before, ds, "nor when it drops the oldest")
	require.Equal(t, before[1:], full[:MaxDeliveries-1])
	_, ok = full.Find("next")
	require.True(t, ok)
}

// TestDeliveriesGrowWithoutACopyEachTime: a record made from the last
// one takes room past its end, and is copied once per MaxDeliveries
// deliveries, not with each (the copy was two fifths of a callback's
// garbage).
func TestDeliveriesGrowWithoutACopyEachTime(t *testing.T) {
	var ds Deliveries
	for i := range 3 * MaxDeliveries {
		ds = ds.With(NewDelivery(fmt.Sprint("d-", i), [32]byte{}, t0, reply(0)), time.Hour)
	}
	d := NewDelivery("d", [32]byte{}, t0, reply(0))
	allocs := testing.AllocsPerRun(MaxDeliveries, func() { ds = ds.With(d, time.Hour) })
	require.Zero(t, allocs, "a copy once in %d deliveries averages under one each", MaxDeliveries)
	require.Len(t, ds, MaxDeliveries)
}

// putDeliveries writes ds as the actor does after its newest delivery.
func putDeliveries(t *testing.T, s *Store, entity string, ds Deliveries, rewrite bool) {
	t.Helper()
	b := s.NewBatch()
	b.PutDeliveries(entity, "", ds, rewrite, false)
	require.NoError(t, b.Commit())
}

// TestM20DeliveriesRoundTripChunkByChunk: a delivery writes its chunk
// only, and the chunks read back as the record the actor held, through
// the bound (slots written again) and the retention (a cut past older
// chunks their slots still hold); each entity's keys are its own (m-1's
// are not m-10's), answers are kept byte for byte and stored once a chunk
// however often they repeat.
func TestM20DeliveriesRoundTripChunkByChunk(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		var one, ten Deliveries
		at := t0
		for i := range 3*MaxDeliveries + 5 {
			if i == 2*MaxDeliveries {
				at = at.Add(100 * time.Hour) // all but the newest past the retention
			}
			one = one.With(NewDelivery(fmt.Sprint("a-", i), [32]byte{1}, at, reply(i%2)), 72*time.Hour)
			b := s.NewBatch()
			b.PutDeliveries("m-1", "", one, false, false)
			require.Equal(t, 1, b.Len(), "a delivery writes its chunk, and nothing else")
			require.NoError(t, b.Commit())
			got, err := s.Deliveries("m-1", InRecord{})
			require.NoError(t, err)
			require.Equal(t, one, got, "after delivery %d", i)
		}
		ten = ten.With(NewDelivery("a-1", [32]byte{2}, t0, reply(7)), time.Hour)
		putDeliveries(t, s, "m-10", ten, false)
		got, err := s.Deliveries("m-10", InRecord{})
		require.NoError(t, err)
		require.Equal(t, ten, got)
		got, err = s.Deliveries("m-2", InRecord{})
		require.NoError(t, err)
		require.Empty(t, got)

		keys := 0
		require.NoError(t, s.Scan(DeliveriesChunkPrefix("m-1"), nil, func(k, v []byte) (bool, error) {
			keys++
			require.Less(t, len(v), 8+ChunkLen*(2*hashLen+6)+2*len(reply(0))+8, "%s: a chunk, each answer once", k)
			return true, nil
		}))
		require.Equal(t, chunkSlots, keys, "the slots are written again, never more")
	})
}

// TestM20AFormat2RecordIsWrittenAgainAsChunks: a record of store format
// 2 (the whole record under r/<entity>) is read, numbered, and written
// whole as chunks at the entity's next delivery, which deletes it.
func TestM20AFormat2RecordIsWrittenAgainAsChunks(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		var ds Deliveries
		for i := range 20 {
			ds = ds.With(NewDelivery(fmt.Sprint("a-", i), [32]byte{1}, t0, reply(i%3)), time.Hour)
		}
		b := s.NewBatch()
		b.Set(DeliveriesKey("m-1"), ds.encode(nil))
		require.NoError(t, b.Commit())

		got, rewrite, err := s.LoadDeliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.True(t, rewrite)
		require.Equal(t, ds, got)
		next := got.With(NewDelivery("a-20", [32]byte{1}, t0, reply(0)), time.Hour)
		b = s.NewBatch()
		b.PutDeliveries("m-1", "", next, rewrite, false)
		require.Equal(t, chunkSlots+1, b.Len(), "three chunks written, six slots cleared, the format-2 record deleted")
		require.NoError(t, b.Commit())

		got, rewrite, err = s.LoadDeliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.False(t, rewrite)
		require.Equal(t, next, got)
		require.ErrorIs(t, s.Get(DeliveriesKey("m-1"), new(any)), ErrNotFound, "the format-2 record is gone")
	})
}

// TestM20ADamagedChunkIsNamedAndTheRecordStartsOver: a chunk that does
// not decode, or a delivery missing between the cut and the newest, is a
// CorruptError naming a key, never a silent empty set; the next write
// starts the record over and clears every other slot, so no older chunk
// is read again as newer than it.
func TestM20ADamagedChunkIsNamedAndTheRecordStartsOver(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		var ds Deliveries
		for i := range 30 {
			ds = ds.With(NewDelivery(fmt.Sprint("a-", i), [32]byte{1}, t0, reply(0)), time.Hour)
			putDeliveries(t, s, "m-1", ds, false)
		}
		b := s.NewBatch()
		b.Delete(DeliveriesChunkKey("m-1", 1))
		require.NoError(t, b.Commit())
		_, rewrite, err := s.LoadDeliveries("m-1", InRecord{})
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Reason, "missing")
		require.True(t, rewrite)

		b = s.NewBatch()
		b.Set(DeliveriesChunkKey("m-1", 2), []byte{deliveriesChunk, 1, 200})
		require.NoError(t, b.Commit())
		_, rewrite, err = s.LoadDeliveries("m-1", InRecord{})
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "r/m-1#2", ce.Key)
		require.True(t, rewrite)

		fresh := Deliveries(nil).With(NewDelivery("b-0", [32]byte{2}, t0, reply(1)), time.Hour)
		putDeliveries(t, s, "m-1", fresh, rewrite)
		got, rewrite, err := s.LoadDeliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.False(t, rewrite)
		require.Equal(t, fresh, got, "the chunks of deliveries 8 to 30 were cleared")
	})
}

// TestM20LegacyDeliveriesAreReadUntilTheirRetentionEnds: a store of the
// layout before (a d/ key per delivery) still answers its deliveries' repeats,
// until the entity writes a record of its own or the pruner takes them.
func TestM20LegacyDeliveriesAreReadUntilTheirRetentionEnds(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		body := [32]byte{9}
		for _, r := range []DedupRecord{
			{DeliveryID: "old", At: t0, Entity: "m-1", HTTPStatus: 200, Body: []byte(`{"old":1}`), BodySHA256: body[:]},
			{DeliveryID: "new", At: t0.Add(80 * time.Hour), Entity: "m-1", HTTPStatus: 200, Body: []byte(`{"new":1}`), BodySHA256: body[:]},
			{DeliveryID: "other", At: t0, Entity: "m-10", HTTPStatus: 200, Body: []byte(`{}`), BodySHA256: body[:]},
		} {
			b.Put(DedupKey(r.Entity, r.DeliveryID), r)
		}
		require.NoError(t, b.Commit())
		d, ok := find(t, s, "m-1", "old")
		require.True(t, ok)
		require.Equal(t, []byte(`{"old":1}`), d.Reply)
		require.Equal(t, DeliveryOf("", body).Body, d.Body)
		_, ok = find(t, s, "m-1", "other")
		require.False(t, ok, "m-10's deliveries are not m-1's")

		n, err := s.PruneDedup(t0.Add(80*time.Hour - 72*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 2, n)
		_, ok = find(t, s, "m-1", "old")
		require.False(t, ok, "pruned")
		_, ok = find(t, s, "m-1", "new")
		require.True(t, ok)

		ds, rewrite, err := s.LoadDeliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.True(t, rewrite, "read from the layout before")
		putDeliveries(t, s, "m-1", ds.With(NewDelivery("x", body, t0.Add(81*time.Hour), []byte(`{}`)), 72*time.Hour), rewrite)
		ds, err = s.Deliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.Len(t, ds, 2, "an entity's own record is what it holds: written from the legacy one it read, and x")
		_, ok = ds.Find("new")
		require.True(t, ok)
	})
}

// TestM20LegacyRecordsAreLookedForOnlyWhileThereAreAny: a store without
// d/ records is found so at the first entity without a record of its own,
// and no entity looks for them again; pruning the last one says the same.
func TestM20LegacyRecordsAreLookedForOnlyWhileThereAreAny(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		_, err := s.Deliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.EqualValues(t, legacyAbsent, s.legacyState.Load())

		s.legacyState.Store(legacyUnknown) // as a store opened with one would be
		b := s.NewBatch()
		b.Put(DedupKey("m-1", "old"), DedupRecord{DeliveryID: "old", At: t0, Entity: "m-1", Body: []byte(`{}`), BodySHA256: []byte{1}})
		require.NoError(t, b.Commit())
		_, ok := find(t, s, "m-1", "old")
		require.True(t, ok)
		require.EqualValues(t, legacyPresent, s.legacyState.Load())
		_, err = s.PruneDedup(t0.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, legacyAbsent, s.legacyState.Load(), "the last one pruned")
	})
}

// TestM20DecodedAnswersOwnTheirBytes: a backend's value is valid only
// during the read; the answers decoded from it must not change when the
// buffer is reused.
func TestM20DecodedAnswersOwnTheirBytes(t *testing.T) {
	v := Deliveries{NewDelivery("a", [32]byte{}, t0, reply(1))}.encode(nil)
	ds, err := DecodeDeliveries(v)
	require.NoError(t, err)
	clear(v)
	require.Equal(t, reply(1), ds[0].Reply)
}

// TestM20ACorruptDeliveriesRecordIsNamed: a record that does not decode is
// a CorruptError naming its key, never a panic or a silent empty set.
func TestM20ACorruptDeliveriesRecordIsNamed(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		b.Set(DeliveriesKey("m-1"), []byte{deliveriesV1, 200})
		require.NoError(t, b.Commit())
		_, err := s.Deliveries("m-1", InRecord{})
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "r/m-1", ce.Key)
	})
}

// FuzzDecodeDeliveries: a stored record is untrusted on the way back in:
// it decodes within its bounds or is refused, never panics, and what
// decodes encodes back to the same bytes.
func FuzzDecodeDeliveries(f *testing.F) {
	var ds Deliveries
	for i := range 5 {
		ds = ds.With(NewDelivery(fmt.Sprint(i), [32]byte{byte(i)}, t0, reply(i%2)), time.Hour)
	}
	f.Add(ds.encode(nil))
	f.Add([]byte{deliveriesV1})
	f.Add([]byte{deliveriesV1, 0, 1})
	f.Add([]byte{deliveriesV1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(ds[3:].encodeChunk(nil, 2))
	f.Add([]byte{deliveriesChunk, 1, 1, 0, 1})
	f.Add([]byte{deliveriesChunk, 9, 1})
	f.Fuzz(func(t *testing.T, v []byte) {
		if len(v) > 0 && v[0] == deliveriesChunk {
			fuzzChunk(t, v)
			return
		}
		ds, err := DecodeDeliveries(v)
		if err != nil {
			require.ErrorIs(t, err, errDeliveries)
			return
		}
		require.LessOrEqual(t, len(ds), MaxDeliveries)
		if again := ds.encode(nil); !bytes.Equal(again, v) {
			// Answers stored twice, or varints not in their shortest
			// form, decode; they must decode to the same entries.
			back, err := DecodeDeliveries(again)
			require.NoError(t, err)
			require.Equal(t, ds, back)
		}
	})
}

// fuzzChunk holds a chunk to FuzzDecodeDeliveries' terms: within its
// bounds (one chunk of consecutive deliveries, after its cut) or refused.
func fuzzChunk(t *testing.T, v []byte) {
	cut, ds, err := decodeChunk(v)
	if err != nil {
		require.ErrorIs(t, err, errDeliveries)
		return
	}
	require.NotEmpty(t, ds)
	require.LessOrEqual(t, len(ds), ChunkLen)
	require.LessOrEqual(t, cut, ds[0].Seq)
	require.Equal(t, ds[0].Seq/ChunkLen, ds[len(ds)-1].Seq/ChunkLen)
	if again := ds.encodeChunk(nil, cut); !bytes.Equal(again, v) {
		cut2, back, err := decodeChunk(again)
		require.NoError(t, err)
		require.Equal(t, cut, cut2)
		require.Equal(t, ds, back)
	}
}

// BenchmarkDeliveriesWithAndEncode is what a delivery adds to the durable
// path: a full record (MaxDeliveries entries; a run's answers repeat, so
// one in eight is new) made anew and encoded into a buffer reused, as
// PutDeliveries does.
func BenchmarkDeliveriesWithAndEncode(b *testing.B) {
	var ds Deliveries
	for i := range MaxDeliveries {
		ds = ds.With(NewDelivery(fmt.Sprint("d-", i), [32]byte{byte(i)}, t0, reply(i/8)), 72*time.Hour)
	}
	answer := reply(MaxDeliveries / 8)
	var buf []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		next := ds.With(NewDelivery(fmt.Sprint("n-", i), [32]byte{}, t0, answer), 72*time.Hour)
		if buf = next.encode(buf[:0]); len(buf) == 0 {
			b.Fatal("empty")
		}
	}
}

// putInRecord writes ds as the actor does for a kind whose record keeps
// the newest chunk (store format 4): the batch's own keys, and the chunk
// the record would hold.
func putInRecord(t *testing.T, s *Store, entity string, ds Deliveries, rewrite bool) (writes int, rec InRecord) {
	t.Helper()
	b := s.NewBatch()
	b.PutDeliveries(entity, "", ds, rewrite, true)
	writes = b.Len()
	require.NoError(t, b.Commit())
	return writes, InRecord{Key: "m/" + entity, Chunk: ds.Recent()}
}

// TestM20DeliveriesKeptInTheRecordWriteAChunkOnlyWhenItFills: with the
// newest chunk in the entity's record, a delivery writes no key of its
// own except the one that fills its chunk, and the chunks with the
// record's read back as the record the actor held, through the bound and
// the retention.
func TestM20DeliveriesKeptInTheRecordWriteAChunkOnlyWhenItFills(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		var ds Deliveries
		at := t0
		for i := range 3*MaxDeliveries + 5 {
			if i == 2*MaxDeliveries {
				at = at.Add(100 * time.Hour)
			}
			ds = ds.With(NewDelivery(fmt.Sprint("a-", i), [32]byte{1}, at, reply(i%2)), 72*time.Hour)
			writes, rec := putInRecord(t, s, "m-1", ds, false)
			fills := ds[len(ds)-1].Seq%ChunkLen == ChunkLen-1
			require.Equal(t, map[bool]int{true: 1, false: 0}[fills], writes, "delivery %d", i)
			got, rewrite, err := s.LoadDeliveries("m-1", rec)
			require.NoError(t, err)
			require.False(t, rewrite)
			require.Equal(t, ds, got, "after delivery %d", i)
		}
		got, err := s.Deliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.NotEqual(t, ds, got, "without its record's chunk the entity's newest deliveries are not all there")
	})
}

// TestM20AFormat3SlotGivesWayToTheRecordsChunk: a store of format 3 wrote
// the newest chunk to its slot with each delivery. The first delivery of
// format 4 keeps that chunk, one longer, in the record and leaves the
// slot: the record's copy is read, the slot's is not, and no delivery is
// read twice. A chunk in the record that does not decode is named by the
// record's key, and the next write starts over from the slots.
func TestM20AFormat3SlotGivesWayToTheRecordsChunk(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		var ds Deliveries
		for i := range 13 {
			ds = ds.With(NewDelivery(fmt.Sprint("a-", i), [32]byte{1}, t0, reply(i%3)), time.Hour)
			putDeliveries(t, s, "m-1", ds, false)
		}
		got, rewrite, err := s.LoadDeliveries("m-1", InRecord{})
		require.NoError(t, err)
		require.Equal(t, ds, got)
		ds = got.With(NewDelivery("a-13", [32]byte{1}, t0, reply(0)), time.Hour)
		writes, rec := putInRecord(t, s, "m-1", ds, rewrite)
		require.Zero(t, writes, "the slot of deliveries 9 to 13 keeps its older copy")
		got, rewrite, err = s.LoadDeliveries("m-1", rec)
		require.NoError(t, err)
		require.False(t, rewrite)
		require.Equal(t, ds, got)

		_, rewrite, err = s.LoadDeliveries("m-1", InRecord{Key: "m/m-1", Chunk: []byte{deliveriesChunk, 1, 200}})
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "m/m-1", ce.Key)
		require.True(t, rewrite)
		fresh := Deliveries(nil).With(NewDelivery("b-0", [32]byte{2}, t0, reply(1)), time.Hour)
		writes, rec = putInRecord(t, s, "m-1", fresh, rewrite)
		require.Equal(t, chunkSlots+1, writes, "every slot cleared, and the format-2 record")
		got, err = s.Deliveries("m-1", rec)
		require.NoError(t, err)
		require.Equal(t, fresh, got)
	})
}

// TestM20AScanReadsTheChunksRecordsKeep: verify's and the simulator's
// scan reads an entity's chunks with the one its record keeps, and the
// entities whose deliveries are all in their record, by entity.
func TestM20AScanReadsTheChunksRecordsKeep(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	var many, few Deliveries
	for i := range 20 {
		many = many.With(NewDelivery(fmt.Sprint("a-", i), [32]byte{1}, t0, reply(0)), time.Hour)
		_, _ = putInRecord(t, s, "m-1", many, false)
	}
	for i := range 3 {
		few = few.With(NewDelivery(fmt.Sprint("b-", i), [32]byte{2}, t0, reply(1)), time.Hour)
	}
	var sc DeliveriesScan
	sc.Recent("m-2", InRecord{Key: "m/m-2", Chunk: few.Recent()})
	sc.Recent("m-1", InRecord{Key: "m/m-1", Chunk: many.Recent()})
	var seen []EntityDeliveries
	require.NoError(t, s.Scan([]byte(DeliveriesFamily), nil, func(k, v []byte) (bool, error) {
		if e, ok := sc.Add(k, v); ok {
			seen = append(seen, e)
		}
		return true, nil
	}))
	if e, ok := sc.End(); ok {
		seen = append(seen, e)
	}
	seen = append(seen, sc.Unscanned()...)
	require.Equal(t, []EntityDeliveries{{Entity: "m-1", Deliveries: many}, {Entity: "m-2", Deliveries: few}}, seen)
	require.Empty(t, sc.Unscanned(), "each is read once")
}
