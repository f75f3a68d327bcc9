package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// commandPaths lists every command of warden's tree, parents first, as
// the words that name it ("env action"); cobra's own help and completion
// scripts aside.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		if sub.Name() == "help" || sub.Hidden {
			continue
		}
		path := append(append([]string{}, prefix...), sub.Name())
		out = append(out, path)
		if sub.Name() != "completion" {
			out = append(out, commandPaths(sub, path)...)
		}
	}
	return out
}

// cliEnv is an environment in which no command reaches a real warden or a
// real data directory: nothing listens on the server's port, the data
// directory does not exist, no token is set.
func cliEnv(t *testing.T) func(string) string {
	env := map[string]string{"WARDEN_URL": "http://127.0.0.1:1", "WARDEN_DATA": t.TempDir() + "/absent"}
	return func(k string) string { return env[k] }
}

func walkCLI(getenv func(string) string, args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	code := run(args, getenv, &out, &errs)
	return code, out.String(), errs.String()
}

// TestO15EveryCommandHasOneSetOfHabits walks every command: --help and
// `warden help X` print its usage and examples on stdout and exit 0; an
// unknown flag exits 2 with one line naming it and where the usage is; no
// arguments either runs or fails with one line saying what is missing;
// completion knows the command.
func TestO15EveryCommandHasOneSetOfHabits(t *testing.T) {
	getenv := cliEnv(t)
	paths := commandPaths(newRoot(getenv, nil, nil), nil)
	require.Greater(t, len(paths), 25, "the whole tree")
	for _, path := range paths {
		name := "warden " + strings.Join(path, " ")
		t.Run(strings.Join(path, "_"), func(t *testing.T) {
			code, out, errs := walkCLI(getenv, append(path, "--help")...)
			require.Equal(t, 0, code, errs)
			require.Empty(t, errs)
			require.Contains(t, out, "Usage:\n  "+name)
			require.NotRegexp(t, `[( ][MAEITOWCSPD][0-9]+[),;]`, out, "%s --help cites no rule id (O19)", name)
			c, _, err := newRoot(getenv, nil, nil).Find(path)
			require.NoError(t, err)
			if c.Runnable() && path[0] != "completion" {
				require.Contains(t, out, "Examples:\n", "%s --help shows examples", name)
			}
			code, helpOut, _ := walkCLI(getenv, append([]string{"help"}, path...)...)
			require.Equal(t, 0, code)
			require.Equal(t, out, helpOut, "warden help X is X --help")

			code, out, errs = walkCLI(getenv, append(path, "--no-such-flag")...)
			require.Equal(t, exitUsage, code, "%s --no-such-flag", name)
			require.Empty(t, out)
			require.Equal(t, "warden: unknown flag: --no-such-flag\nRun '"+name+" --help' for usage.\n", errs)

			if path[0] == "serve" {
				return // with no arguments it serves: the process tests start it so
			}
			code, _, errs = walkCLI(getenv, path...)
			lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
			switch code {
			case 0:
			case exitUsage:
				require.Len(t, lines, 2, "%s: %s", name, errs)
				require.True(t, strings.HasPrefix(lines[0], "warden: "), errs)
				require.Equal(t, "Run '"+name+" --help' for usage.", lines[1])
			default:
				require.Len(t, lines, 1, "%s: one line: %s", name, errs)
				require.True(t, strings.HasPrefix(lines[0], "warden: "), errs)
				require.NotContains(t, errs, "goroutine ", "never a Go trace")
			}

			code, out, _ = walkCLI(getenv, "__complete", strings.Join(path[:len(path)-1], " "), path[len(path)-1][:1])
			if len(path) == 1 {
				code, out, _ = walkCLI(getenv, "__complete", path[0][:1])
			}
			require.Equal(t, 0, code)
			require.Contains(t, out, path[len(path)-1], "completion offers %s", name)
		})
	}
}

// TestO15RootListsEveryCommandOnALine: `warden --help` names every
// command with one line each.
func TestO15RootListsEveryCommandOnALine(t *testing.T) {
	getenv := cliEnv(t)
	code, out, _ := walkCLI(getenv, "--help")
	require.Equal(t, 0, code)
	for _, c := range newRoot(getenv, nil, nil).Commands() {
		if c.Hidden {
			continue
		}
		require.NotContains(t, c.Short, "\n", c.Name())
		require.Regexp(t, "\n  "+c.Name()+" +"+regexpQuote(c.Short)+"\n", out)
	}
}

func regexpQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `.`, `\.`, `+`, `\+`, `*`, `\*`, `?`, `\?`, `(`, `\(`, `)`, `\)`, `[`, `\[`, `]`, `\]`, `{`, `\{`, `}`, `\}`, `|`, `\|`, `^`, `\^`, `$`, `\$`)
	return r.Replace(s)
}

