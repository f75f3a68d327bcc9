package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/wardenhq/warden/cmd/warden/internal/config"
)

// docs/reference/ is written from the code (O21): `make reference` runs
// this test with -update-reference; without it the test fails when the
// committed pages differ from what the code writes now.
var updateReference = flag.Bool("update-reference", false, "write docs/reference/ from the code")

const generatedNote = "<!-- Written by `make reference` from the code; do not edit (TestO21TheReferenceIsWhatTheCodeSays). -->\n\n"

// TestO21TheReferenceIsWhatTheCodeSays: the serve flags, the command tree,
// the HTTP routes and the rules' index, as committed, are what the code
// and docs/rules/ say now; and each rule file's heading range, and the
// rules README's table, name the rules the file states.
func TestO21TheReferenceIsWhatTheCodeSays(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	rules := readRules(t, root)
	pages := map[string]string{
		"serve.md": serveReference(),
		"cli.md":   cliReference(newRoot(func(string) string { return "" }, nil, nil)),
		"api.md":   apiReference(t, filepath.Join(root, "httpapi/openapi.yaml")),
		"rules.md": rulesReference(rules),
	}
	for name, want := range pages {
		path := filepath.Join(root, "docs/reference", name)
		if *updateReference {
			require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "docs/reference/%s: run make reference", name)
		if string(got) != want {
			t.Errorf("docs/reference/%s is not what the code says (run make reference): %s", name, firstDifference(string(got), want))
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs/rules/README.md"))
	require.NoError(t, err)
	for _, f := range rules {
		heading := strings.SplitN(f.text, "\n", 2)[0]
		for _, r := range f.ranges() {
			require.Contains(t, heading, r, "docs/rules/%s's heading names the rules it states", f.name)
			require.Contains(t, string(readme), r, "docs/rules/README.md names %s's rules (%s)", f.name, r)
		}
	}
}

// serveReference is every flag warden serve takes, from its declaration.
func serveReference() string {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	config.Declare(fs, func(string) string { return "" })
	var b strings.Builder
	b.WriteString("# `warden serve` flags\n\n" + generatedNote)
	b.WriteString("Each flag falls back to the environment variable `WARDEN_<FLAG>` (upper case, `-` as `_`); secrets come only from the environment or a file ([configuration](configuration.md)).\n\n")
	b.WriteString("| flag | default | what it does |\n| --- | --- | --- |\n")
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(&b, "| `--%s` | %s | %s |\n", f.Name, code(f.DefValue), cell(f.Usage))
	})
	return b.String()
}

// cliReference is every command of the tree, with its usage and flags.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	b.WriteString("# Commands\n\n" + generatedNote)
	b.WriteString("`warden VERB TYPE ID [flags]` for every command on one entity; every command answers `--help`. A usage error exits 2, a refusal or an unreachable server 1.\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || c.Name() == "completion" {
				continue
			}
			if sub.Runnable() && (!sub.HasSubCommands() || sub.Name() == "describe") {
				fmt.Fprintf(&b, "\n## %s\n\n%s.\n\n```\n%s\n```\n", sub.CommandPath(), strings.TrimSuffix(sub.Short, "."), sub.UseLine())
				if len(sub.Aliases) > 0 {
					fmt.Fprintf(&b, "\nAlso: %s.\n", strings.Join(sub.Aliases, ", "))
				}
				var rows []string
				sub.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
					if f.Name == "help" {
						return
					}
					name := "`--" + f.Name + "`"
					if f.Shorthand != "" {
						name = "`-" + f.Shorthand + "`, " + name
					}
					rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, code(f.DefValue), cell(f.Usage)))
				})
				if len(rows) > 0 {
					b.WriteString("\n| flag | default | what it does |\n| --- | --- | --- |\n" + strings.Join(rows, "\n") + "\n")
				}
			}
			walk(sub)
		}
	}
	walk(root)
	return b.String()
}

