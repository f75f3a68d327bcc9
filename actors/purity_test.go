package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMachinesStayPure is a lint rule written as a test (as pebble's
// internal/lint does): the pure machines never import I/O stacks, the actor
// library or randomness, never read the clock and never start goroutines.
func TestMachinesStayPure(t *testing.T) {
	forbiddenImports := []string{"net", "os", "math/rand", "crypto/rand", "github.com/asynkron/protoactor-go",
		"github.com/cockroachdb/pebble", "github.com/wardenhq/warden/persistence", "github.com/wardenhq/warden/httpapi", "github.com/wardenhq/warden/internal/driver", "github.com/wardenhq/warden/actors/clock", "sync", "log"}
	forbiddenCalls := map[string]bool{"Now": true, "Since": true, "Until": true, "After": true, "AfterFunc": true, "NewTimer": true, "NewTicker": true, "Sleep": true, "Tick": true}
	for _, dir := range []string{"marquee", "admission", "environment", "entity"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range forbiddenImports {
					if path == bad || strings.HasPrefix(path, bad+"/") {
						t.Errorf("%s imports %s: machines stay pure", f, path)
					}
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: go statement at %s", f, fset.Position(n.Pos()))
				case *ast.SelectorExpr:
					if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && forbiddenCalls[n.Sel.Name] {
						t.Errorf("%s: time.%s at %s: time is an argument", f, n.Sel.Name, fset.Position(n.Pos()))
					}
				case *ast.SelectStmt:
					t.Errorf("%s: select at %s", f, fset.Position(n.Pos()))
				}
				return true
			})
		}
	}
}
