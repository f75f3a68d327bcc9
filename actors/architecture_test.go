package actors

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this module's import path.
const module = "github.com/wardenhq/warden/"

// allowedImports is docs/architecture.md's table: for each package (or
// prefix ending in "/"), the packages of this module it may import; a
// package not named may import anything. Test files are not held to it.
var allowedImports = map[string][]string{
	"actors/marquee":         {"actors/entity", "actors/errs", "internal/jsonappend"},
	"actors/environment":     {"actors/entity", "actors/errs"},
	"actors/admission":       {"actors/entity", "actors/errs"},
	"actors/entity":          {},
	"actors/errs":            {},
	"actors/clock":           {},
	"persistence":            {},
	"persistence/":           {},
	"internal/linear":        {},
	"internal/fieldcheck":    {},
	"internal/explaincheck":  {"actors/marquee", "actors/environment", "actors/admission", "actors/entity"},
	"internal/jsonappend":    {},
	"internal/gcheadroom":    {},
	"internal/trust":         {},
	"actors/runtime":         {"actors/clock", "actors/entity", "actors/errs", "persistence"},
	"actors/record":          {"actors/marquee", "actors/environment", "actors/admission", "actors/runtime", "persistence", "internal/trust", "internal/jsonappend"},
	"internal/cluster":       {"actors/clock", "actors/errs", "persistence"},
	"internal/driver":        {},
	"internal/driver/local":  {"internal/driver", "actors/environment", "actors/errs"},
	"internal/driver/local/": {},
	"actors":                 {"actors/", "persistence", "persistence/", "internal/trust", "internal/cluster", "internal/driver", "internal/driver/"},
	"httpapi":                {"actors", "actors/", "persistence", "internal/trust", "internal/cluster", "internal/driver"},
	"httpapi/":               {},
	"sim":                    {"actors", "actors/", "httpapi", "persistence", "persistence/", "internal/linear", "internal/trust", "internal/cluster", "internal/driver", "internal/driver/", "sim/serial"},
	"sim/serial":             {},
	"cmd/internal/":          {"actors", "actors/", "httpapi", "persistence", "persistence/", "internal/", "cmd/internal/"},
}

// TestArchitectureImports fails on an import that breaks
// docs/architecture.md: the pure rules import only the shared types,
// the runtime no kind and no shell, the adapters and persistence no
// shell, and only cmd/warden-sim imports the simulator.
func TestArchitectureImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		pkg = strings.TrimPrefix(pkg, module)
		for _, imp := range strings.Fields(imports) {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			checked++
			if imp == "sim" && pkg != "cmd/warden-sim" {
				t.Errorf("%s imports the simulator: only cmd/warden-sim may (docs/architecture.md)", pkg)
			}
			if allowed, ruled := rulesFor(pkg); ruled && !matches(allowed, imp) {
				t.Errorf("%s imports %s: docs/architecture.md allows it %v", pkg, imp, allowed)
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list named no import of this module: the check checked nothing")
	}
}

// rulesTestsMay is what the pure rules' tests may import of this module:
// the rules and shared types, the records and the runtime's write
// description (a golden step's write: line), the field check; never the
// shell, whose helpers would make the rules' spec depend on it.
var rulesTestsMay = []string{"actors/marquee", "actors/environment", "actors/admission", "actors/entity", "actors/errs",
	"actors/record", "actors/runtime", "internal/fieldcheck", "internal/explaincheck"}

// TestArchitectureRulesTestsImportNoShell: the pure rules' golden suites
// and tests stand below the shell too.
func TestArchitectureRulesTestsImportNoShell(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"actors/marquee", module+"actors/environment", module+"actors/admission").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Fields(imports) {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				checked++
				if !slices.Contains(rulesTestsMay, rel) {
					t.Errorf("%s's tests import %s: docs/architecture.md allows %v", pkg, rel, rulesTestsMay)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list named no test import of this module: the check checked nothing")
	}
}

// rulesFor is a package's row: its own, or its nearest prefix's.
func rulesFor(pkg string) ([]string, bool) {
	if allowed, ok := allowedImports[pkg]; ok {
		return allowed, true
	}
	best := ""
	for prefix := range allowedImports {
		if strings.HasSuffix(prefix, "/") && strings.HasPrefix(pkg, prefix) && len(prefix) > len(best) {
			best = prefix
		}
	}
	allowed, ok := allowedImports[best]
	return allowed, ok && best != ""
}

func matches(allowed []string, imp string) bool {
	for _, a := range allowed {
		if imp == a || strings.HasSuffix(a, "/") && strings.HasPrefix(imp, a) {
			return true
		}
	}
	return false
}

// TestArchitectureRulesRefuse: the table is not a check that cannot fail.
func TestArchitectureRulesRefuse(t *testing.T) {
	for _, c := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"actors/marquee", "persistence", false},
		{"actors/runtime", "actors/marquee", false},
		{"internal/driver/local/pgcluster", "actors", false},
		{"internal/trust", "actors", false},
		{"internal/cluster", "httpapi", false},
		{"actors/marquee", "internal/fieldcheck", false},
		{"persistence/etcdembed", "actors/clock", false},
		{"actors/environment", "actors/entity", true},
		{"httpapi", "internal/trust", true},
		{"cmd/warden-sim", "sim", true},
		{"actors", "httpapi", false},
		{"actors/record", "actors", false},
		{"actors/record", "internal/trust", true},
	} {
		allowed, ruled := rulesFor(c.pkg)
		if got := !ruled || matches(allowed, c.imp); got != c.ok {
			t.Errorf("%s importing %s: allowed=%t, want %t", c.pkg, c.imp, got, c.ok)
		}
	}
}

// testOnly are the packages the server must not link: the simulator, what
// only it uses, the benchmark's floors (a -tags benchfloor build's), and
// the standard library's test servers.
var testOnly = []string{"net/http/httptest", module + "sim", module + "sim/serial", module + "internal/linear",
	module + "persistence/faultfs", module + "cmd/internal/testkit", module + "internal/testports", module + "internal/fieldcheck", module + "internal/explaincheck", module + "internal/benchfloor", "github.com/anishathalye/porcupine"}

// TestServerLinksNoSimulator: the server's binary links no test code
// (docs/architecture.md).
func TestServerLinksNoSimulator(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"cmd/warden").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"actors/runtime") {
		t.Fatalf("go list -deps named %d packages, not the runtime: the check checked nothing", len(deps))
	}
	for _, bad := range testOnly {
		if slices.Contains(deps, bad) {
			t.Errorf("cmd/warden links %s", bad)
		}
	}
}
