package actors

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rules live in docs/rules/, one file per family; each is written
// "**M16 ...**" where it is stated. These tests keep two promises: every
// rule stated there is shown by a test that cites it, and every rule file
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
			case ".git", "bin", "data", "testoutput":
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

func TestEveryRuleIsNamedByATest(t *testing.T) {
	stated := statedRules(t)
	for _, family := range []string{"M23", "A10", "E17", "I15", "T12", "O15", "W9", "C12", "S13", "P18", "D15"} {
		require.Contains(t, stated, family, "docs/rules states %s", family)
	}
	cited := map[string]bool{}
	walkRepo(t, func(path string, b []byte) {
		isTest := strings.HasSuffix(path, "_test.go") || strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator))
		if !isTest || path == filepath.Join(repoRoot, "actors", "rules_test.go") {
			return
		}
		for _, id := range citations(string(b)) {
			cited[id] = true
		}
	})
	var missing []string
	for id, file := range stated {
		if !cited[id] {
			missing = append(missing, id+" ("+file+")")
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "rules no test cites")
}

// TestEveryCitedRuleFileIsInTheRepository: a comment, message or script
// that names a rule file names one under docs/rules/.
func TestEveryCitedRuleFileIsInTheRepository(t *testing.T) {
	named := regexp.MustCompile(`(?:[\w./-]*/)?\b([a-z][a-z-]*)\.md\b`)
	kept := map[string]bool{"README.md": true, "NOTES.md": true, "BENCHMARKS.md": true}
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
			if strings.Contains(ref, "/") && exists(filepath.Join(repoRoot, ref)) {
				continue
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
		if !isLetter || strings.HasSuffix(before, "Test") || prev >= '0' && prev <= '9' {
			out = append(out, id)
		}
	}
	return out
}

func TestCitationsFindRulesInWordsAndTestNames(t *testing.T) {
	require.Equal(t, []string{"O7", "O8", "M16", "I5"}, citations("TestO7O8ConsoleInChromium and (M16), I5."))
	require.Empty(t, citations("SHA256 IM16 M123 xS1 abcM2"))
}
