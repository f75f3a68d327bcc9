package main

import (
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/previewworld"
)

// previewBuild is examples/preview, built once for this test binary.
var previewBuild struct {
	once     sync.Once
	dir, bin string
	err      error
}

// previewDriver is the reference preview driver; when t ends, every
// preview application it started under previewDir is stopped. They
// outlive warden by design, as a platform's do, so a test that starts one
// stops it, or it serves on after the test binary has gone.
func previewDriver(t *testing.T, previewDir string) string {
	t.Helper()
	previewBuild.once.Do(func() {
		if previewBuild.dir, previewBuild.err = os.MkdirTemp("", "warden-test-preview"); previewBuild.err == nil {
			previewBuild.bin, previewBuild.err = previewworld.BuildDriver(previewBuild.dir)
		}
	})
	require.NoError(t, previewBuild.err)
	t.Cleanup(func() { previewworld.StopApps(previewDir) })
	return previewBuild.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if previewBuild.dir != "" {
		_ = os.RemoveAll(previewBuild.dir)
	}
	os.Exit(code)
}
