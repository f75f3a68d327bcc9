package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

var at = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func memStore(t testing.TB) *persistence.Store {
	st, err := persistence.Open("", persistence.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func sealerOf(id string, secret byte) *trust.Sealer {
	return trust.NewSealer(&trust.Keyring{Keys: []trust.Key{{ID: id, Secret: [trust.KeySize]byte{secret}}}})
}

func withSecret(id string) Marquee {
	return Marquee{State: marquee.State{ID: id, Kind: marquee.BYO, Serving: marquee.Active,
		Connection: &marquee.Connection{Host: "h", SSHPrivateKey: "key-of-" + id}}, HistorySeq: 3, WakeAt: at}
}

// TestT10StoredSecretsAreSealedAndOpenOnlyWithTheirKey: a record's
// secrets are stored sealed under the record's key, read back whole with
// the keyring that sealed them, and a record that does not open with the
// keyring given is malformed (A9), never used.
func TestT10StoredSecretsAreSealedAndOpenOnlyWithTheirKey(t *testing.T) {
	st := memStore(t)
	b := st.NewBatch()
	SeedMarquee(b, sealerOf("k1", 1), withSecret("m-1"))
	require.NoError(t, b.Commit())

	var raw Marquee
	require.NoError(t, st.Get(persistence.MarqueeKey("m-1"), &raw))
	require.NotContains(t, raw.State.Connection.SSHPrivateKey, "key-of-m-1", "stored sealed")
	require.Equal(t, []string{"k1"}, SealedUnder(raw))

	got, err := LoadMarquee(st, sealerOf("k1", 1), "m-1")
	require.NoError(t, err)
	require.Equal(t, "key-of-m-1", got.State.Connection.SSHPrivateKey)
	require.Equal(t, uint64(3), got.HistorySeq)
	require.True(t, got.WakeAt.Equal(at))

	_, err = LoadMarquee(st, sealerOf("k2", 2), "m-1")
	var ce *persistence.CorruptError
	require.ErrorAs(t, err, &ce, "A9: a record that does not open is malformed")
	require.NotContains(t, err.Error(), "key-of-m-1", "no secret in the error")
}

// TestHistoryKeepsTheNewestWindow: a marquee's history shows at most
// HistoryLimit entries (200 decisions, docs/rules/marquee.md), newest
// first, as steps stage them. The entries past the window are deleted as
// one range every HistoryTrimEvery entries, so a step writes its record
// and its entry and nothing else between trims, and the store never holds
// more than HistoryLimit+HistoryTrimEvery-1.
func TestHistoryKeepsTheNewestWindow(t *testing.T) {
	st := memStore(t)
	w := MarqueeWrites{}
	rec := Marquee{State: marquee.State{ID: "m-1", Kind: marquee.BYO}}
	stored := func() (n int) {
		require.NoError(t, st.Scan(persistence.HistoryPrefix("m-1"), nil, func(_, _ []byte) (bool, error) { n++; return true, nil }))
		return n
	}
	const steps = HistoryLimit + 3*HistoryTrimEvery + 5
	trims := 0
	for i := range steps {
		b := st.NewBatch()
		rd := marquee.Outcome{Records: []marquee.Entry{{Verb: "e", Generation: uint64(i + 1)}}}
		next := NextMarquee(rec, rec.State, rd, at)
		w.Stage(b, "m-1", rec, next, rd)
		seq := uint64(i + 1)
		trim := seq > HistoryLimit && seq%HistoryTrimEvery == 0
		require.Equal(t, map[bool]int{false: 2, true: 3}[trim], b.Len(), "entry %d: the record, the entry and, at a trim, one range", seq)
		require.NoError(t, b.Commit())
		rec = next
		n := stored()
		require.LessOrEqual(t, n, HistoryLimit+HistoryTrimEvery-1, "entry %d", seq)
		if trim {
			trims++
			require.Equal(t, HistoryLimit, n, "entry %d: the trim leaves the window", seq)
		}
	}
	require.Equal(t, 3, trims)
	h, err := History(st, "m-1", HistoryLimit+10)
	require.NoError(t, err)
	require.Len(t, h, HistoryLimit)
	require.Equal(t, uint64(steps), h[0].Generation, "newest first")
	require.Equal(t, uint64(steps-HistoryLimit+1), h[len(h)-1].Generation, "the older ones fell out, stored or not")
	h, err = History(st, "m-1", 3)
	require.NoError(t, err)
	require.Len(t, h, 3)
}

// FuzzLoadStoredRecords: whatever bytes a store holds under a marquee's
// or an environment's key, reading them gives a record that validates and
// names its key, or a CorruptError; never a panic, never a secret.
func FuzzLoadStoredRecords(f *testing.F) {
	st := memStore(f)
	b := st.NewBatch()
	SeedMarquee(b, sealerOf("k1", 1), withSecret("m-1"))
	SeedMarquee(b, nil, Marquee{State: marquee.State{ID: "m-2", Kind: marquee.BYO, Serving: marquee.Active}})
	EnvironmentWrites{}.Stage(b, "e-1", Environment{}, Environment{Env: environment.Env{ID: "e-1", Branch: "main", Generation: 1}}, environment.Outcome{})
	require.NoError(f, b.Commit())
	for _, prefix := range []string{persistence.MarqueePrefix, persistence.EnvPrefix} {
		require.NoError(f, st.Scan([]byte(prefix), nil, func(_, v []byte) (bool, error) {
			f.Add(append([]byte(nil), v...))
			return true, nil
		}))
	}
	f.Add([]byte(`{"state":{"id":"m-1"}}`))
	f.Add([]byte(`{"env":{"id":"e-2"}}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, val []byte) {
		b := st.NewBatch()
		b.Set(persistence.MarqueeKey("m-f"), val)
		b.Set(persistence.EnvKey("e-f"), val)
		require.NoError(t, b.Commit())
		var ce *persistence.CorruptError
		if m, err := LoadMarquee(st, sealerOf("k1", 1), "m-f"); err != nil {
			require.True(t, errors.As(err, &ce), "%v", err)
		} else {
			require.Equal(t, "m-f", m.State.ID)
			require.NoError(t, m.State.Validate())
		}
		if e, err := LoadEnvironment(st, "e-f"); err != nil {
			require.True(t, errors.As(err, &ce), "%v", err)
		} else {
			require.Equal(t, "e-f", e.Env.ID)
		}
	})
}

// FuzzDecodeAgreesWithEncodingJSON: the stored records' reader (JSON v2
// under encoding/json's rules) accepts what encoding/json's Decoder with
// unknown fields refused accepted, and reads the same record from it, for
// the records with the most shape (a marquee's, an environment's); the
// one difference, a tail after the value, is refused.
func FuzzDecodeAgreesWithEncodingJSON(f *testing.F) {
	f.Add(persistence.Encode(withSecret("m-1"))[1:])
	f.Add(persistence.Encode(Environment{Env: environment.Env{ID: "e-1", Branch: "main", Generation: 1}, WakeAt: at})[1:])
	f.Add([]byte(`{"STATE":{"id":"m-1","id":"m-2","kind":"byo"},"history_seq":1}`))
	f.Add([]byte("{\"state\":{\"id\":\"m-\xff\"},\"wake_at\":null}"))
	f.Fuzz(func(t *testing.T, val []byte) {
		stored := append([]byte{1}, val...)
		var m, oldM Marquee
		requireSameReading(t, persistence.Decode([]byte("m/x"), stored, &m), readAsEncodingJSON(val, &oldM), m, oldM)
		var e, oldE Environment
		requireSameReading(t, persistence.Decode([]byte("e/x"), stored, &e), readAsEncodingJSON(val, &oldE), e, oldE)
	})
}

// readAsEncodingJSON is how records were read before: encoding/json's
// Decoder refusing unknown fields, and (the one rule added) nothing but
// whitespace after the value.
func readAsEncodingJSON(val []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(val))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if len(bytes.TrimLeft(val[dec.InputOffset():], " \t\r\n")) > 0 {
		return errors.New("data after the value")
	}
	return nil
}

func requireSameReading[T any](t *testing.T, err, oldErr error, got, old T) {
	t.Helper()
	if oldErr != nil {
		var ce *persistence.CorruptError
		require.ErrorAs(t, err, &ce, "encoding/json refused it: %v", oldErr)
		return
	}
	require.NoError(t, err, "encoding/json read it")
	require.Equal(t, old, got)
}

// TestE8BranchGenerationIsTheNewestOfItsOwnKeys: the newest generation is
// read from the last key, passing over the keys of a branch whose name
// extends this one's ("feat/0abc" under "feat"), wherever they sort.
func TestE8BranchGenerationIsTheNewestOfItsOwnKeys(t *testing.T) {
	st := memStore(t)
	b := st.NewBatch()
	for _, g := range []struct {
		branch string
		gen    uint64
	}{{"feat", 3}, {"feat", 12}, {"feat/0abc", 40}, {"feat/x", 50}, {"feat/fff", 60}, {"main", 7}} {
		b.Set(persistence.BranchGenerationKey(g.branch, g.gen), []byte("env-"+g.branch))
	}
	require.NoError(t, b.Commit())
	for branch, want := range map[string]uint64{"feat": 12, "feat/0abc": 40, "feat/x": 50, "main": 7, "none": 0} {
		got, err := BranchGeneration(st, branch)
		require.NoError(t, err)
		require.Equal(t, want, got, branch)
		loaded, err := LoadBranch(st, branch)
		require.NoError(t, err)
		require.Equal(t, want, loaded.Last, "the forward read agrees: %s", branch)
	}
}
