package persistence

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func tutorial(id string) marquee.State {
	return marquee.State{ID: id, Kind: marquee.Tutorial, Serving: marquee.Disabled, Lifecycle: marquee.Provisioning, CreatedAt: t0, UpdatedAt: t0}
}

func TestMarqueeRoundTripAndReopen(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		st := tutorial("m-1")
		st.Connection = &marquee.Connection{Host: "203.0.113.7", Port: 22, User: "root", SSHPrivateKey: "secret"}
		b := s.NewBatch()
		b.PutMarquee(MarqueeRecord{State: st, HistorySeq: 1, WakeAt: t0.Add(time.Minute)}, time.Time{})
		b.AppendHistory("m-1", 1, marquee.Entry{At: t0, Source: marquee.SourceOperator, Verb: "create", Result: marquee.Applied})
		require.NoError(t, b.Commit())
		require.NoError(t, s.Close())

		s = bk.open(t)
		r, err := s.LoadMarquee("m-1")
		require.NoError(t, err)
		require.Equal(t, st, r.State)
		require.Equal(t, uint64(1), r.HistorySeq)
		_, err = s.LoadMarquee("m-2")
		require.ErrorIs(t, err, ErrNotFound)
		ws, err := s.Wakes(t0.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, []Wake{{At: t0.Add(time.Minute), Kind: KindMarquee, ID: "m-1"}}, ws)
	})
}

func TestWakeIndexMovesWithSnapshot(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		st := tutorial("m-1")
		b := s.NewBatch()
		b.PutMarquee(MarqueeRecord{State: st, WakeAt: t0.Add(5 * time.Minute)}, time.Time{})
		require.NoError(t, b.Commit())
		b = s.NewBatch()
		b.PutMarquee(MarqueeRecord{State: st, WakeAt: t0.Add(30 * time.Minute)}, t0.Add(5*time.Minute))
		require.NoError(t, b.Commit())
		ws, err := s.Wakes(t0.Add(10 * time.Minute))
		require.NoError(t, err)
		require.Empty(t, ws, "the old entry is gone; the new one is not due yet")
		ws, err = s.Wakes(t0.Add(time.Hour))
		require.NoError(t, err)
		require.Len(t, ws, 1)
		b = s.NewBatch()
		b.PutMarquee(MarqueeRecord{State: st}, t0.Add(30*time.Minute))
		require.NoError(t, b.Commit())
		ws, err = s.Wakes(t0.Add(time.Hour))
		require.NoError(t, err)
		require.Empty(t, ws)
	})
}

func TestHistoryIsBoundedAndNewestFirst(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		for seq := uint64(1); seq <= HistoryLimit+50; seq++ {
			b := s.NewBatch()
			b.AppendHistory("m-1", seq, marquee.Entry{At: t0, Verb: fmt.Sprint(seq)})
			require.NoError(t, b.Commit())
		}
		all, err := s.History("m-1", 10_000)
		require.NoError(t, err)
		require.Len(t, all, HistoryLimit)
		require.Equal(t, fmt.Sprint(HistoryLimit+50), all[0].Verb)
		require.Equal(t, "51", all[len(all)-1].Verb)
		few, err := s.History("m-1", 3)
		require.NoError(t, err)
		require.Len(t, few, 3)
	})
}

