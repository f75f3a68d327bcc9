package persistence

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkC8Transition is one marquee transition's batch in shape (a
// snapshot of a marquee's size, its wake entries, a history entry and its
// pruning, its deliveries record) committed durably: on Pebble (one fsync'd WAL)
// and on etcd (one transaction through Raft on an embedded single member,
// the same disk). C8: the cost of a transaction on etcd against one on
// Pebble. "serial" is one writer (the latency floor); "parallel" is 64
// writers (what group commit does).
func BenchmarkC8Transition(b *testing.B) {
	tr := newTransition()
	for _, par := range []bool{false, true} {
		name := "serial"
		if par {
			name = "parallel64"
		}
		b.Run(name, func(b *testing.B) {
			for _, bk := range []string{"pebble", "etcd"} {
				b.Run(bk, func(b *testing.B) {
					var s *Store
					if bk == "pebble" {
						var err error
						if s, err = Open(b.TempDir(), Options{}); err != nil {
							b.Fatal(err)
						}
						defer s.Close()
					} else {
						s = OpenBackend(OpenEtcd(testEtcd(b), 5*time.Second), nil)
					}
					var seq atomic.Uint64
					one := func() {
						n := seq.Add(1)
						id := fmt.Sprintf("m-%03d", n%64)
						w := s.NewBatch()
						tr.stage(w, id, n)
						if err := w.Commit(); err != nil {
							b.Error(err)
						}
					}
					b.ResetTimer()
					if par {
						b.SetParallelism(32)
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								one()
							}
						})
					} else {
						for i := 0; i < b.N; i++ {
							one()
						}
					}
				})
			}
		})
	}
}

// transition is a marquee transition's values: a snapshot of a marquee's
// size, a history entry, and a deliveries record of a workflow run's
// worth (eight callbacks).
type transition struct {
	snapshot, entry []byte
	deliveries      Deliveries
}

func newTransition() transition {
	tr := transition{
		snapshot: Encode(map[string]string{"state": strings.Repeat("x", 900)}),
		entry:    Encode(map[string]string{"verb": "step", "result": "applied", "detail": strings.Repeat("y", 80)}),
	}
	for i := range 8 {
		tr.deliveries = tr.deliveries.With(NewDelivery(fmt.Sprint("d-", i), [32]byte{byte(i)}, t0, []byte(`{"result":"applied","marquee_id":"m-001","generation":1,"received_generation":1}`)), 72*time.Hour)
	}
	return tr
}

// stage writes the n-th transition of marquee id: its snapshot, its wake
// entry moved, its history entry and the pruning of the oldest, its
// deliveries record.
func (tr transition) stage(w *Batch, id string, n uint64) {
	w.Set(MarqueeKey(id), tr.snapshot)
	w.MoveWake(WakeMarquee, id, t0.Add(time.Duration(n-1)), t0.Add(time.Duration(n)))
	w.Set(HistoryKey(id, n), tr.entry)
	if n > 200 {
		w.Delete(HistoryKey(id, n-200))
	}
	w.PutDeliveries(id, "", tr.deliveries, false, false)
}

// BenchmarkC15GuardedTransitions is a cluster's commit on one embedded
// etcd member: each of 64 writers commits its own entity's transitions,
// fenced by a shard and guarded (C3, C14). "grouped" lets the commits
// waiting together go as one transaction (C15); "alone" gives every
// commit a slot of its own, one transaction each, as before the groups.
func BenchmarkC15GuardedTransitions(b *testing.B) {
	for _, grouped := range []bool{false, true} {
		name := "alone"
		if grouped {
			name = "grouped"
		}
		b.Run(name, func(b *testing.B) { guardedTransitions(b, grouped) })
	}
}

func guardedTransitions(b *testing.B, grouped bool) {
	tr := newTransition()
	c := testEtcd(b)
	r, err := c.Put(context.Background(), "warden/bench-shard", "owner")
	if err != nil {
		b.Fatal(err)
	}
	be := OpenEtcd(c, 5*time.Second)
	if !grouped {
		be.(*etcdBackend).groups.limit = 1 << 20
	}
	s := OpenBackend(be, nil)
	fence := Fence{Key: "warden/bench-shard", Epoch: r.Header.Revision, Audit: "warden/bench-audit"}
	var writers atomic.Uint64
	b.ResetTimer()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("m-%03d", writers.Add(1))
		f := fence
		f.Guard = GuardKey("marquee", id)
		for n := uint64(1); pb.Next(); n++ {
			w := s.NewBatch()
			w.Fence(f)
			tr.stage(w, id, n)
			if err := w.Commit(); err != nil {
				b.Fatal(err)
			}
			f.GuardRev = w.Revision()
		}
	})
}
