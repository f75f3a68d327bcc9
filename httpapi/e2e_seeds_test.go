package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/driver"
)

// fakeSeeder keeps seeds by name with what they were made from.
type fakeSeeder struct {
	mu    sync.Mutex
	seeds map[string]string
}

func (f *fakeSeeder) MakeSeed(_ context.Context, name, sql string) (driver.Seed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if had, ok := f.seeds[name]; ok && had != sql {
		return driver.Seed{}, fmt.Errorf("%w: seed %s exists, made from something else: remove it first", errs.Conflict, name)
	}
	f.seeds[name] = sql
	return driver.Seed{Name: name, Fingerprint: fmt.Sprintf("%016x", len(sql))}, nil
}

func (f *fakeSeeder) RemoveSeed(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.seeds, name)
	return nil
}

func (f *fakeSeeder) Seeds(context.Context) ([]driver.Seed, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []driver.Seed
	for name, sql := range f.seeds {
		out = append(out, driver.Seed{Name: name, Fingerprint: fmt.Sprintf("%016x", len(sql))})
	}
	return out, nil
}

// seedPost sends a seed's SQL as the body.
func (w *world) seedPost(path, token, contentType, body string) (int, string) {
	w.t.Helper()
	st, _, answer := w.raw(http.MethodPost, path, body, "Authorization", "Bearer "+token, "Content-Type", contentType)
	return st, answer
}

// TestP20SeedsThroughTheAPI: an operator makes a seed from SQL sent as
// the body (application/sql), once: again from the same is as it was,
// from something else a conflict; it is listed, and removed; the body
// must be SQL, and a platform without seeds says so.
func TestP20SeedsThroughTheAPI(t *testing.T) {
	seeder := &fakeSeeder{seeds: map[string]string{}}
	w := newWorldWith(t, defaultPools, func(c *actors.Config, _ *httpapi.Options) { c.Env.Seeds = seeder })
	st, body := w.seedPost("/v1/seeds/demo", operatorToken, "application/sql", "INSERT INTO greeting VALUES (2, 'x');")
	require.Equal(t, http.StatusCreated, st, body)
	require.Contains(t, body, `"name":"demo"`)
	require.Contains(t, body, `"previews":[]`)
	st, body = w.seedPost("/v1/seeds/demo", operatorToken, "application/sql", "INSERT INTO greeting VALUES (2, 'x');")
	require.Equal(t, http.StatusCreated, st, "made again from the same: as it was: %s", body)
	st, body = w.seedPost("/v1/seeds/demo", operatorToken, "application/sql", "SELECT 1;")
	require.Equal(t, http.StatusConflict, st, body)
	st, _ = w.seedPost("/v1/seeds/demo", operatorToken, "application/json", `{"sql":"SELECT 1"}`)
	require.Equal(t, http.StatusUnsupportedMediaType, st)
	st, _ = w.seedPost("/v1/seeds/demo", operatorToken, "application/sql", "")
	require.Equal(t, http.StatusBadRequest, st, "no SQL")
	st, _ = w.seedPost("/v1/seeds/Not_A_Name", operatorToken, "application/sql", "SELECT 1;")
	require.Equal(t, http.StatusBadRequest, st)
	st, _ = w.seedPost("/v1/seeds/other", "wrong-token", "application/sql", "SELECT 1;")
	require.Equal(t, http.StatusUnauthorized, st)

	st, list, raw := w.do("GET", "/v1/seeds", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Len(t, list["items"], 1)
	st, _, raw = w.do("POST", "/v1/seeds/demo/remove", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, string(raw))
	_, list, _ = w.do("GET", "/v1/seeds", operatorToken, nil)
	require.Empty(t, list["items"])

	none := newWorld(t, defaultPools)
	st, body = none.seedPost("/v1/seeds/demo", operatorToken, "application/sql", "SELECT 1;")
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, body, "keeps no seeds")
}
