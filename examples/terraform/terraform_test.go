// Package terraform holds the Terraform example of a tutorial marquee
// (docs/rules/workflow.md W5): hcloud/, a real cloud's module, and local/, the
// offline flavour on terraform_data with the same variables and outputs.
// These tests keep the two interchangeable.
package terraform

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

var declared = regexp.MustCompile(`(?m)^(output|variable) "([a-z_]+)"`)

func names(t *testing.T, dir, kind string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	require.NoError(t, err)
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range declared.FindAllStringSubmatch(string(raw), -1) {
			if m[1] == kind {
				out = append(out, m[2])
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestW5FlavoursHaveTheSameOutputs: the local flavour stands in for the
// cloud one, so a workflow reads the same outputs from either, the ones
// `warden callback --connection-from` needs (W3).
func TestW5FlavoursHaveTheSameOutputs(t *testing.T) {
	want := []string{"acme_dns", "free_domain", "host", "port", "ssh_private_key", "user"}
	require.Equal(t, want, names(t, "local", "output"))
	require.Equal(t, want, names(t, "hcloud", "output"))
	// The variables the scripts set are declared by both.
	for _, dir := range []string{"local", "hcloud"} {
		require.Subset(t, names(t, dir, "variable"), []string{"generation", "marquee_id"}, dir)
	}
}

// TestW5LocalFlavourValidates runs terraform fmt and validate on both
// flavours where Terraform is installed (validate needs no provider only
// for the local one).
func TestW5LocalFlavourValidates(t *testing.T) {
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform is not on the PATH")
	}
	out, err := exec.Command("terraform", "fmt", "-check", "-recursive", ".").CombinedOutput()
	require.NoError(t, err, "terraform fmt: %s", out)
	work := t.TempDir()
	files, _ := filepath.Glob("local/*.tf")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(work, filepath.Base(f)), raw, 0o600))
	}
	out, err = exec.Command("terraform", "-chdir="+work, "init", "-input=false", "-backend=false").CombinedOutput()
	require.NoError(t, err, "terraform init: %s", out)
	out, err = exec.Command("terraform", "-chdir="+work, "validate").CombinedOutput()
	require.NoError(t, err, "terraform validate: %s", out)
}
