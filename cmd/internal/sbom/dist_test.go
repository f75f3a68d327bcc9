package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
)

// TestD3DistIsReproducible runs make dist: the binaries are static,
// stamped with the version given, SHA256SUMS checks and the SBOM lists
// the modules the binary links. Under make check it runs make dist a
// second time with an empty build cache (every package compiled again,
// for both architectures: minutes) and compares the two outputs byte for
// byte: the binaries, the SBOM and SHA256SUMS.
func TestD3DistIsReproducible(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	dist := func(out string, env ...string) {
		cmd := exec.Command("make", "-s", "dist", "DIST="+out, "VERSION=v0.0.0-d3test")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", b)
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	dist(a)
	if testkit.Check() {
		dist(b, "GOCACHE="+t.TempDir())
		names := []string{"warden-linux-amd64", "warden-linux-arm64", "warden.spdx.json", "SHA256SUMS"}
		for _, n := range names {
			x, err := os.ReadFile(filepath.Join(a, n))
			require.NoError(t, err)
			y, err := os.ReadFile(filepath.Join(b, n))
			require.NoError(t, err)
			require.True(t, bytes.Equal(x, y), "D3: %s differs between two builds of one commit", n)
		}
	}
	sums, _ := os.ReadFile(filepath.Join(a, "SHA256SUMS"))
	check := exec.Command("sha256sum", "--check", "SHA256SUMS")
	check.Dir = a
	out, err := check.CombinedOutput()
	require.NoError(t, err, "%s\n%s", sums, out)

	for _, arch := range []struct {
		file    string
		machine elf.Machine
	}{{"warden-linux-amd64", elf.EM_X86_64}, {"warden-linux-arm64", elf.EM_AARCH64}} {
		f, err := elf.Open(filepath.Join(a, arch.file))
		require.NoError(t, err)
		require.Equal(t, arch.machine, f.Machine)
		for _, p := range f.Progs {
			require.NotEqual(t, elf.PT_INTERP, p.Type, "D3: %s is static (no interpreter)", arch.file)
		}
		f.Close()
	}
	v, err := exec.Command(filepath.Join(a, "warden-linux-amd64"), "version").Output()
	require.NoError(t, err)
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(v), "warden v0.0.0-d3test (commit "+strings.TrimSpace(string(head))), "D3: the version and commit are stamped: %s", v)

	var sbom doc
	raw, _ := os.ReadFile(filepath.Join(a, "warden.spdx.json"))
	require.NoError(t, json.Unmarshal(raw, &sbom))
	require.Equal(t, "SPDX-2.3", sbom.SPDXVersion)
	var mods []string
	for _, p := range sbom.Packages {
		mods = append(mods, p.Name)
	}
	for _, m := range []string{"warden-linux-amd64", "warden-linux-arm64", "stdlib", "github.com/cockroachdb/pebble/v2", "github.com/asynkron/protoactor-go", "go.etcd.io/etcd/server/v3"} {
		require.Contains(t, mods, m, "the SBOM lists %s", m)
	}
}
