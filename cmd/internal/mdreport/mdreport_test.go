package mdreport

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReplaceKeepsOtherSections(t *testing.T) {
	p := filepath.Join(t.TempDir(), "B.md")
	require.NoError(t, Replace(p, "## A", "## A\n\none\n"))
	require.NoError(t, Replace(p, "## B", "## B\n\ntwo\n"))
	require.NoError(t, Replace(p, "## A", "## A\n\nthree\n"))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, Preamble+"## A\n\nthree\n\n## B\n\ntwo\n\n", string(b))
}
