package driver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mostAtOnce runs calls driver calls at once through procs and reports
// the most processes any of them saw running beside itself: each marks
// itself running in a directory, counts the marks, waits, and unmarks.
func mostAtOnce(t *testing.T, procs *Descriptors, calls int) int {
	dir := t.TempDir()
	running, counts := filepath.Join(dir, "running"), filepath.Join(dir, "counts")
	require.NoError(t, os.Mkdir(running, 0o755))
	e := &ExecDispatcher{Exec{Command: script(t, `cat >/dev/null; mkdir "$RUNNING/$$"; ls "$RUNNING" | wc -l >> "$COUNTS"; sleep 0.2; rmdir "$RUNNING/$$"; echo '{"ok":true}'`),
		Env: []string{"RUNNING=" + running, "COUNTS=" + counts}, Descriptors: procs}}
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			_, err := e.Dispatch(context.Background(), DispatchRequest{MarqueeID: "m-1", Generation: 1})
			assert.NoError(t, err) // not require: FailNow belongs to the test's own goroutine
		})
	}
	wg.Wait()
	raw, err := os.ReadFile(counts)
	require.NoError(t, err)
	most, lines := 0, strings.Fields(string(raw))
	require.Len(t, lines, calls, "every call ran its process")
	for _, l := range lines {
		n, err := strconv.Atoi(l)
		require.NoError(t, err)
		most = max(most, n)
	}
	return most
}

// TestS13DriverProcessesRunAtMostTheirBoundAtOnce: twelve calls at once
// through a bound of three run three processes at a time, and all of
// them run; with no bound they all start together (the check can fail).
func TestS13DriverProcessesRunAtMostTheirBoundAtOnce(t *testing.T) {
	require.LessOrEqual(t, mostAtOnce(t, NewDescriptors(3*DescriptorsPerProcess), 12), 3)
	require.Greater(t, mostAtOnce(t, nil, 12), 3, "without a bound the calls overlap, so the bound is what held them")
}

// TestS13ACallWaitingForADriverProcessEndsWithItsContext: a call that
// waits for a slot while its context ends fails transient, naming the
// bound, and runs nothing; the slot's holder is not disturbed.
func TestS13ACallWaitingForADriverProcessEndsWithItsContext(t *testing.T) {
	procs := NewDescriptors(DescriptorsPerProcess)
	done, err := procs.Start(context.Background(), "holder")
	require.NoError(t, err)
	defer done()
	ran := filepath.Join(t.TempDir(), "ran")
	e := &ExecDispatcher{Exec{Command: script(t, `touch "$RAN"; echo '{"ok":true}'`), Env: []string{"RAN=" + ran}, Descriptors: procs}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.Dispatch(ctx, DispatchRequest{})
	require.Equal(t, Transient, ClassOf(err))
	require.ErrorContains(t, err, "waited for 7 of the 7 descriptors drivers may hold at once")
	require.NoFileExists(t, ran)
}

// TestS13AnOutboundConnectionHoldsADescriptorUntilClosed: a bound of
// seven lets seven connections open; the eighth waits, gives up with its
// context, and opens once one of the seven is closed.
func TestS13AnOutboundConnectionHoldsADescriptorUntilClosed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	d := NewDescriptors(DescriptorsPerProcess)
	var open []interface{ Close() error }
	for range DescriptorsPerProcess {
		c, err := d.DialContext(context.Background(), "tcp", addr)
		require.NoError(t, err)
		open = append(open, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := d.DialContext(ctx, "tcp", addr)
	require.Equal(t, Transient, ClassOf(err))
	require.ErrorContains(t, err, "waited for 1 of the 7 descriptors")
	require.NoError(t, open[0].Close())
	_ = open[0].Close() // a second close gives nothing back twice (the semaphore would panic)
	c, err := d.DialContext(context.Background(), "tcp", addr)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	for _, c := range open[1:] {
		require.NoError(t, c.Close())
	}
	done, err := d.Start(context.Background(), "after")
	require.NoError(t, err, "every descriptor came back")
	done()
}

// TestS13ADriverWaitingForDescriptorsClosesIdleConnectionsFirst:
// connections kept for reuse hold the whole bound (one to each of seven
// servers); a process that needs the descriptors closes them and runs at
// once rather than waiting for their idle timeout.
func TestS13ADriverWaitingForDescriptorsClosesIdleConnectionsFirst(t *testing.T) {
	d := NewDescriptors(DescriptorsPerProcess)
	client := &http.Client{Transport: d.Transport()}
	for range DescriptorsPerProcess {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body) // read whole, the connection is kept for reuse
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done, err := d.Start(ctx, "needs them all")
	require.NoError(t, err)
	done()
}
