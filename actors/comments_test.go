package actors

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ruleID is a rule's name as docs/rules/ writes it (M7, C14).
var ruleID = regexp.MustCompile(`\b[MAEITOWCSPD]\d{1,2}\b`)

// issueRef is an issue's number, which means nothing to a reader of the
// repository: a comment cites the rule instead.
var issueRef = regexp.MustCompile(`\b[Ii]ssues? \d+`)

// TestCommentsCiteRulesWhereTheyAreImplemented holds comments to carrying
// their weight (docs/architecture.md, "Comments"): a rule id belongs on
// the line that decides or checks that rule, so across the module's non-test Go code
// there are fewer than 10 per thousand lines (the tests name the rules
// they hold; the code should not cite each one at every use), and no
// comment sends a reader to the history (NOTES.md, an issue's number).
func TestCommentsCiteRulesWhereTheyAreImplemented(t *testing.T) {
	var lines, ids int
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		lines += strings.Count(string(src), "\n")
		for _, g := range f.Comments {
			text := g.Text()
			ids += len(ruleID.FindAllString(text, -1))
			require.NotContains(t, text, "NOTES.md", "%s cites the history", path)
			require.False(t, issueRef.MatchString(text), "%s cites an issue's number: %q", path, issueRef.FindString(text))
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, lines, 10000, "the walk found the module")
	perThousand := float64(ids) * 1000 / float64(lines)
	require.Less(t, perThousand, 10.0, "%d rule ids in the comments of %d lines of code", ids, lines)
}
