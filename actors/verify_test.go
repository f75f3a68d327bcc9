package actors

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// healthyStore is a store a real System wrote: marquees in a pool of limit
// 1 (one reserved and dispatched, one queued behind it, one provisioned by
// a callback with a delivery record), plus two previews of one branch, the
// newer holding the route.
func healthyStore(t *testing.T) (dir string, opts VerifyOptions) {
	h := newHarness(t)
	ctx := context.Background()
	for _, id := range []string{"m-1", "m-2", "m-3"} {
		_, err := h.sys.Create(ctx, marquee.Create{ID: id, Kind: marquee.Tutorial, Pool: "default"})
		require.NoError(t, err)
	}
	h.eventually("m-1 dispatched", func() bool { return len(h.disp.gens("m-1")) == 1 })
	h.quiet()
	_, err := h.sys.Callback(ctx, cbReq("m-1", "d-1", marquee.Callback{Verb: marquee.VerbDeployed, Generation: 1,
		Connection: &marquee.Connection{Host: "m-1.example", SSHPrivateKey: "ssh-key", ACMEDNS: marquee.ACMEDNS{Username: "u", Password: "p"}}}))
	require.NoError(t, err)
	h.eventually("m-2 admitted", func() bool { return len(h.disp.gens("m-2")) == 1 })
	h.quiet()
	h.stop()
	st, err := persistence.Open(h.dir, persistence.Options{})
	require.NoError(t, err)
	b := st.NewBatch()
	old := previewEnv("env-a", "main", 1, start)
	old.SupersededBy = 2
	newer := previewEnv("env-b", "main", 2, start.Add(time.Minute))
	newer.Resources = []environment.Resource{{Capability: environment.Route, Identity: "route-main-2", Status: "present"}}
	seedEnvironment(b, record.Environment{Env: old})
	seedEnvironment(b, record.Environment{Env: newer})
	require.NoError(t, b.Commit())
	require.NoError(t, st.Close())
	return h.dir, VerifyOptions{Machine: marquee.Machine{Config: marquee.DefaultConfig()}, Pools: map[string]int{"default": 1}}
}

func previewEnv(id, branch string, gen uint64, at time.Time) environment.Env {
	return environment.Env{ID: id, Branch: branch, Revision: "r1", Desired: "ready", State: environment.Ready, Generation: gen,
		CreatedAt: at, UpdatedAt: at, Receipts: []environment.Receipt{}, Resources: []environment.Resource{}, Outbox: []environment.Notification{},
		Drift: []environment.Drift{}, Audit: []environment.AuditEntry{}}
}

func verifyDir(t *testing.T, dir string, o VerifyOptions) VerifyReport {
	t.Helper()
	st, err := persistence.OpenReadOnly(dir, nil)
	require.NoError(t, err)
	defer st.Close()
	rep, err := Verify(st, o)
	require.NoError(t, err)
	return rep
}

func plant(t *testing.T, dir string, f func(b *persistence.Batch, st *persistence.Store)) {
	t.Helper()
	st, err := persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	b := st.NewBatch()
	f(b, st)
	require.NoError(t, b.Commit())
	require.NoError(t, st.Close())
}

// TestVerifyHealthyStore: D6. A store a running System wrote has no
// problem, and the report counts what it read.
func TestVerifyHealthyStore(t *testing.T) {
	dir, o := healthyStore(t)
	rep := verifyDir(t, dir, o)
	require.True(t, rep.OK(), rep.Text())
	require.Equal(t, 3, rep.Marquees)
	require.Equal(t, 2, rep.Envs)
	require.Contains(t, rep.Text(), "ok: no problem found")
	counts := map[string]int{}
	for _, f := range rep.Records {
		counts[f.Family] = f.Count
	}
	require.Equal(t, 3, counts["m/"])
	require.Zero(t, counts["r/"], "the callback's delivery is in its marquee's record (store format 4): no key of its own")
	require.Positive(t, counts["h/"])
	require.Positive(t, counts["w/"])
}

