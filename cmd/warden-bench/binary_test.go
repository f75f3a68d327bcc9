package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryModeMeasuresTheWardenFlagsBinary: an A/B of two builds runs
// the bench with -warden naming each, so every mode must start that
// binary. The webhook paths once built their own from the checkout
// whatever -warden said, and an A/B compared one build with itself. Only
// wardenBinary may build one.
func TestEveryModeMeasuresTheWardenFlagsBinary(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	builders := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || !strings.HasPrefix(sel.Sel.Name, "BuildWarden") {
					return true
				}
				builders++
				if fn.Name.Name != "wardenBinary" {
					t.Errorf("%s: %s builds warden itself: call wardenBinary, which honours -warden", fset.Position(sel.Pos()), fn.Name.Name)
				}
				return true
			})
		}
	}
	if builders == 0 {
		t.Fatal("no call of testkit.BuildWarden* found: the check checked nothing")
	}
	wardenBin = "/a/build/of/warden"
	defer func() { wardenBin = "" }()
	if got, err := wardenBinary(t.TempDir()); err != nil || got != wardenBin {
		t.Fatalf("wardenBinary = %q, %v; want -warden's %q", got, err, wardenBin)
	}
}
