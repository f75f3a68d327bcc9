package local

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/internal/testports"
)

// podmanHere is podman as these machines run it (docs/rules/platform.md):
// runc, cgroupfs, host networking and explicit ulimits.
func podmanHere(t *testing.T) *Podman {
	bin, err := exec.LookPath("podman")
	if err != nil {
		t.Fatal("podman is not installed (Debian: apt-get install -y podman runc)")
	}
	release, err := testports.Hold("podman") // containers are named by environment ids, machine-wide
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	data := &Data{Admin: adminDSN}
	return &Podman{Binary: bin, Global: podmanGlobal, Context: appContext(t), Run: podmanRun, DatabaseURL: data.URL}
}

var (
	podmanGlobal = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}
	podmanRun    = []string{"--network", "host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}
)

// appContext is the example application's build context: its static
// binary and its Containerfile.
func appContext(t *testing.T) string {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "previewapp"), "../../../examples/previewapp")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	cf, err := os.ReadFile("../../../examples/previewapp/Containerfile")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Containerfile"), cf, 0o600))
	return dir
}

func pod(t *testing.T, p *Podman, capability, op, env string) driver.CapabilityResult {
	t.Helper()
	identity := "app-" + env
	if capability == "artifact" {
		identity = "artifact-" + env + "-r1"
	}
	res, err := p.Do(context.Background(), driver.CapabilityRequest{Capability: capability, Op: op, EnvID: env, Identity: identity,
		Revision: "r1", Generation: 1, AttemptID: "att-" + env + "-1"})
	require.NoError(t, err)
	return res
}

func cleanupPodman(t *testing.T, p *Podman, envs ...string) {
	t.Cleanup(func() {
		for _, env := range envs {
			_, _, _ = p.podman(context.Background(), "rm", "--force", "app-"+env)
			ids, _, _ := p.podman(context.Background(), "images", "--quiet", "--filter", "label="+LabelEnvironment+"="+env)
			for _, id := range strings.Fields(string(ids)) {
				_, _, _ = p.podman(context.Background(), "rmi", "--force", id)
			}
		}
	})
}

// TestP4P6APreviewRunsItsImageWithItsOwnDatabase: the artifact is an image
// built with its environment's labels, its digest the receipt, found
// again rather than rebuilt (P4); the application is a labelled container
// of it whose health endpoint names its environment and revision, and
// whose page shows a row of its own database (P3, P5, P6); removed by
// hand it is seen gone and started again (P10); removal leaves nothing.
func TestP4P6APreviewRunsItsImageWithItsOwnDatabase(t *testing.T) {
	p := podmanHere(t)
	cleanupPodman(t, p, "env-p1")
	example, err := LoadMigrations("../../../examples/previewapp/migrations")
	require.NoError(t, err)
	data := &Data{Admin: adminDSN, Migrations: example}
	require.True(t, do(t, data, "database", "apply", "env-p1").OK)
	require.True(t, do(t, data, "migrations", "apply", "env-p1").Observation.Matches)

	require.False(t, pod(t, p, "artifact", "observe", "env-p1").Observation.Exists)
	img := pod(t, p, "artifact", "apply", "env-p1").Observation
	require.True(t, img.Exists && img.Matches, img.Detail)
	require.Equal(t, "env-p1", img.Owner)
	require.Contains(t, img.ProviderID, "sha256:", "the receipt is the image's digest")
	require.Equal(t, img.ProviderID, pod(t, p, "artifact", "apply", "env-p1").Observation.ProviderID, "found again, not rebuilt")

	running := func() bool { return pod(t, p, "app", "observe", "env-p1").Observation.Matches }
	require.True(t, pod(t, p, "app", "apply", "env-p1").OK)
	require.Eventually(t, running, 20*time.Second, 100*time.Millisecond, "the application answers for env-p1 at r1")
	up, err := p.Upstream(context.Background(), "env-p1")
	require.NoError(t, err)
	resp, err := http.Get("http://" + up + "/")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(page), "own database", "a row from its own database, made by the example's migrations")
	require.Contains(t, string(page), "<code>r1</code>")

	_, _, err = p.podman(context.Background(), "rm", "--force", "app-env-p1") // by hand (P10)
	require.NoError(t, err)
	require.False(t, pod(t, p, "app", "observe", "env-p1").Observation.Exists)
	require.True(t, pod(t, p, "app", "apply", "env-p1").OK)
	require.Eventually(t, running, 20*time.Second, 100*time.Millisecond, "started again")

	require.False(t, pod(t, p, "app", "remove", "env-p1").Observation.Exists)
	require.False(t, pod(t, p, "artifact", "remove", "env-p1").Observation.Exists)
	require.False(t, pod(t, p, "artifact", "remove", "env-p1").Observation.Exists, "removing again finds it absent")
}

// TestP6ASameNameContainerOfAnotherIsAConflict: a container under the
// declared name with no labels, or another environment's, is reported as
// its owner's, never replaced or removed (E3, E11).
func TestP6ASameNameContainerOfAnotherIsAConflict(t *testing.T) {
	p := podmanHere(t)
	cleanupPodman(t, p, "env-p2")
	require.True(t, pod(t, p, "artifact", "apply", "env-p2").Observation.Exists)
	_, _, err := p.podman(context.Background(), append(append([]string{"create", "--name", "app-env-p2"}, p.Run...), imageRef("artifact-env-p2-r1"))...)
	require.NoError(t, err)
	res := pod(t, p, "app", "apply", "env-p2")
	require.NotNil(t, res.Observation, "%+v", res)
	require.Equal(t, "unlabelled", res.Observation.Owner)
	require.False(t, res.Observation.Matches)
	res = pod(t, p, "app", "remove", "env-p2")
	require.Equal(t, "conflict", res.Category)
	require.True(t, pod(t, p, "app", "observe", "env-p2").Observation.Exists, "left in place")
}
