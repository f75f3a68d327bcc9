package config

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every flag says what it does: docs/reference/serve.md is written from
// these words (O21).
func TestEveryFlagSaysWhatItDoes(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	Declare(fs, func(string) string { return "" })
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" {
			t.Errorf("--%s has no usage", f.Name)
		}
	})
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
