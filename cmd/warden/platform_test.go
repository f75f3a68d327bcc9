package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestP1TheLocalPlatformIsChosenByFlags: --env-platform local needs its
// parts named, refuses a second kind of preview driver beside it, and
// carries the podman options through as words.
func TestP1TheLocalPlatformIsChosenByFlags(t *testing.T) {
	env := map[string]string{"WARDEN_OPERATOR_TOKEN": "b", "WARDEN_DISPATCH": "exec", "WARDEN_DISPATCH_COMMAND": "echo hi"}
	getenv := func(k string) string { return env[k] }
	_, err := parseConfig([]string{"--env-platform", "local"}, getenv, io.Discard)
	require.ErrorContains(t, err, "--env-platform local needs --platform-postgres")
	require.ErrorContains(t, err, "--env-platform local needs --platform-app")
	_, err = parseConfig([]string{"--env-platform", "cloud"}, getenv, io.Discard)
	require.ErrorContains(t, err, `--env-platform "cloud": exec or local`)
	args := []string{"--env-platform", "local", "--platform-postgres", "postgres://admin:s3cret@127.0.0.1:5432/postgres", "--platform-app", "ctx",
		"--platform-podman-options", "--runtime runc  --cgroup-manager cgroupfs"}
	c, err := parseConfig(args, getenv, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}, c.Platform.PodmanGlobal)
	require.Equal(t, []string{"s3cret"}, dsnPassword(c.Platform.PostgresAdmin), "the DSN's password is redacted like any secret")
	_, err = parseConfig(append(args, "--env-driver-command", "./drv"), getenv, io.Discard)
	require.ErrorContains(t, err, "choose one")
}
