package actors

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rules live in docs/rules/, one file per family; each is written
// "**M16 ...**" where it is stated. These tests keep two promises: every
// rule stated there is shown by a test named for it, and every rule file
// the code cites exists (the code cited files outside the
// repository).

const repoRoot = ".."

var ruleStated = regexp.MustCompile(`\*\*([MAEITOWCSPD][0-9]{1,2})\b`)

// statedRules reads every rule id stated in docs/rules.
func statedRules(t *testing.T) map[string]string {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "rules", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	stated := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range ruleStated.FindAllStringSubmatch(string(b), -1) {
			stated[m[1]] = filepath.Base(f)
		}
	}
	return stated
}

// walkRepo calls fn for every file of the repository outside .git, bin
// and data directories.
func walkRepo(t *testing.T, fn func(path string, b []byte)) {
	err := filepath.Walk(repoRoot, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			switch info.Name() {
			case ".git", "bin", "data", "testoutput",
				"axe-core": // a third party's test data, kept as published
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(path, b)
		return nil
	})
	require.NoError(t, err)
}

// TestEveryRuleIsNamedByATest: a rule counts as tested only where a test
// is named for it: a test or fuzz function's name (TestM16...), a subtest's
// name written where it is run (t.Run("E15 ...")) or in a table's name
// field, or a golden script's case heading (a "#" line before a command).
// A rule mentioned in a comment, an assertion message or a golden file's
// expected output does not count.
func TestEveryRuleIsNamedByATest(t *testing.T) {
	stated := statedRules(t)
	for _, family := range []string{"M23", "A10", "E18", "I15", "T12", "O15", "W9", "C12", "S13", "P18", "D15"} {
		require.Contains(t, stated, family, "docs/rules states %s", family)
	}
	named := map[string]bool{}
	walkRepo(t, func(path string, b []byte) {
		var names []string
		switch {
		case strings.HasSuffix(path, "_test.go"):
			names = testNames(t, path, b)
		case strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator)):
			names = goldenHeadings(string(b))
		}
		for _, name := range names {
			// "E2E" in a test's name is end to end, not rule E2.
			for _, id := range citations(strings.ReplaceAll(name, "E2E", " ")) {
				named[id] = true
			}
		}
	})
	var missing []string
	for id, file := range stated {
		if !named[id] {
			missing = append(missing, id+" ("+file+")")
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "rules no test is named for")
}

// testNames lists the names a Go test file gives its tests: functions
// named Test*, Fuzz* or Benchmark*, the literal first argument of every Run call, and
// the literal name or Name field of a composite (a table's subtest names).
func testNames(t *testing.T, path string, src []byte) []string {
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	require.NoError(t, err)
	var names []string
	literal := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				names = append(names, s)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Recv == nil && isTestFunc(n.Name.Name) {
				names = append(names, n.Name.Name)
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Run" && len(n.Args) == 2 {
				literal(n.Args[0])
			}
		case *ast.KeyValueExpr:
			if key, ok := n.Key.(*ast.Ident); ok && (key.Name == "name" || key.Name == "Name") {
				literal(n.Value)
			}
		}
		return true
	})
	return names
}

// testFuncPrefixes begin the names of the functions go test runs.
var testFuncPrefixes = []string{"Test", "Fuzz", "Benchmark"}

