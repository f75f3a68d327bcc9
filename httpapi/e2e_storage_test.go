package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/faultfs"
)

// walFault fails the next WAL write on the real disk once armed.
type walFault struct {
	armed atomic.Bool
	errno syscall.Errno
}

func (f *walFault) String() string { return "wal fault" }

func (f *walFault) MaybeError(op errorfs.Op) error {
	if strings.HasSuffix(op.Path, ".log") && op.Kind == errorfs.OpFileWrite && f.armed.CompareAndSwap(true, false) {
		return fmt.Errorf("injected: %w", f.errno)
	}
	return nil
}

// syncLog is a slog sink safe for the server's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func errMessage(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// TestS2AFailedWriteIsAnsweredAtOnceByItsCause: the first refused write
// answers 503 storage_unavailable naming the disk, long before the ask
// timeout; every later request too; reads are refused (S5); /readyz says
// why; one ERROR line; the metric is 1.
func TestS2AFailedWriteIsAnsweredAtOnceByItsCause(t *testing.T) {
	fault := &walFault{errno: syscall.ENOSPC}
	logs := &syncLog{}
	so := persistence.Options{FS: faultfs.Wrap(vfs.Default, fault), Logger: slog.New(slog.NewTextHandler(logs, nil))}
	w := newWorldOn(t, defaultPools, so, func(c *actors.Config, _ *httpapi.Options) { c.AskTimeout = 30 * time.Second })
	w.create("m-1")

	fault.armed.Store(true)
	start := time.Now()
	st, v, _ := w.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-2", "kind": "tutorial"})
	took := time.Since(start)
	require.Equal(t, http.StatusServiceUnavailable, st, "%v", v)
	require.Equal(t, "storage_unavailable", errCode(v))
	require.Contains(t, errMessage(v), "disk full")
	require.Less(t, took, 10*time.Second, "answered when the store sealed, not after the 30 s ask timeout")

	for _, req := range []struct{ method, path, token string }{
		{"POST", "/v1/marquees/m-1/disable", operatorToken},
		{"GET", "/v1/marquees/m-2", operatorToken}, // never durable: never shown (S5)
		{"GET", "/v1/marquees/m-1", operatorToken}, // nothing is read from a sealed store
		{"GET", "/v1/marquees", operatorToken},
		{"GET", "/readyz", ""},
	} {
		var body any
		if req.method == "POST" {
			body = map[string]any{}
		}
		st, v, _ := w.do(req.method, req.path, req.token, body)
		require.Equal(t, http.StatusServiceUnavailable, st, "%s %s: %v", req.method, req.path, v)
		require.Equal(t, "storage_unavailable", errCode(v), "%s %s", req.method, req.path)
		require.Contains(t, errMessage(v), "disk full")
	}
	st, v = w.callback(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"})
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Equal(t, "storage_unavailable", errCode(v))

	resp, err := http.Get(w.url + "/metrics")
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(metrics), "\nwarden_storage_failed 1\n")
	require.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "one ERROR line, not one a request:\n%s", logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "storage failed"), "said once:\n%s", logs.String())
}

// lowDisk is the real reserve with a switch: low makes it ask for more
// space than any disk has.
type lowDisk struct {
	dir string
	low atomic.Bool
}

func (l *lowDisk) Check() error {
	r := persistence.Reserve{Dir: l.dir, Bytes: 1}
	if l.low.Load() {
		r.Bytes = 1 << 62
	}
	return r.Check()
}

// TestS9BelowTheReserveNewWorkIsRefusedAndLifecyclesFinish: creates and
// redeploys get 507 storage_low; callbacks and other commands of
// existing marquees still commit.
func TestS9BelowTheReserveNewWorkIsRefusedAndLifecyclesFinish(t *testing.T) {
	low := &lowDisk{}
	w := newWorldWith(t, defaultPools, func(c *actors.Config, _ *httpapi.Options) { c.Reserve = low })
	low.dir = w.dir
	w.create("m-1")
	v := w.waitFor("m-1", "dispatched", func(v map[string]any) bool { return gen(v) > 0 })

	low.low.Store(true)
	st, body, _ := w.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-2", "kind": "tutorial"})
	require.Equal(t, http.StatusInsufficientStorage, st)
	require.Equal(t, "storage_low", errCode(body))
	st, body, _ = w.do("POST", "/v1/marquees/m-1/redeploy", operatorToken, nil)
	require.Equal(t, http.StatusInsufficientStorage, st, "a redeploy is new work")
	require.Equal(t, "storage_low", errCode(body))
	st, body, _ = w.do("POST", "/v1/environments", operatorToken, map[string]any{"id": "env-1", "branch": "main", "revision": "r1"})
	require.Equal(t, http.StatusInsufficientStorage, st, "%v", body)

	// The lifecycle under way finishes.
	require.Equal(t, "applied", w.result(deployedBody("m-1", gen(v), "203.0.113.7")))
	w.waitFor("m-1", "provisioned", lifecycleIs("provisioned"))
	st, _, _ = w.do("POST", "/v1/marquees/m-1/disable", operatorToken, nil)
	require.Equal(t, http.StatusOK, st)

	low.low.Store(false)
	w.create("m-2")
}

// TestS4AReadOnlyStoreServesReadsAndRecoversWhenWritable: the system
// starts on a store that cannot be written, serves reads, answers writes
// 503 with the cause, and runs recovery once the store is writable.
func TestS4AReadOnlyStoreServesReadsAndRecoversWhenWritable(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.stop()

	ro := &readOnlyFS{}
	ro.on.Store(true)
	w.storeOpts = persistence.Options{FS: faultfs.Wrap(vfs.Default, ro), Degrade: true}
	w.start()
	require.Equal(t, "m-1", w.view("m-1")["id"], "reads are served")
	st, v, _ := w.do("GET", "/v1/pools/default", operatorToken, nil)
	require.Equal(t, http.StatusOK, st, "%v", v)
	st, v, _ = w.do("POST", "/v1/marquees", operatorToken, map[string]any{"id": "m-2", "kind": "tutorial"})
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Equal(t, "storage_unavailable", errCode(v))
	require.Contains(t, errMessage(v), "read-only filesystem")
	st, v, _ = w.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, st)
	require.Contains(t, errMessage(v), "read-only")

	ro.on.Store(false)
	ok, err := w.store.TryWritable()
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, w.sys.Resume())
	st, _, _ = w.do("GET", "/readyz", "", nil)
	require.Equal(t, http.StatusOK, st)
	w.create("m-2")
	w.waitFor("m-1", "recovered and dispatched", func(v map[string]any) bool { return gen(v) > 0 })
}

// readOnlyFS refuses every write while on, as a filesystem remounted
// read-only does.
type readOnlyFS struct{ on atomic.Bool }

func (r *readOnlyFS) String() string { return "read-only" }

func (r *readOnlyFS) MaybeError(op errorfs.Op) error {
	if !r.on.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite || op.Kind == errorfs.OpLock || op.Kind == errorfs.OpFileClose {
		return nil
	}
	return fmt.Errorf("injected: %w", syscall.EROFS)
}
