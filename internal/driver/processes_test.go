package driver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// mostAtOnce runs calls driver calls at once through procs and reports
// the most processes any of them saw running beside itself: each marks
// itself running in a directory, counts the marks, waits, and unmarks.
func mostAtOnce(t *testing.T, procs *Processes, calls int) int {
	dir := t.TempDir()
	running, counts := filepath.Join(dir, "running"), filepath.Join(dir, "counts")
	require.NoError(t, os.Mkdir(running, 0o755))
	e := &ExecDispatcher{Exec{Command: script(t, `cat >/dev/null; mkdir "$RUNNING/$$"; ls "$RUNNING" | wc -l >> "$COUNTS"; sleep 0.2; rmdir "$RUNNING/$$"; echo '{"ok":true}'`),
		Env: []string{"RUNNING=" + running, "COUNTS=" + counts}, Processes: procs}}
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			_, err := e.Dispatch(context.Background(), DispatchRequest{MarqueeID: "m-1", Generation: 1})
			require.NoError(t, err)
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
	require.LessOrEqual(t, mostAtOnce(t, NewProcesses(3), 12), 3)
	require.Greater(t, mostAtOnce(t, nil, 12), 3, "without a bound the calls overlap, so the bound is what held them")
}

// TestS13ACallWaitingForADriverProcessEndsWithItsContext: a call that
// waits for a slot while its context ends fails transient, naming the
// bound, and runs nothing; the slot's holder is not disturbed.
func TestS13ACallWaitingForADriverProcessEndsWithItsContext(t *testing.T) {
	procs := NewProcesses(1)
	done, err := procs.Start(context.Background(), "holder")
	require.NoError(t, err)
	defer done()
	ran := filepath.Join(t.TempDir(), "ran")
	e := &ExecDispatcher{Exec{Command: script(t, `touch "$RAN"; echo '{"ok":true}'`), Env: []string{"RAN=" + ran}, Processes: procs}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.Dispatch(ctx, DispatchRequest{})
	require.Equal(t, Transient, ClassOf(err))
	require.ErrorContains(t, err, "waited for one of the 1 driver processes allowed at once")
	require.NoFileExists(t, ran)
	require.Equal(t, 1, procs.Cap())
}