// apiReference is every route of the OpenAPI document: method, path,
// who may call it, and its summary.
func apiReference(t *testing.T, path string) string {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]struct {
			Summary  string                `yaml:"summary"`
			Security []map[string][]string `yaml:"security"`
		} `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	paths := make([]string, 0, len(doc.Paths))
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	b.WriteString("# HTTP API\n\n" + generatedNote)
	b.WriteString("Every route of `httpapi/openapi.yaml`, served at `GET /v1/openapi.json`; its conventions (errors, limits, lists) are in [the API's conventions](http-api.md).\n\n")
	b.WriteString("| method | path | who | what |\n| --- | --- | --- | --- |\n")
	for _, p := range paths {
		methods := make([]string, 0, len(doc.Paths[p]))
		for m := range doc.Paths[p] {
			if slices.Contains([]string{"get", "post", "put", "delete", "patch"}, m) {
				methods = append(methods, m)
			}
		}
		sort.Strings(methods)
		for _, m := range methods {
			op := doc.Paths[p][m]
			var who []string
			for _, s := range op.Security {
				for k := range s {
					who = append(who, k)
				}
			}
			sort.Strings(who)
			if len(who) == 0 {
				who = []string{"anyone"}
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", strings.ToUpper(m), p, strings.Join(who, ", "), cell(op.Summary))
		}
	}
	return b.String()
}

// ruleFile is one file of docs/rules/ and the rules it states.
type ruleFile struct {
	name, title, text string
	rules             []statedRule
}

type statedRule struct{ id, title string }

var statedRuleLine = regexp.MustCompile(`(?m)^- \*\*([MAEITOWCSPD])([0-9]+)(?: ([^*]+))?\*\*(.*)$`)

func readRules(t *testing.T, root string) []ruleFile {
	paths, err := filepath.Glob(filepath.Join(root, "docs/rules/*.md"))
	require.NoError(t, err)
	var files []ruleFile
	for _, p := range paths {
		if filepath.Base(p) == "README.md" {
			continue
		}
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		f := ruleFile{name: filepath.Base(p), text: string(raw)}
		f.title = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(f.text, "\n", 2)[0], "# "))
		if i := strings.Index(f.title, " ("); i > 0 {
			f.title = f.title[:i]
		}
		for _, m := range statedRuleLine.FindAllStringSubmatch(f.text, -1) {
			title := m[3]
			if title == "" { // an invariant: "**I7** A pool's reserved jobs never exceed..."
				title = m[4]
			}
			f.rules = append(f.rules, statedRule{id: m[1] + m[2], title: strings.TrimSuffix(strings.TrimSpace(title), ".")})
		}
		files = append(files, f)
	}
	return files
}

// ranges are the file's rules as the ranges its heading gives: "M1-M23".
func (f ruleFile) ranges() []string {
	lo, hi := map[string]int{}, map[string]int{}
	var letters []string
	for _, r := range f.rules {
		n, _ := strconv.Atoi(r.id[1:])
		l := r.id[:1]
		if _, ok := lo[l]; !ok {
			letters = append(letters, l)
			lo[l], hi[l] = n, n
		}
		lo[l], hi[l] = min(lo[l], n), max(hi[l], n)
	}
	out := make([]string, len(letters))
	for i, l := range letters {
		out[i] = fmt.Sprintf("%s%d-%s%d", l, lo[l], l, hi[l])
		if lo[l] == hi[l] {
			out[i] = fmt.Sprintf("%s%d", l, lo[l])
		}
	}
	return out
}

func rulesReference(files []ruleFile) string {
	var b strings.Builder
	b.WriteString("# Rules\n\n" + generatedNote)
	b.WriteString("Every rule [`docs/rules/`](../rules/README.md) states, by file, with its title; the file says the rule whole and names its tests.\n")
	for _, f := range files {
		if len(f.rules) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## [%s](../rules/%s) (%s)\n\n", f.title, f.name, strings.Join(f.ranges(), ", "))
		for _, r := range f.rules {
			fmt.Fprintf(&b, "- **%s** %s\n", r.id, r.title)
		}
	}
	return b.String()
}

// firstDifference is the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q; the code says %q", i+1, gl, wl)
		}
	}
	return "they differ"
}

func code(s string) string {
	if s == "" || s == "[]" {
		return ""
	}
	return "`" + s + "`"
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// TestO21EveryLinkResolves: every relative link in README.md and under
// docs/ names a file that exists.
func TestO21EveryLinkResolves(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	files := []string{filepath.Join(root, "README.md"), filepath.Join(root, "BENCHMARKS.md")}
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	}))
	var broken []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range link.FindAllSubmatch(raw, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
				rel, _ := filepath.Rel(root, f)
				broken = append(broken, rel+": "+string(m[1]))
			}
		}
	}
	require.Empty(t, broken, "links that do not resolve")
}
