package config

import (
	"flag"
	"os"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	tableRow = regexp.MustCompile(`(?m)^(\|.*)$`)
	flagName = regexp.MustCompile("`--([a-z0-9-]+)")
)

// The README's configuration tables document every flag serve takes
// (the benchmark's own flags aside), and name none it does not.
func TestEveryFlagIsInTheREADMEAndNoOther(t *testing.T) {
	readme, err := os.ReadFile("../../../../README.md")
	require.NoError(t, err)
	start := regexp.MustCompile(`(?m)^## Configuration$`).FindIndex(readme)
	require.NotNil(t, start, "README has a Configuration section")
	section := readme[start[1]:]
	if end := regexp.MustCompile(`(?m)^## `).FindIndex(section); end != nil {
		section = section[:end[0]]
	}
	documented := map[string]bool{}
	for _, m := range tableRow.FindAllSubmatch(section, -1) {
		for _, f := range flagName.FindAllSubmatch(m[1], -1) {
			documented[string(f[1])] = true
		}
	}
	benchOnly := map[string]bool{"bench-noop": true, "cpu-profile": true, "cpu-profile-after": true}
	var missing, unknown []string
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	Declare(fs, func(string) string { return "" })
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" {
			t.Errorf("--%s has no usage", f.Name)
		}
		if !documented[f.Name] && !benchOnly[f.Name] {
			missing = append(missing, f.Name)
		}
	})
	for name := range documented {
		if fs.Lookup(name) == nil {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	require.Empty(t, missing, "flags the README's configuration table does not document")
	require.Empty(t, unknown, "flags the README documents that serve does not take")
}

// Every flag falls back to WARDEN_<FLAG>.
func TestAFlagNotGivenIsReadFromItsEnvironmentVariable(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	env := map[string]string{"WARDEN_LISTEN": "127.0.0.1:9999", "WARDEN_OPERATOR_TOKEN": "operator-token-of-the-test"}
	finish := Declare(fs, func(name string) string { return env[name] })
	require.NoError(t, fs.Parse([]string{"--dispatch", "exec", "--dispatch-command", "true", "--bootstrap", "exec", "--bootstrap-command", "true"}))
	given := map[string]bool{"dispatch": true, "dispatch-command": true, "bootstrap": true, "bootstrap-command": true}
	c, err := finish(fs.Args(), func(name string) bool { return given[name] })
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9999", c.Listen)
	_, err = finish([]string{"extra"}, func(name string) bool { return given[name] })
	require.ErrorAs(t, err, new(UsageError), "an argument serve does not take is a usage error")
}
