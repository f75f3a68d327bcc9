package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestD2TheUnitVerifiesAndIsHardened: examples/systemd/warden.service
// passes systemd-analyze verify (its ExecStart pointed at a real binary)
// and systemd-analyze security --offline=true rates it at most 2.0, "OK";
// it restarts on failure but not on the statuses a restart would only
// repeat (S3's 65 and 78), and takes its secrets by LoadCredential.
func TestD2TheUnitVerifiesAndIsHardened(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze is needed (Debian: systemd; .ci/run installs it)")
	}
	raw, err := os.ReadFile("../../examples/systemd/warden.service")
	require.NoError(t, err)
	unit := string(raw)
	for _, d := range []string{"DynamicUser=yes", "StateDirectory=warden", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"NoNewPrivileges=yes", "RestrictAddressFamilies=", "SystemCallFilter=@system-service", "CapabilityBoundingSet=\n",
		"LoadCredential=operator.token:", "Restart=on-failure",
		"RestartPreventExitStatus=" + strconv.Itoa(exitCorrupt) + " " + strconv.Itoa(exitConfig)} {
		require.Contains(t, unit, d, "D2: the unit has %q", d)
	}
	require.NotContains(t, unit, "RestartPreventExitStatus="+strconv.Itoa(exitStorage), "74 (a failed disk) is restarted")

	dir := t.TempDir()
	path := filepath.Join(dir, "warden.service")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/warden", wardenBinary(t))), 0o644))
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify: %s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "verify warns of nothing")

	out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`Overall exposure level for warden\.service: (\d+\.\d+) (\w+)`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "%s", out)
	score, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("D2: systemd-analyze security --offline=true: exposure %s %s", m[1], m[2])
	require.LessOrEqual(t, score, 2.0, "D2: exposure at most 2.0")
	require.Equal(t, "OK", m[2])
}

// podmanCmd is podman as it runs on these machines: runc, cgroupfs.
func podmanCmd(args ...string) *exec.Cmd {
	return exec.Command("podman", append([]string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}, args...)...)
}

// TestD1TheImageRunsAndKeepsItsVolume builds the image with podman, runs
// it as its numeric non-root user on a named volume, creates a marquee
// (dispatched to a fake GitHub on the host), restarts the container on
// the same volume and reads the marquee back. The image carries the OCI
// labels and nothing but the binary and its two directories.
func TestD1TheImageRunsAndKeepsItsVolume(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is needed (Debian: podman, runc; .ci/run installs them)")
	}
	tag := "localhost/warden:d1-" + strconv.Itoa(os.Getpid())
	build := exec.Command("./scripts/image.sh", tag)
	build.Dir = "../.."
	build.Env = append(os.Environ(), "PODMAN=podman --runtime runc --cgroup-manager cgroupfs", "VERSION=v0.0.0-d1test")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = podmanCmd("rmi", "-f", tag).Run() })

	out, err = podmanCmd("image", "inspect", tag, "--format", "{{.Config.User}}|{{json .Config.Labels}}|{{json .Config.Volumes}}|{{json .Config.Entrypoint}}").CombinedOutput()
	require.NoError(t, err, "%s", out)
	parts := strings.SplitN(strings.TrimSpace(string(out)), "|", 4)
	require.Equal(t, "65532:65532", parts[0], "D1: a non-root numeric user")
	for _, l := range []string{`"org.opencontainers.image.version":"v0.0.0-d1test"`, `"org.opencontainers.image.revision":"`, `"org.opencontainers.image.source":"https://github.com/wardenhq/warden"`} {
		require.Contains(t, parts[1], l)
	}
	require.Contains(t, parts[2], `"/var/lib/warden"`)
	require.Equal(t, `["/usr/local/bin/warden"]`, parts[3])

	gh := acceptingGitHub(t)
	volume := "warden-d1-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { _ = podmanCmd("volume", "rm", "-f", volume).Run() })
	addr := freePort(t)
	name := "warden-d1-" + strconv.Itoa(os.Getpid())
	start := func() *proc {
		cmd := podmanCmd("run", "--rm", "--name", name, "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
			"-v", volume+":/var/lib/warden", "-e", "WARDEN_LISTEN="+addr, "-e", "WARDEN_OPERATOR_TOKEN=op-secret", "-e", "WARDEN_CALLBACK_TOKEN=cb-secret",
			"-e", "WARDEN_GITHUB_TOKEN=gh-secret", tag, "serve", "--github-api-url", gh.URL, "--github-repo", "acme/infra", "--bootstrap", "https")
		log := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = log, log
		require.NoError(t, cmd.Start())
		p := &proc{t: t, cmd: cmd, url: "http://" + addr, log: log}
		t.Cleanup(func() { _ = podmanCmd("rm", "-f", name).Run(); _ = cmd.Wait() })
		p.waitReady(60*time.Second, "the container")
		return p
	}
	p := start()
	st, v := p.do("POST", "/v1/marquees", "op-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	p.waitDispatched("m-1", 10*time.Second)
	out, err = podmanCmd("stop", "--time", "20", name).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, p.cmd.Wait(), "a clean stop is exit 0: %s", p.log)

	p = start()
	st, v = p.do("GET", "/v1/marquees/m-1", "op-secret", nil)
	require.Equal(t, 200, st, "D1: the marquee is still on the volume")
	require.Equal(t, 1.0, v["generation"])
	require.NotContains(t, p.log.String(), "op-secret")
}

