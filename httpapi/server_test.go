package httpapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/errs"
)

// TestEveryErrorKindHasOneAnswer: the one table (answers) answers every
// refusal with a status and a code word of its own, and every kind the
// errs package has is one of them, so that no refusal is written by hand
// and none is answered with status 0.
func TestEveryErrorKindHasOneAnswer(t *testing.T) {
	codes := map[string]bool{}
	for r := refusal(0); r < refusals; r++ {
		a := answers[r]
		require.GreaterOrEqual(t, a.status, 400, "refusal %d", r)
		require.NotEmpty(t, a.code, "refusal %d", r)
		require.False(t, codes[a.code], "code %s answers two refusals", a.code)
		codes[a.code] = true
		if a.status == 503 {
			require.NotEmpty(t, a.retryAfter, "%s: every 503 carries Retry-After", a.code)
		}
	}
	for k := errs.Other; k.String() != "class?"; k++ {
		_, ok := ofClass[k]
		require.True(t, ok, "error kind %s has no refusal", k)
	}
	// Each code word is documented where clients look for it.
	rules, err := os.ReadFile(filepath.Join("..", "docs/rules/http-api.md"))
	require.NoError(t, err)
	spec, err := os.ReadFile("openapi.yaml")
	require.NoError(t, err)
	for code := range codes {
		require.Contains(t, string(rules), "`"+code+"`", "docs/rules/http-api.md names %s", code)
		require.Contains(t, string(spec), code, "openapi.yaml names %s", code)
	}
}
