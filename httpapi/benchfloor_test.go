//go:build benchfloor

package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/benchfloor"
	"github.com/wardenhq/warden/persistence"
)

// A benchmark build's floors (make bench): each writes what it was sent
// into the server's store; the no-op answers a callback's body without a
// write. make test runs this file with -tags benchfloor.
func TestBenchFloorWritesTheBody(t *testing.T) {
	w := &world{t: t, gh: newFakeGitHub(t), cp: newFakeControlPlane(t), dir: t.TempDir(), pools: defaultPools,
		preview: newFakePreview(), notify: newNotifySink(t),
		beforeServe: func(api *httpapi.Server, st *persistence.Store) { api.ServeFloors(benchfloor.New(st)) }}
	w.https = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusNotFound) }))
	t.Cleanup(w.https.Close)
	w.start()
	t.Cleanup(w.stop)
	code, answer, _ := w.do(http.MethodPost, "/v1/webhooks/floor", "", `{"x":1}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", answer["result"])
	has, err := w.store.Has(benchfloor.Key(1))
	require.NoError(t, err)
	require.True(t, has, "the body is in the store")

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

// TestBenchNoopAnswersAsTheWebhookWithoutAWrite: the no-op baseline
// authenticates and decodes as the webhook does and writes nothing.
func TestBenchNoopAnswersAsTheWebhookWithoutAWrite(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.stop()
	w.beforeServe = func(api *httpapi.Server, st *persistence.Store) { api.ServeFloors(benchfloor.New(st)) }
	w.start()
	body := map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"}
	code, answer, _ := w.do(http.MethodPost, "/v1/webhooks/noop", callbackToken, body)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ignored", answer["result"])
	code, _, _ = w.do(http.MethodPost, "/v1/webhooks/noop", "wrong", body)
	require.Equal(t, http.StatusUnauthorized, code, "authenticated as the webhook is")
	code, _, _ = w.do(http.MethodGet, "/v1/marquees/m-1", operatorToken, nil)
	require.Equal(t, http.StatusNotFound, code, "nothing written")
}
