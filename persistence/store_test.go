package persistence

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// The store's mechanics on both backends, with a record of the test's own:
// the kinds' records and their codecs are tested with the kinds (actors).

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// item is a record of this test's own.
type item struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

func itemKey(id string) []byte { return []byte("t/" + id) }

func readItem(k, v []byte) (item, error) {
	var it item
	err := Decode(k, v, &it)
	return it, err
}

func TestRecordRoundTripWakeAndReopen(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		b.Put(itemKey("a"), item{ID: "a", N: 1})
		b.MoveWake(WakeMarquee, "a", time.Time{}, t0.Add(time.Minute))
		require.NoError(t, b.Commit())
		s = bk.open(t)
		var it item
		require.NoError(t, s.Get(itemKey("a"), &it))
		require.Equal(t, item{ID: "a", N: 1}, it)
		require.ErrorIs(t, s.Get(itemKey("b"), &it), ErrNotFound)
		has, err := s.Has(itemKey("a"))
		require.NoError(t, err)
		require.True(t, has)
		ws, err := s.Wakes(t0.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, []Wake{{At: t0.Add(time.Minute), Letter: WakeMarquee, ID: "a"}}, ws)
	})
}

// TestWakeIndexMovesWithItsRecord: M23's index entry moves in the batch
// that moves its record's deadline, and goes when it has none.
func TestWakeIndexMovesWithItsRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		for _, w := range []struct{ old, at time.Time }{{time.Time{}, t0.Add(5 * time.Minute)}, {t0.Add(5 * time.Minute), t0.Add(30 * time.Minute)}} {
			b := s.NewBatch()
			b.MoveWake(WakeEnvironment, "e-1", w.old, w.at)
			require.NoError(t, b.Commit())
		}
		ws, err := s.Wakes(t0.Add(10 * time.Minute))
		require.NoError(t, err)
		require.Empty(t, ws, "the old entry is gone; the new one is not due yet")
		ws, err = s.Wakes(t0.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, []Wake{{At: t0.Add(30 * time.Minute), Letter: WakeEnvironment, ID: "e-1"}}, ws)
		b := s.NewBatch()
		b.MoveWake(WakeEnvironment, "e-1", t0.Add(30*time.Minute), time.Time{})
		require.NoError(t, b.Commit())
		ws, err = s.Wakes(t0.Add(time.Hour))
		require.NoError(t, err)
		require.Empty(t, ws)
	})
}

// TestListPagesAndReportsMalformed: A8 for every list. A record that does
// not decode is reported with its key and reason, never hides its
// neighbours, and a filter and a cursor page the rest.
func TestListPagesAndReportsMalformed(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		for i := 0; i < 5; i++ {
			b.Put(itemKey(fmt.Sprintf("i-%d", i)), item{ID: fmt.Sprintf("i-%d", i), N: i})
		}
		b.Set(itemKey("i-bad"), []byte("not versioned"))
		b.Set(itemKey("i-v9"), []byte{9, '{', '}'})
		require.NoError(t, b.Commit())
		page, next, bad, err := ListPage(s, "t/", "", 2, 0, readItem, nil)
		require.NoError(t, err)
		require.Equal(t, []item{{"i-0", 0}, {"i-1", 1}}, page)
		require.Equal(t, "i-1", next)
		require.Empty(t, bad)
		odd := func(it item) bool { return it.N%2 == 1 }
		page, next, bad, err = ListPage(s, "t/", next, 10, 0, readItem, odd)
		require.NoError(t, err)
		require.Equal(t, []item{{"i-3", 3}}, page, "the filter leaves the others out")
		require.Equal(t, "", next)
		require.Len(t, bad, 2)
		require.Equal(t, "t/i-bad", bad[0].Key)
		require.Contains(t, bad[0].Reason, "unknown encoding version")
		require.Contains(t, bad[1].Reason, "unknown encoding version 9")
		var it item
		var ce *CorruptError
		require.ErrorAs(t, s.Get(itemKey("i-bad"), &it), &ce)
	})
}

// TestListReadsAtMostItsBudget: a page whose filter matches nothing stops
// after maxScan records with a cursor to go on (one request
// never reads the whole store), and following the cursors reaches the end.
func TestListReadsAtMostItsBudget(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		for i := 0; i < 12; i++ {
			b.Put(itemKey(fmt.Sprintf("i-%02d", i)), item{ID: fmt.Sprintf("i-%02d", i)})
		}
		require.NoError(t, b.Commit())
		read := 0
		none := func(item) bool { read++; return false }
		var cursors []string
		after := ""
		for pages := 0; pages < 10; pages++ {
			page, next, _, err := ListPage(s, "t/", after, 100, 5, readItem, none)
			require.NoError(t, err)
			require.Empty(t, page)
			if next == "" {
				break
			}
			cursors = append(cursors, next)
			after = next
		}
		require.Equal(t, []string{"i-04", "i-09"}, cursors, "five records a page, then the rest")
		require.Equal(t, 12, read, "every record read exactly once across the pages")
	})
}

