package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/benchfloor"
)

// The benchmark's floor is served only when the server is given one, and
// then writes the body it was sent into the server's store.
func TestBenchFloorOnlyWhenGivenAndItWritesTheBody(t *testing.T) {
	plain := newWorld(t, defaultPools)
	code, _, _ := plain.do(http.MethodPost, "/v1/webhooks/floor", "", `{"x":1}`)
	require.Equal(t, http.StatusNotFound, code, "no floor route in production")

	w := newWorldWith(t, defaultPools, func(c *actors.Config, o *httpapi.Options) { o.Floor = benchfloor.New(c.Store) })
	code, answer, _ := w.do(http.MethodPost, "/v1/webhooks/floor", "", `{"x":1}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", answer["result"])
	has, err := w.store.Has(benchfloor.Key(1))
	require.NoError(t, err)
	require.True(t, has, "the body is in the store")

	code, _, _ = plain.do(http.MethodPost, "/v1/webhooks/floor-records", "", `{"x":1}`)
	require.Equal(t, http.StatusNotFound, code, "no records floor in production")
	code, answer, _ = w.do(http.MethodPost, "/v1/webhooks/floor-records", "", `{"x":1}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", answer["result"])
	written := func(k []byte) bool {
		has, err := w.store.Has(k)
		require.NoError(t, err)
		return has
	}
	for _, k := range [][]byte{benchfloor.RecordsKey('m', 0), benchfloor.RecordsHistoryKey(0, 0)} {
		require.True(t, written(k), "the records floor wrote %s", k)
	}
	// A slot's chunk of deliveries is written when it fills, at the slot's
	// ChunkEvery-th callback, as a marquee's is (store format 4).
	require.False(t, written(benchfloor.RecordsKey('r', 0)))
	for range benchfloor.Slots*benchfloor.ChunkEvery - 1 {
		code, _, _ = w.do(http.MethodPost, "/v1/webhooks/floor-records", "", `{"x":1}`)
		require.Equal(t, http.StatusOK, code)
	}
	require.True(t, written(benchfloor.RecordsKey('r', 0)), "the records floor wrote the slot's chunk")
}
