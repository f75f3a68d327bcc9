package main

import (
	"testing"
	"time"

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
warden_census_age_seconds 0.25
`)
	require.Equal(t, 100000.0, metricSum(body, "warden_marquees"))
	require.Equal(t, 3.0, metricSum(body, "warden_callbacks_total", `result="duplicate_delivery"`))
	require.Equal(t, 5e6, metricSum(body, "warden_callbacks_total", `result="accepted"`, `route="terraform"`))
	require.Zero(t, metricSum(body, "warden_callbacks_total", `result="accepted"`, `route="noop"`))
	require.Equal(t, 0.25, metricSum(body, "warden_census_age_seconds"), "a sample without labels")
	require.Zero(t, metricSum(body, "warden_census_age_seconds", `result="accepted"`))
}

// TestTheCensusFigureIsACountTheScrapeMade: the first scrape's time is a
// count's only if the scrape counted; a census older than the scrape was
// counted before it was sent, and one that does not add up to the stored
// marquees counted nothing.
func TestTheCensusFigureIsACountTheScrapeMade(t *testing.T) {
	census := func(age string) []byte {
		return []byte("warden_marquees{lifecycle=\"provisioned\",serving=\"active\"} 2000\nwarden_census_age_seconds " + age + "\n")
	}
	require.NoError(t, censusCounted(census("1.05"), 2000, 1100*time.Millisecond))
	require.ErrorContains(t, censusCounted(census("1.2"), 2000, 5*time.Millisecond), "reused a count made before")
	require.ErrorContains(t, censusCounted(census("0.001"), 1999, time.Second), "not the 1999 stored")
}
