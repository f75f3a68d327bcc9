package httpapi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/errs"
)

// TestEveryErrorKindHasOneAnswer: the one table (answerOf) answers every
// kind the errs package has, each with a status and a code word, so that
// no refusal is written by hand and none is answered with status 0.
func TestEveryErrorKindHasOneAnswer(t *testing.T) {
	codes := map[string]bool{}
	for k := errs.Other; k.String() != "kind?"; k++ {
		a, ok := answerOf[k]
		require.True(t, ok, "kind %s has no answer", k)
		require.GreaterOrEqual(t, a.status, 400, "kind %s", k)
		require.NotEmpty(t, a.code, "kind %s", k)
		require.False(t, codes[a.code], "code %s answers two kinds", a.code)
		codes[a.code] = true
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
