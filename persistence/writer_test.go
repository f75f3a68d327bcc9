package persistence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRecorderSaysWhatAStepWrites: the golden suites' write: line names
// each family once, in the order first written, and a Batch and a
// Recorder take the same writes (Writer).
func TestRecorderSaysWhatAStepWrites(t *testing.T) {
	at := time.Date(2026, 1, 1, 14, 1, 0, 0, time.UTC)
	var r Recorder
	require.Equal(t, "none", r.String())
	r.Put(MarqueeKey("m-1"), struct{}{})
	r.Put(HistoryKey("m-1", 201), struct{}{})
	r.Delete(HistoryKey("m-1", 1))
	r.MoveWake(WakeMarquee, "m-1", at.Add(-time.Hour), at)
	r.PutDeliveries("m-1", "d-7", nil, false, false)
	r.Set(BranchGenerationKey("main", 3), nil)
	r.Delete(BranchGenerationKey("main", 2))
	r.Delete(AdmissionKey("default", "m-2"))
	require.Equal(t, "marquee m-1, history +1 -1, wake 14:01:00 (was 13:01:00), dedup d-7, branch main generation 3 -generation 2, admission -m-2", r.String())

	var trim Recorder
	trim.Put(HistoryKey("m-1", 256), struct{}{})
	trim.DeleteRange(HistoryKey("m-1", 0), HistoryKey("m-1", 57))
	require.Equal(t, "history +1 (window trimmed)", trim.String(), "a trim deletes a range, not a counted entry")

	var same Recorder
	same.MoveWake(WakeMarquee, "m-1", at, at)
	require.Equal(t, "none", same.String(), "a wake entry that stays is not written again")
}

// TestBatchPutStoresEncodesBytes: a batch's pooled encoding is exactly
// Encode's, so that what a record reads back, and any comparison of
// stored bytes, is the same whichever way it was written.
func TestBatchPutStoresEncodesBytes(t *testing.T) {
	st, err := Open(t.TempDir(), Options{})
	require.NoError(t, err)
	defer st.Close()
	v := map[string]any{"id": "m-1", "html": "<b>&</b>", "n": 3}
	b := st.NewBatch()
	b.Put([]byte("m/m-1"), v)
	require.NoError(t, b.Commit())
	var raw []byte
	require.NoError(t, st.Scan([]byte("m/"), nil, func(_, val []byte) (bool, error) { raw = append([]byte(nil), val...); return false, nil }))
	require.Equal(t, Encode(v), raw)
}
