package actors

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuncLines is how long a function may be and still be read at once.
const maxFuncLines = 70

// TestNoFunctionIsLongWithoutAReason: a function outside tests and
// generated code is at most maxFuncLines long, or says why it is longer
// in a line of its doc comment that starts with "Long:" (a table read as
// one, a harness's script read top to bottom).
func TestNoFunctionIsLongWithoutAReason(t *testing.T) {
	var unexplained []string
	walkRepo(t, func(path string, src []byte) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator)) {
			return
		}
		unexplained = append(unexplained, longWithoutReason(t, path, src)...)
	})
	sort.Strings(unexplained)
	if len(unexplained) > 0 {
		t.Fatalf("functions over %d lines with no \"Long:\" line in their doc comment:\n%s", maxFuncLines, strings.Join(unexplained, "\n"))
	}
}

// longWithoutReason lists the functions of one file over maxFuncLines
// whose doc comment gives no reason.
func longWithoutReason(t *testing.T, path string, src []byte) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if ast.IsGenerated(f) {
		return nil
	}
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
		if lines > maxFuncLines && !hasReason(fn.Doc) {
			out = append(out, fmt.Sprintf("%s:%d %s (%d lines)", path, fset.Position(fn.Pos()).Line, fn.Name.Name, lines))
		}
	}
	return out
}

func hasReason(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	for _, c := range doc.List {
		if strings.HasPrefix(c.Text, "// Long: ") {
			return true
		}
	}
	return false
}

func TestALongFunctionNeedsItsReason(t *testing.T) {
	body := strings.Repeat("\t_ = 1\n", maxFuncLines)
	src := "package p\n\n// F is long.\nfunc F() {\n" + body + "}\n\n// G is long.\n// Long: a table read as one.\nfunc G() {\n" + body + "}\n\nfunc H() {}\n"
	got := longWithoutReason(t, "p.go", []byte(src))
	require.Len(t, got, 1)
	require.Contains(t, got[0], " F ", "G gives its reason; H is short")
}
