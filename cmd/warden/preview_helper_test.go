package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// previewBuild is examples/preview, built once for this test binary.
var previewBuild struct {
	once     sync.Once
	dir, bin string
	out      []byte
	err      error
}

// previewDriver is the reference preview driver; when t ends, every
// preview application it started under previewDir is stopped. They
// outlive warden by design, as a platform's do, so a test that starts one
// stops it, or it serves on after the test binary has gone.
func previewDriver(t *testing.T, previewDir string) string {
	t.Helper()
	previewBuild.once.Do(func() {
		previewBuild.dir, previewBuild.err = os.MkdirTemp("", "warden-test-preview")
		if previewBuild.err == nil {
			previewBuild.bin = filepath.Join(previewBuild.dir, "example-preview")
			previewBuild.out, previewBuild.err = exec.Command("go", "build", "-o", previewBuild.bin, "../../examples/preview").CombinedOutput()
		}
	})
	require.NoError(t, previewBuild.err, "%s", previewBuild.out)
	t.Cleanup(func() {
		stop := exec.Command(previewBuild.bin, "stop")
		stop.Env = append(os.Environ(), "WARDEN_PREVIEW_DIR="+previewDir)
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("stopping the preview applications under %s: %v: %s", previewDir, err, out)
		}
	})
	return previewBuild.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if previewBuild.dir != "" {
		_ = os.RemoveAll(previewBuild.dir)
	}
	os.Exit(code)
}