func isTestFunc(name string) bool {
	return slices.ContainsFunc(testFuncPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// goldenHeadings lists a golden script's case headings: the "#" lines
// outside an expected output (which runs from "----" to a blank line, or
// between two "----" lines when it holds blank lines).
func goldenHeadings(script string) []string {
	var headings []string
	inOutput, twoSeparators := false, false
	lines := strings.Split(script, "\n")
	for i, line := range lines {
		switch {
		case line == "----" && !inOutput:
			inOutput = true
			twoSeparators = i+1 < len(lines) && lines[i+1] == "----"
		case inOutput && twoSeparators:
			if line == "----" && i > 0 && lines[i-1] != "----" && i+1 < len(lines) && lines[i+1] == "----" {
				inOutput = false
			}
		case inOutput:
			inOutput = line != ""
		case strings.HasPrefix(line, "#"):
			headings = append(headings, line)
		}
	}
	return headings
}

func TestRulesCountOnlyWhereATestIsNamedForThem(t *testing.T) {
	src := []byte(`package p
// M1 in a comment does not count.
func TestM2Name(t *testing.T) {
	t.Run("E15 a subtest", func(t *testing.T) { require.True(t, ok, "M3 in a message") })
	for _, tc := range []struct{ name string }{{name: "O4 from a table"}} { _ = tc }
}
func FuzzT5(f *testing.F) {}
func helperM6() {}
`)
	var ids []string
	for _, name := range testNames(t, "p_test.go", src) {
		ids = append(ids, citations(name)...)
	}
	require.Equal(t, []string{"M2", "E15", "O4", "T5"}, ids)
	require.Equal(t, []string{"C8"}, citations("BenchmarkC8Transition"))

	script := "# M7: a heading\ncreate id=m-1\n----\nrecord: applied (M8)\n# not a heading M9\n\n# A10 heading\ncmd\n----\n----\nout\n\n# M11 inside a two-separator output\n----\n----\n"
	require.Equal(t, []string{"# M7: a heading", "# A10 heading"}, goldenHeadings(script))
}

// TestEveryCitedRuleFileIsInTheRepository: a comment, message or script
// that names a rule file names one under docs/rules/.
func TestEveryCitedRuleFileIsInTheRepository(t *testing.T) {
	named := regexp.MustCompile(`(?:[\w./-]*/)?\b([a-z][a-z-]*)\.md\b`)
	kept := map[string]bool{"README.md": true, "BENCHMARKS.md": true}
	var bad []string
	walkRepo(t, func(path string, b []byte) {
		switch filepath.Ext(path) {
		case ".go", ".sh", ".yml", ".yaml", ".html", ".js":
		default:
			if filepath.Base(path) != "Makefile" && filepath.Base(path) != "run" {
				return
			}
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			ref := m[0]
			if kept[ref] || strings.HasPrefix(ref, "docs/") && exists(filepath.Join(repoRoot, ref)) {
				continue
			}
			if strings.Contains(ref, "/") && (exists(filepath.Join(repoRoot, ref)) || exists(filepath.Join(filepath.Dir(path), ref))) {
				continue // from the root, or from the citing file's directory
			}
			if !strings.Contains(ref, "/") && exists(filepath.Join(repoRoot, "docs/reference", ref)) {
				continue // the reference's pages, which the test that writes them names
			}
			bad = append(bad, path+": "+ref)
		}
	})
	require.Empty(t, bad, "citations of files that are not in the repository (rules live in docs/rules/)")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

var ruleLike = regexp.MustCompile(`[MAEITOWCSPD][0-9]+`)

// citations finds the rule ids a text cites: "M16" as a word, or inside a
// test's name ("TestO7O8ConsoleInChromium" cites O7 and O8), never inside
// another word or number ("SHA256", "IM16").
func citations(text string) []string {
	var out []string
	for _, loc := range ruleLike.FindAllStringIndex(text, -1) {
		id := text[loc[0]:loc[1]]
		if len(id) > 3 {
			continue
		}
		before := text[:loc[0]]
		prev := byte(' ')
		if len(before) > 0 {
			prev = before[len(before)-1]
		}
		isLetter := prev >= 'a' && prev <= 'z' || prev >= 'A' && prev <= 'Z' || prev == '_'
		if !isLetter || slices.ContainsFunc(testFuncPrefixes, func(p string) bool { return strings.HasSuffix(before, p) }) || prev >= '0' && prev <= '9' {
			out = append(out, id)
		}
	}
	return out
}

func TestCitationsFindRulesInWordsAndTestNames(t *testing.T) {
	require.Equal(t, []string{"O7", "O8", "M16", "I5"}, citations("TestO7O8ConsoleInChromium and (M16), I5."))
	require.Empty(t, citations("SHA256 IM16 M123 xS1 abcM2"))
}

// TestMakeFuzzRunsEveryFuzzTest: make fuzz's FUZZ_TARGETS names every
// fuzz test of the repository, by package and name, and nothing else (it
// once ran no test it did not list by hand, and five were missing).
func TestMakeFuzzRunsEveryFuzzTest(t *testing.T) {
	var have []string
	walkRepo(t, func(path string, b []byte) {
		if !strings.HasSuffix(path, "_test.go") {
			return
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, b, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				rel, err := filepath.Rel(repoRoot, filepath.Dir(path))
				require.NoError(t, err)
				have = append(have, "./"+filepath.ToSlash(rel)+":"+fn.Name.Name)
			}
		}
	})
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	listed := regexp.MustCompile(`(?m)^\t(\./[\w/]+:Fuzz\w+)`).FindAllStringSubmatch(string(makefile), -1)
	var targets []string
	for _, m := range listed {
		targets = append(targets, m[1])
	}
	require.NotEmpty(t, have)
	require.ElementsMatch(t, have, targets, "the fuzz tests, and the Makefile's FUZZ_TARGETS")
}