// TestMalformedAdmissionRecordsAreReported: A8. A record that does not
// decode is reported with its key and reason and never hides its neighbours.
func TestMalformedAdmissionRecordsAreReported(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		b.PutAdmission("default", admission.Job{ID: "m-1", Sequence: 1, Status: admission.Reserved, Since: t0})
		b.PutAdmission("default", admission.Job{ID: "m-3", Sequence: 3, Status: admission.Queued, Since: t0})
		b.PutRaw("a/default/m-2", []byte{1, '{', 'x'})
		b.PutRaw("a/default/m-4", []byte{9, '{', '}'})
		b.PutRaw("a/default/m-5", encode(admission.Job{ID: "m-6", Sequence: 5, Status: admission.Queued}))
		b.PutPoolMeta("default", PoolMeta{NextSequence: 4})
		require.NoError(t, b.Commit())
		meta, jobs, bad, err := s.LoadPool("default")
		require.NoError(t, err)
		require.Equal(t, uint64(4), meta.NextSequence)
		require.Len(t, jobs, 2)
		require.Len(t, bad, 3)
		require.Equal(t, "a/default/m-2", bad[0].Key)
		require.Contains(t, bad[0].Reason, "does not decode")
		require.Contains(t, bad[1].Reason, "unknown encoding version 9")
		require.Contains(t, bad[2].Reason, "key does not")
	})
}

func TestListMarqueesPagesAndReportsMalformed(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		for i := 0; i < 5; i++ {
			b.PutMarquee(MarqueeRecord{State: tutorial(fmt.Sprintf("m-%d", i))}, time.Time{})
		}
		tomb := tutorial("m-9")
		tomb.Tombstone = &marquee.Tombstone{Reason: "reaped", At: t0}
		b.PutMarquee(MarqueeRecord{State: tomb}, time.Time{})
		b.PutRaw("m/m-bad", []byte("not versioned"))
		require.NoError(t, b.Commit())
		page, next, bad, err := s.ListMarquees("", 2, 0, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"m-0", "m-1"}, ids(page))
		require.Equal(t, "m-1", next)
		live := func(st marquee.State) bool { return st.Tombstone == nil }
		page, next, bad2, err := s.ListMarquees(next, 10, 0, live)
		require.NoError(t, err)
		require.Equal(t, []string{"m-2", "m-3", "m-4"}, ids(page), "the filter leaves tombstones out")
		require.Equal(t, "", next)
		require.Empty(t, bad)
		require.Len(t, bad2, 1)
		require.Equal(t, "m/m-bad", bad2[0].Key)
		_, err = s.LoadMarquee("m-bad")
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
	})
}

func TestDedupPrune(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		b.PutDedup(DedupRecord{DeliveryID: "old", At: t0, MarqueeID: "m-1", Status: 200, Body: []byte(`{}`)})
		b.PutDedup(DedupRecord{DeliveryID: "new", At: t0.Add(80 * time.Hour), MarqueeID: "m-1", Status: 200, Body: []byte(`{}`)})
		require.NoError(t, b.Commit())
		n, err := s.PruneDedup(t0.Add(80*time.Hour - 72*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, err = s.Dedup("m-1", "old")
		require.ErrorIs(t, err, ErrNotFound)
		r, err := s.Dedup("m-1", "new")
		require.NoError(t, err)
		require.Equal(t, []byte(`{}`), r.Body)
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
		b.PutMarquee(MarqueeRecord{State: tutorial("m-1")}, time.Time{})
		require.NoError(t, b.Commit())
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		require.NoError(t, s.Close())
		s2, err := Open("db", Options{FS: crashed})
		require.NoError(t, err)
		_, err = s2.LoadMarquee("m-1")
		if noSync {
			require.ErrorIs(t, err, ErrNotFound, "NoSync lost the write")
		} else {
			require.NoError(t, err, "a synced commit survives the crash")
		}
		require.NoError(t, s2.Close())
	}
}

// FuzzDecode: every stored value is untrusted on the way back in; decode
// returns a value or a CorruptError, never panics.
func FuzzDecode(f *testing.F) {
	f.Add(encode(MarqueeRecord{State: tutorial("m-1")}))
	f.Add(encode(admission.Job{ID: "m-1", Sequence: 1, Status: admission.Queued}))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, val []byte) {
		var r MarqueeRecord
		if err := decode([]byte("m/x"), val, &r); err == nil {
			_ = r.State.Validate()
		}
		var j admission.Job
		if err := decode([]byte("a/p/x"), val, &j); err == nil {
			_ = j.Validate()
		}
	})
}