// TestVerifyFindsEachPlantedProblem: D6, one planted problem at a time,
// each found under its own check naming the key.
func TestVerifyFindsEachPlantedProblem(t *testing.T) {
	sealed := VerifyOptions{Machine: marquee.Machine{Config: marquee.DefaultConfig()}, Pools: map[string]int{"default": 1},
		Sealer: trust.NewSealer(&trust.Keyring{Keys: []trust.Key{{ID: "k1", Secret: [trust.KeySize]byte{1}}}})}
	cases := []struct {
		name, check, key string
		plant            func(t *testing.T, dir string, o *VerifyOptions)
	}{
		{"a record that does not decode", CheckDecode, "m/m-9", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) { b.Set([]byte("m/m-9"), []byte("\x01{\"state\":")) })
		}},
		{"a record naming another id", CheckDecode, "e/env-z", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Put([]byte("e/env-z"), record.Environment{Env: previewEnv("env-y", "dev", 1, start)})
			})
		}},
		{"a sealed field under a key nobody holds", CheckSeal, "m/m-8", func(t *testing.T, dir string, o *VerifyOptions) {
			*o = sealed
			other := trust.NewSealer(&trust.Keyring{Keys: []trust.Key{{ID: "gone", Secret: [trust.KeySize]byte{9}}}})
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				record.PutMarquee(b, other, record.Marquee{State: marquee.State{ID: "m-8", Kind: marquee.BYO, Serving: marquee.Active,
					Connection: &marquee.Connection{Host: "h", SSHPrivateKey: "secret"}}})
			})
		}},
		{"a reservation over the limit", CheckPool, "a/default/", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Put(persistence.AdmissionKey("default", "m-3"), admission.Job{ID: "m-3", Sequence: 9, Status: admission.Reserved, Since: start})
			})
		}},
		{"a reservation for no marquee", CheckPool, "a/default/m-404", func(t *testing.T, dir string, o *VerifyOptions) {
			o.Pools = nil // not the limit: the orphan
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Put(persistence.AdmissionKey("default", "m-404"), admission.Job{ID: "m-404", Sequence: 9, Status: admission.Reserved, Since: start})
			})
		}},
		{"a deadline the wake index does not cover", CheckWake, "m/m-2", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				r, err := record.LoadMarquee(st, nil, "m-2")
				require.NoError(t, err)
				b.MoveWake(persistence.WakeMarquee, "m-2", r.WakeAt, time.Time{})
				r.WakeAt = time.Time{}
				record.PutMarquee(b, nil, r)
			})
		}},
		{"a wake entry of no record", CheckWake, "w/", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Set(persistence.WakeKey(start, persistence.WakeEnvironment, "env-404"), nil)
			})
		}},
		{"a gap in a history", CheckHistory, "h/m-1/", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) { b.Delete(persistence.HistoryKey("m-1", 2)) })
		}},
		// S14: the entries are dense and end at the record's, but one is
		// not what its step wrote: the history no longer replays.
		{"an entry duplicated over the next (S14)", CheckHistory, "h/m-1/0000000000000002", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				var first marquee.Entry
				require.NoError(t, st.Get(persistence.HistoryKey("m-1", 1), &first))
				require.NotEmpty(t, first.Changed, "the create's entry says what it changed")
				b.Put(persistence.HistoryKey("m-1", 2), first)
			})
		}},
		{"a transition lost, its sequence reused (S14)", CheckHistory, "h/m-1/", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				r, err := record.LoadMarquee(st, nil, "m-1")
				require.NoError(t, err)
				for seq := uint64(2); seq < r.HistorySeq; seq++ { // entry 2 lost, the rest moved down
					var e marquee.Entry
					require.NoError(t, st.Get(persistence.HistoryKey("m-1", seq+1), &e))
					b.Put(persistence.HistoryKey("m-1", seq), e)
				}
				b.Delete(persistence.HistoryKey("m-1", r.HistorySeq))
				r.HistorySeq--
				record.PutMarquee(b, nil, r)
			})
		}},
		{"history ending before the record's", CheckHistory, "m/m-3", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				r, err := record.LoadMarquee(st, nil, "m-3")
				require.NoError(t, err)
				b.Delete(persistence.HistoryKey("m-3", r.HistorySeq))
			})
		}},
		{"a delivery record never pruned", CheckDedup, "d/m-2/ancient", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Put(persistence.DedupKey("m-2", "ancient"), persistence.DedupRecord{DeliveryID: "ancient", Entity: "m-2", At: start.Add(-30 * 24 * time.Hour), HTTPStatus: 200, Body: []byte("{}")})
			})
		}},
		{"a deliveries record keeping one past its retention", CheckDedup, "r/m-2", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				old := persistence.NewDelivery("old", [32]byte{1}, start.Add(-30*24*time.Hour), []byte("{}"))
				ds := persistence.Deliveries{}.With(old, time.Hour).With(persistence.NewDelivery("new", [32]byte{2}, start, []byte("{}")), 1000*time.Hour)
				b.PutDeliveries("m-2", "new", ds, false, false)
			})
		}},
		{"a record's chunk of deliveries keeping one past its retention", CheckDedup, "r/m-2", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				old := persistence.NewDelivery("old", [32]byte{1}, start.Add(-30*24*time.Hour), []byte("{}"))
				ds := persistence.Deliveries{}.With(old, time.Hour).With(persistence.NewDelivery("new", [32]byte{2}, start, []byte("{}")), 1000*time.Hour)
				r, err := record.LoadMarquee(st, nil, "m-2")
				require.NoError(t, err)
				r.Deliveries = ds.Recent()
				record.PutMarquee(b, nil, r)
			})
		}},
		{"a record's chunk of deliveries that does not decode", CheckDecode, "m/m-1", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				r, err := record.LoadMarquee(st, nil, "m-1")
				require.NoError(t, err)
				r.Deliveries = []byte{0x45, 1, 200}
				record.PutMarquee(b, nil, r)
			})
		}},
		{"a deliveries record that does not decode", CheckDecode, "r/m-1", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Set(persistence.DeliveriesKey("m-1"), []byte{0x44, 9})
			})
		}},
		{"a delivery record filed under another entity", CheckDedup, "d/m-3/d-1", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Put(persistence.DedupKey("m-3", "d-1"), persistence.DedupRecord{DeliveryID: "d-1", Entity: "m-1", At: start, HTTPStatus: 200})
			})
		}},
		{"a route held by an older generation", CheckRoute, "e/env-a", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				r, err := record.LoadEnvironment(st, "env-a")
				require.NoError(t, err)
				r.Env.Resources = []environment.Resource{{Capability: environment.Route, Identity: "route-main-1", Status: "present"}}
				b.Put(persistence.EnvKey("env-a"), r)
			})
		}},
		{"a generation never given out", CheckRoute, "e/env-c", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.Put(persistence.EnvKey("env-c"), record.Environment{Env: previewEnv("env-c", "main", 7, start)})
			})
		}},
		{"a tombstone holding a lease", CheckLease, "e/env-a", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, st *persistence.Store) {
				r, err := record.LoadEnvironment(st, "env-a")
				require.NoError(t, err)
				r.Env.Tombstone = &environment.Tombstone{Reason: "removed", RemovedAt: start}
				r.Env.Attempt = &environment.Attempt{ID: "at-1", Lease: environment.Lease{Owner: "warden-1", Generation: 1, ExpiresAt: start.Add(time.Hour)}}
				b.Put(persistence.EnvKey("env-a"), r)
			})
		}},
		{"a key of no family", CheckFamily, "q/what", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) { b.Set([]byte("q/what"), nil) })
		}},
		{"a store newer than this build", CheckFormat, "v/format", func(t *testing.T, dir string, _ *VerifyOptions) {
			plant(t, dir, func(b *persistence.Batch, _ *persistence.Store) {
				b.PutFormat(persistence.FormatRecord{Format: persistence.StoreFormat + 1, WrittenBy: "v9.0.0 (future)"})
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, o := healthyStore(t)
			c.plant(t, dir, &o)
			rep := verifyDir(t, dir, o)
			require.False(t, rep.OK(), "D6: %s not found:\n%s", c.name, rep.Text())
			found := false
			for _, p := range rep.Problems {
				if p.Check == c.check && strings.HasPrefix(p.Key, c.key) {
					found = true
				}
			}
			require.True(t, found, "want a %s problem at %s:\n%s", c.check, c.key, rep.Text())
			require.Contains(t, rep.Text(), "PROBLEM")
			require.Contains(t, rep.Text(), fmt.Sprintf("%d problem(s) found", len(rep.Problems)))
		})
	}
}

// seedEnvironment stages an environment record as its create would: the
// record, its wake-index entry and its branch's route generation.
func seedEnvironment(b *persistence.Batch, r record.Environment) {
	runtime.Stage(record.EnvironmentWrites{}, b, r.Env.ID, record.Environment{}, r, environment.Outcome{})
	b.Set(persistence.BranchGenerationKey(r.Env.Branch, r.Env.Generation), []byte(r.Env.ID))
}
