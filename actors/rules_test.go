package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryRuleIsNamedByATest keeps the promise that each rule of the spec
// (marquee.md M1-M23, admission.md A1-A10, environment.md E1-E17) and each
// invariant (I1-I14) is shown by at least one test: a test file or
// golden script must cite it.
func TestEveryRuleIsNamedByATest(t *testing.T) {
	want := map[string]bool{}
	for prefix, n := range map[string]int{"M": 23, "A": 10, "E": 17, "I": 14} {
		for i := 1; i <= n; i++ {
			want[fmt.Sprintf("%s%d", prefix, i)] = false
		}
	}
	cite := regexp.MustCompile(`\b([MAIE][0-9]{1,2})\b`)
	root := ".."
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "bin" || info.Name() == "data") {
			return filepath.SkipDir
		}
		isTest := strings.HasSuffix(path, "_test.go") || strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator))
		if info.IsDir() || !isTest || strings.HasSuffix(path, "rules_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cite.FindAllStringSubmatch(string(b), -1) {
			if _, ok := want[m[1]]; ok {
				want[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, seen := range want {
		if !seen {
			t.Errorf("rule %s is not cited by any test", id)
		}
	}
}
