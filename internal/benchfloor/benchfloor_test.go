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