// TestD13TheUnitStartsAsShippedWithItsEnvironmentFile runs the unit's own
// ExecStart line, as systemd would, with the environment of
// examples/systemd/warden.env and the credentials it loads: warden starts
// and is ready (the only changes are the machine's: a free port, a
// temporary state directory, a fake GitHub). Without the environment
// file it refuses with 78 and says what is missing.
func TestD13TheUnitStartsAsShippedWithItsEnvironmentFile(t *testing.T) {
	raw, err := os.ReadFile("../../examples/systemd/warden.service")
	require.NoError(t, err)
	unit := string(raw)
	require.Contains(t, unit, "EnvironmentFile=/etc/warden/warden.env")
	exec1 := regexp.MustCompile(`(?s)\nExecStart=(.*?[^\\])\n`).FindStringSubmatch(unit)
	require.NotNil(t, exec1)
	line := strings.ReplaceAll(exec1[1], "\\\n", " ")

	creds, state := t.TempDir(), t.TempDir()
	require.NoError(t, os.Chmod(state, 0o700), "as StateDirectoryMode=0700 makes it")
	require.Contains(t, unit, "StateDirectoryMode=0700")
	for _, c := range regexp.MustCompile(`LoadCredential=([a-z.]+):`).FindAllStringSubmatch(unit, -1) {
		require.NoError(t, os.WriteFile(filepath.Join(creds, c[1]), []byte(c[1]+"-secret\n"), 0o600))
	}
	addr := freePort(t)
	line = strings.NewReplacer("${CREDENTIALS_DIRECTORY}", creds, "/var/lib/warden", state, "127.0.0.1:8080", addr,
		"/usr/local/bin/warden", wardenBinary(t)).Replace(line)
	args := strings.Fields(line)

	envFile, err := os.ReadFile("../../examples/systemd/warden.env")
	require.NoError(t, err)
	var env []string
	for _, l := range strings.Split(string(envFile), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			require.Regexp(t, `^WARDEN_[A-Z_]+=\S`, l)
			env = append(env, l)
		}
	}
	require.Contains(t, env, "WARDEN_DISPATCH=github", "the dispatch mode is named")
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + state}

	refused := exec.Command(args[0], args[1:]...)
	refused.Env = base
	out, err := refused.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, exitConfig, exit.ExitCode(), "%s", out)
	require.Contains(t, string(out), "--github-repo", "says what is missing")

	gh := acceptingGitHub(t)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(base, env...), "WARDEN_GITHUB_API_URL="+gh.URL)
	p := startCmd(t, cmd, addr, "warden under the unit's ExecStart")
	st, v := p.do("POST", "/v1/marquees", "operator.token-secret", map[string]any{"id": "m-1", "kind": "tutorial"})
	require.Equal(t, 201, st, "%v", v)
	p.waitDispatchedAs("m-1", "operator.token-secret", 10*time.Second)
}