func ids(ss []marquee.State) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func TestEnvRecordsAndTheirWakes(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		m := environment.Machine{Config: environment.DefaultConfig()}
		e, err := m.New(environment.Create{ID: "env-271", Branch: "feature-search", Revision: "3f2c9e1", TTL: 72 * time.Hour}, t0)
		require.NoError(t, err)
		b := s.NewBatch()
		b.PutEnv(EnvRecord{Env: e, WakeAt: e.ExpiresAt}, time.Time{})
		b.PutMarquee(MarqueeRecord{State: tutorial("m-1"), WakeAt: t0.Add(time.Minute)}, time.Time{})
		b.PutRaw("e/env-bad", []byte{1, '{'})
		require.NoError(t, b.Commit())
		got, err := s.LoadEnv("env-271")
		require.NoError(t, err)
		require.Equal(t, e, got.Env)
		all, _, bad, err := s.ListEnvs("", 1000, 0, nil)
		require.NoError(t, err)
		require.Len(t, all, 1)
		require.Len(t, bad, 1, "a record that does not decode is reported, not hidden")
		ws, err := s.Wakes(t0.Add(100 * time.Hour))
		require.NoError(t, err)
		require.Equal(t, []Wake{{At: t0.Add(time.Minute), Kind: KindMarquee, ID: "m-1"}, {At: e.ExpiresAt, Kind: KindEnvironment, ID: "env-271"}}, ws)
		_, err = s.LoadEnv("env-404")
		require.ErrorIs(t, err, ErrNotFound)
	})
}

// TestListReadsAtMostItsBudget: a page whose filter matches nothing stops
// after maxScan records with a cursor to go on (issue 12: one request
// never reads the whole store), and following the cursors reaches the end.
func TestListReadsAtMostItsBudget(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		for i := 0; i < 12; i++ {
			b.PutMarquee(MarqueeRecord{State: tutorial(fmt.Sprintf("m-%02d", i))}, time.Time{})
		}
		require.NoError(t, b.Commit())
		read := 0
		none := func(marquee.State) bool { read++; return false }
		var cursors []string
		after := ""
		for pages := 0; pages < 10; pages++ {
			page, next, _, err := s.ListMarquees(after, 100, 5, none)
			require.NoError(t, err)
			require.Empty(t, page)
			if next == "" {
				break
			}
			cursors = append(cursors, next)
			after = next
		}
		require.Equal(t, []string{"m-04", "m-09"}, cursors, "five records a page, then the rest")
		require.Equal(t, 12, read, "every record read exactly once across the pages")
	})
}

// TestDedupIDsListsOneMarqueesDeliveries: keys only, this marquee's only
// (m-1's prefix must not take m-10's), bounded, saying when there were
// more.
func TestDedupIDsListsOneMarqueesDeliveries(t *testing.T) {
	eachBackend(t, func(t *testing.T, bk *testBackend) {
		s := bk.open(t)
		b := s.NewBatch()
		for _, d := range []DedupRecord{{MarqueeID: "m-1", DeliveryID: "a"}, {MarqueeID: "m-1", DeliveryID: "b"}, {MarqueeID: "m-10", DeliveryID: "c"}} {
			d.At, d.Status, d.Body = t0, 200, []byte("{}")
			b.PutDedup(d)
		}
		require.NoError(t, b.Commit())
		ids, complete, err := s.DedupIDs("m-1", 10)
		require.NoError(t, err)
		require.True(t, complete)
		require.Equal(t, []string{"a", "b"}, ids)
		ids, complete, err = s.DedupIDs("m-1", 1)
		require.NoError(t, err)
		require.False(t, complete, "more than the bound")
		require.Len(t, ids, 1)
		ids, complete, err = s.DedupIDs("m-2", 10)
		require.NoError(t, err)
		require.True(t, complete)
		require.Empty(t, ids)
	})
}