// TestUnsyncedWritesAreLostInACrash shows why commits are synced: on a
// filesystem that drops what was not synced, a NoSync commit vanishes and
// a synced one survives.
func TestUnsyncedWritesAreLostInACrash(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		fs := vfs.NewCrashableMem()
		s, err := Open("db", Options{FS: fs, NoSync: noSync})
		require.NoError(t, err)
		b := s.NewBatch()
		b.Put(itemKey("a"), item{ID: "a"})
		require.NoError(t, b.Commit())
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		require.NoError(t, s.Close())
		s2, err := Open("db", Options{FS: crashed})
		require.NoError(t, err)
		var it item
		err = s2.Get(itemKey("a"), &it)
		if noSync {
			require.ErrorIs(t, err, ErrNotFound, "NoSync lost the write")
		} else {
			require.NoError(t, err, "a synced commit survives the crash")
		}
		require.NoError(t, s2.Close())
	}
}

// FuzzDecode: every stored value is untrusted on the way back in; Decode
// returns a value or a CorruptError, never panics. (The kinds' codecs
// fuzz their own records.)
func FuzzDecode(f *testing.F) {
	f.Add(Encode(item{ID: "a", N: 1}))
	f.Add(Encode(DedupRecord{DeliveryID: "d", Entity: "m-1", HTTPStatus: 200, Body: []byte("{}")}))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, val []byte) {
		var it item
		if err := Decode([]byte("t/x"), val, &it); err != nil {
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
		}
		var d DedupRecord
		_ = Decode([]byte("d/m/x"), val, &d)
	})
}

// TestBranchGenerationKeysSortByGeneration: the newest generation a branch
// gave out is the last key under its prefix, whatever order the creates
// committed in, and a sibling branch's keys are not under it.
func TestBranchGenerationKeysSortByGeneration(t *testing.T) {
	p := BranchGenerationPrefix("feature")
	var keys []string
	for _, g := range []uint64{9, 10, 255, 4096} {
		k := BranchGenerationKey("feature", g)
		got, ok := ParseBranchGeneration(p, k)
		require.True(t, ok)
		require.Equal(t, g, got)
		keys = append(keys, string(k))
	}
	for i := 1; i < len(keys); i++ {
		require.Less(t, keys[i-1], keys[i])
	}
	require.NotContains(t, string(BranchGenerationKey("feature-2", 1)), string(p))
	_, ok := ParseBranchGeneration(p, append(p, "zz"...))
	require.False(t, ok)
}

// TestHistoryKeyIsFixedWidthHex: a history key's sequence is 16 hex
// digits, so that the keys sort in sequence order.
func TestHistoryKeyIsFixedWidthHex(t *testing.T) {
	for _, n := range []uint64{0, 1, 0xabc, 1 << 40, ^uint64(0)} {
		require.Equal(t, fmt.Sprintf("h/m-1/%016x", n), string(HistoryKey("m-1", n)))
	}
}

// TestDecodeReadsAsEncodingJSONRead: the stored records' reader keeps
// encoding/json's rules (names without case, a repeated name's last value,
// invalid UTF-8 replaced, unknown names refused), so a record reads as it
// did when it was stored; a tail after the value, which the encoder never
// writes, is refused as damage.
func TestDecodeReadsAsEncodingJSONRead(t *testing.T) {
	for _, c := range []struct {
		name, json string
		want       item
		corrupt    bool
	}{
		{"as encoded", `{"id":"a","n":1}`, item{ID: "a", N: 1}, false},
		{"a name in another case", `{"ID":"a","N":1}`, item{ID: "a", N: 1}, false},
		{"a repeated name keeps its last value", `{"id":"a","id":"b"}`, item{ID: "b"}, false},
		{"invalid UTF-8 replaced", "{\"id\":\"a\xff\"}", item{ID: "a\uFFFD"}, false},
		{"surrounding whitespace", " {\"id\":\"a\"}\n", item{ID: "a"}, false},
		{"an unknown name", `{"id":"a","x":1}`, item{}, true},
		{"a wrong type", `{"n":"1"}`, item{}, true},
		{"a tail after the value", `{"id":"a"}{"id":"b"}`, item{}, true},
		{"not JSON", `{"id":`, item{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got item
			err := Decode([]byte("t/x"), append([]byte{codecV1}, c.json...), &got)
			if c.corrupt {
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, "t/x", ce.Key)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}
