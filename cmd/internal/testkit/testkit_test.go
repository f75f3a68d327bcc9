package testkit

import (
	"net/http/httptest"
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
