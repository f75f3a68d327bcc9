package testkit

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func page(ids ...string) map[string]any {
	var items []any
	for _, id := range ids {
		items = append(items, map[string]any{"delivery_id": id})
	}
	return map[string]any{"items": items}
}

// TestAppliedFound: I5's check finds an acknowledged delivery missing from
// a history page, and does not judge a full page (older entries age out).
func TestAppliedFound(t *testing.T) {
	n, err := AppliedFound("m-1", page("d-1", "d-2"), []string{"d-1", "d-2"})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = AppliedFound("m-1", page("d-1"), []string{"d-1", "d-2"})
	require.ErrorContains(t, err, "I5: callback d-2 to m-1")
	full := make([]string, HistoryPage)
	for i := range full {
		full[i] = "other"
	}
	n, err = AppliedFound("m-1", page(full...), []string{"d-9"})
	require.NoError(t, err)
	require.Zero(t, n, "a full page is not judged")
}

// TestDispatchesTwice: I2's check names a generation dispatched twice.
func TestDispatchesTwice(t *testing.T) {
	var d Dispatches
	send := func(gen string) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(`{"inputs":{"marquee_id":"m-1","generation":"`+gen+`","action":"apply"}}`))
		_, ok := d.Record(httptest.NewRecorder(), r)
		require.True(t, ok)
	}
	send("1")
	send("2")
	require.NoError(t, d.Twice())
	send("2")
	require.ErrorContains(t, d.Twice(), "m-1 generation 2 dispatched 2 times")
	require.Equal(t, 3, d.Total())
}

// TestStablePortIsReservedForTheMachine: a port one test process took is
// not handed to another while the first lives, and is free again once it
// exits. The lock is held per open file, so a second open here stands in
// for another process.
func TestStablePortIsReservedForTheMachine(t *testing.T) {
	addr, err := StablePort()
	require.NoError(t, err)
	_, p, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	require.Less(t, port, appPortCeiling, "below the preview applications' ports")

	handedMu.Lock()
	defer handedMu.Unlock()
	first := handed[port]
	delete(handed, port)
	require.False(t, reserve(port), "a port another process holds was reserved again")
	first.Close() // the process that took it exits
	require.True(t, reserve(port), "a port no process holds was not reserved")
}