// TestO15ErrorsThatHelp: an unreachable server is named with the way to
// point elsewhere; a manual action that is not one, or has no reason,
// names the actions and --reason; a wait for a field, a value or an
// entity that cannot be fails at once.
func TestO15ErrorsThatHelp(t *testing.T) {
	getenv := func(k string) string {
		return map[string]string{"WARDEN_URL": "http://127.0.0.1:1", "WARDEN_OPERATOR_TOKEN": "op"}[k]
	}
	code, _, errs := walkCLI(getenv, "get", "marquees")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "could not connect to warden at http://127.0.0.1:1")
	require.Contains(t, errs, "--server or WARDEN_URL")

	code, _, errs = walkCLI(getenv, "action", "environment", "env-271", "frob", "--reason", "x")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, `"frob" is not an action: one of resume, repair, adopt, continue-removal, abandon, rollback-route`)
	code, _, errs = walkCLI(getenv, "action", "env", "env-271", "repair")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, "give --reason")

	code, _, errs = walkCLI(getenv, "wait", "marquee", "m-1", "--for", "lifecycle=provisoned")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, `"provisoned" is not a lifecycle; valid values: provisioning, provisioned,`)
	code, _, errs = walkCLI(getenv, "wait", "env", "e-1", "--for", "state=redy")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errs, `"redy" is not a state`)
}

// TestD14KeygenWritesTheOperatorsClientCertificate: `warden keygen DIR
// --client admin` writes the client certificate that README "Moving to a
// cluster" gives migrate: signed by the cluster's CA, for client
// authentication only.
func TestD14KeygenWritesTheOperatorsClientCertificate(t *testing.T) {
	dir := t.TempDir() + "/shared"
	var out bytes.Buffer
	require.NoError(t, keygen([]string{dir, "--client", "admin"}, &out))
	require.Contains(t, out.String(), "client certificate of admin written to "+dir+"/admin.crt")
	caPEM, err := os.ReadFile(dir + "/cluster-ca.crt")
	require.NoError(t, err)
	raw, err := os.ReadFile(dir + "/admin.crt")
	require.NoError(t, err)
	block, _ := pem.Decode(raw)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage)
	require.Empty(t, cert.IPAddresses, "a client is reached by nobody")
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err, "not a server's")
	info, err := os.Stat(dir + "/admin.key")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	out.Reset()
	require.NoError(t, keygen([]string{dir, "--client", "admin"}, &out))
	require.NotContains(t, out.String(), "admin", "an existing certificate is kept")
	require.Error(t, keygen([]string{dir, "--client", "n1", "--node", "n1"}, &out), "a client is not a node")
}

// TestO15UsageErrorsSayOnceWhatToFix: help of a command that does not
// exist, a server URL without its scheme and a missing id are usage
// errors (exit 2), each one line with one "warden:" and the fix.
func TestO15UsageErrorsSayOnceWhatToFix(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"WARDEN_URL": "127.0.0.1:9471", "WARDEN_OPERATOR_TOKEN": "t"}[k]
	}
	cli := func(args ...string) (int, string) {
		var out, errs bytes.Buffer
		code := run(args, env, &out, &errs)
		return code, errs.String()
	}
	code, errs := cli("help", "gett")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `warden: help: no command "gett"`)
	code, errs = cli("get", "marquees")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `has no scheme: use http://127.0.0.1:9471`)
	code, errs = cli("history")
	require.Equal(t, 2, code)
	require.True(t, strings.HasPrefix(errs, "warden: history needs a type and an id: warden history marquee ID\n"), errs)
	require.Equal(t, 1, strings.Count(errs, "warden:"), "one prefix: %s", errs)
}

// TestO15WaitReturnsWithinItsTimeout: against a server that accepts and
// never answers, and one that is not there, wait gives up within its
// --timeout and half a second (exit 1, the one error format).
func TestO15WaitReturnsWithinItsTimeout(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	goneAddr := gone.Addr().String()
	gone.Close()
	for _, addr := range []string{hung.Addr().String(), goneAddr} {
		env := func(k string) string {
			return map[string]string{"WARDEN_URL": "http://" + addr, "WARDEN_OPERATOR_TOKEN": "t"}[k]
		}
		var out, errs bytes.Buffer
		start := time.Now()
		code := run([]string{"wait", "marquee", "m-1", "--for", "lifecycle=provisioned", "--timeout", "2s"}, env, &out, &errs)
		took := time.Since(start)
		require.Equal(t, 1, code, errs.String())
		require.True(t, strings.HasPrefix(errs.String(), "warden: timed out after 2s"), errs.String())
		require.Less(t, took, 2500*time.Millisecond, "wait --timeout 2s against %s", addr)
	}
}
