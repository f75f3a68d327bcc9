package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListsBenchTimesTheConsoleNotItsSignInForm: the operator surfaces'
// bench signs in and times the pages it names. It had timed the console's
// sign-in form (562 bytes) for its console rows since the form came to
// need its own token; the bench now fails rather than report such a row.
// Its census is timed before anything has counted and must add up to the
// marquees stored.
func TestListsBenchTimesTheConsoleNotItsSignInForm(t *testing.T) {
	require.NoError(t, runLists("", 2_000, 3))
}

// TestMetricSumAddsTheFamilysMatchingSamples: the bench's duplicate
// check and its census check read /metrics through metricSum; another
// family, a sample without the labels asked and a comment add nothing.
func TestMetricSumAddsTheFamilysMatchingSamples(t *testing.T) {
	body := []byte(`# HELP warden_marquees Stored marquees by lifecycle (tombstone for reaped ones) and serving.
warden_marquees{lifecycle="provisioned",serving="active"} 99000
warden_marquees{lifecycle="provisioning",serving="disabled"} 1000
warden_marquees_other{lifecycle="provisioned"} 7
warden_callbacks_total{result="duplicate_delivery",route="terraform"} 3
warden_callbacks_total{result="accepted",route="terraform"} 5e+06
`)
	require.Equal(t, 100000.0, metricSum(body, "warden_marquees"))
	require.Equal(t, 3.0, metricSum(body, "warden_callbacks_total", `result="duplicate_delivery"`))
	require.Equal(t, 5e6, metricSum(body, "warden_callbacks_total", `result="accepted"`, `route="terraform"`))
	require.Zero(t, metricSum(body, "warden_callbacks_total", `result="accepted"`, `route="noop"`))
}
