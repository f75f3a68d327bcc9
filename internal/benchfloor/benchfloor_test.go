package benchfloor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/persistence"
)

// Each write is its own key, durable on a reopened store, and apart from
// every record family.
func TestFloorWritesEachBodyUnderAKeyOfItsOwn(t *testing.T) {
	dir := t.TempDir()
	store, err := persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	f := New(store)
	require.NoError(t, f.Write([]byte("one")))
	require.NoError(t, f.Write([]byte("two")))
	require.NoError(t, store.Close())

	store, err = persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	var got []string
	require.NoError(t, store.Scan([]byte(Prefix), nil, func(k, v []byte) (bool, error) {
		got = append(got, string(k)+"="+string(v))
		return true, nil
	}))
	require.Equal(t, []string{string(Key(1)) + "=one", string(Key(2)) + "=two"}, got)
}

// The records floor writes a callback's shape: per slot one marquee
// record and one deliveries chunk, rewritten, and a history of
// HistoryWindow entries once trimmed, the entries past it deleted as one
// range every HistoryTrimEvery.
func TestRecordsFloorKeepsACallbacksShape(t *testing.T) {
	dir := t.TempDir()
	store, err := persistence.Open(dir, persistence.Options{})
	require.NoError(t, err)
	defer store.Close()
	f := New(store)
	const perSlot = 4 * HistoryTrimEvery // a trim at the 256th
	for range Slots * perSlot {
		require.NoError(t, f.WriteRecords(nil))
	}
	sizes := map[byte]int{}
	count := map[byte]int{}
	require.NoError(t, store.Scan([]byte(RecordsPrefix), nil, func(k, v []byte) (bool, error) {
		family := k[len(RecordsPrefix)]
		count[family]++
		sizes[family] = len(v)
		return true, nil
	}))
	require.Equal(t, map[byte]int{'m': Slots, 'r': Slots, 'h': Slots * HistoryWindow}, count, "trimmed to the window")
	require.Equal(t, map[byte]int{'m': MarqueeBytes, 'r': DeliveriesBytes, 'h': HistoryBytes}, sizes)
	has, err := store.Has(RecordsHistoryKey(7, perSlot-HistoryWindow-1))
	require.NoError(t, err)
	require.False(t, has, "the oldest entries were deleted")
	has, err = store.Has(RecordsHistoryKey(7, perSlot-HistoryWindow))
	require.NoError(t, err)
	require.True(t, has, "the window's oldest is kept")
	require.NoError(t, f.WriteRecords(nil))
	has, err = store.Has(RecordsHistoryKey(0, perSlot))
	require.NoError(t, err)
	require.True(t, has, "and the next added, past the window until the next trim")
}
