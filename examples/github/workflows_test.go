// Package github holds the GitHub side of warden's wire: the workflows
// under workflows/ and the scripts they run under scripts/ (docs/rules/workflow.md
// W4, W7). This file checks them: actionlint (the linter's own Go module)
// on every workflow, and the rules the linter cannot know.
package github

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"github.com/stretchr/testify/require"
)

func workflowFiles(t *testing.T) []string {
	files, err := filepath.Glob("workflows/*.yml")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"workflows/marquee.yml", "workflows/preview.yml"}, files)
	return files
}

// TestW4W7ActionlintPasses runs actionlint on every workflow file.
// Shellcheck and pyflakes integrations are off: they are external programs
// CI does not have; the scripts are plain sh, checked by sh -n below.
func TestW4W7ActionlintPasses(t *testing.T) {
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{})
	require.NoError(t, err)
	errs, err := l.LintFiles(workflowFiles(t), nil)
	require.NoError(t, err)
	require.Empty(t, errs, "actionlint:\n%s", out.String())
}

func parse(t *testing.T, path string) *actionlint.Workflow {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	w, errs := actionlint.Parse(raw)
	require.Empty(t, errs, "%s does not parse", path)
	return w
}

// TestW4MarqueeWorkflow: the inputs of warden's dispatch plus
// callback_token, masked before anything else; one run per marquee at a
// time; the steps are the scripts; a failure is reported on any failure.
func TestW4MarqueeWorkflow(t *testing.T) {
	w := parse(t, "workflows/marquee.yml")
	var dispatch *actionlint.WorkflowDispatchEvent
	for _, e := range w.On {
		if d, ok := e.(*actionlint.WorkflowDispatchEvent); ok {
			dispatch = d
		}
	}
	require.NotNil(t, dispatch, "a workflow_dispatch workflow")
	var inputs []string
	for name := range dispatch.Inputs {
		inputs = append(inputs, name)
	}
	// The inputs the GitHub dispatch client sends (internal/driver/github.go).
	require.ElementsMatch(t, []string{"marquee_id", "generation", "action", "callback_url", "callback_token"}, inputs)

	require.NotNil(t, w.Concurrency)
	require.Contains(t, w.Concurrency.Group.Value, "inputs.marquee_id", "concurrency keyed by marquee id")

	job := w.Jobs["terraform"]
	require.NotNil(t, job)
	first := job.Steps[0].Exec.(*actionlint.ExecRun)
	require.Contains(t, first.Run.Value, "::add-mask::", "the credential is masked before anything else runs")

	var runs []string
	failureStep := false
	for _, s := range job.Steps {
		r, ok := s.Exec.(*actionlint.ExecRun)
		if !ok {
			continue
		}
		runs = append(runs, r.Run.Value)
		if s.If != nil && strings.Contains(s.If.Value, "failure()") && strings.Contains(r.Run.Value, "on-failure.sh") {
			failureStep = true
		}
		require.NotContains(t, r.Run.Value, "${{", "inputs reach scripts through the environment, never pasted into shell")
	}
	require.True(t, slices.ContainsFunc(runs, func(r string) bool { return strings.Contains(r, "scripts/provision.sh") }))
	require.True(t, failureStep, "`failed` is reported on any failure (if: failure())")
}

// TestW7PreviewWorkflow: created on opened, synchronize and reopened;
// removed on closed; through the scripts.
func TestW7PreviewWorkflow(t *testing.T) {
	w := parse(t, "workflows/preview.yml")
	var types []string
	for _, e := range w.On {
		if we, ok := e.(*actionlint.WebhookEvent); ok && we.Hook.Value == "pull_request" {
			for _, ty := range we.Types {
				types = append(types, ty.Value)
			}
		}
	}
	require.ElementsMatch(t, []string{"opened", "synchronize", "reopened", "closed"}, types)
	var body strings.Builder
	for _, s := range w.Jobs["preview"].Steps {
		if r, ok := s.Exec.(*actionlint.ExecRun); ok {
			require.NotContains(t, r.Run.Value, "${{", "event fields reach scripts through the environment")
			body.WriteString(r.Run.Value + "\n")
		}
	}
	require.Contains(t, body.String(), "preview.sh create")
	require.Contains(t, body.String(), "preview.sh remove")
}

// TestW4ScriptsAreValidShell parses every script with sh -n and checks it
// is executable (the workflow runs them by path).
func TestW4ScriptsAreValidShell(t *testing.T) {
	scripts, err := filepath.Glob("scripts/*.sh")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"scripts/on-failure.sh", "scripts/preview.sh", "scripts/provision.sh"}, scripts)
	for _, s := range scripts {
		out, err := exec.Command("sh", "-n", s).CombinedOutput()
		require.NoError(t, err, "%s: %s", s, out)
		fi, err := os.Stat(s)
		require.NoError(t, err)
		require.NotZero(t, fi.Mode()&0o111, "%s is not executable", s)
	}
}

// TestShellcheckPasses runs shellcheck, as the reviewer
// did, over every script the project ships (Debian's shellcheck; .ci/run
// installs it).
func TestShellcheckPasses(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck is not installed (Debian package shellcheck; .ci/run installs it)")
	}
	var scripts []string
	for _, g := range []string{"scripts/*.sh", "../other-ci/*.sh", "../../scripts/*.sh", "../../.ci/run"} {
		m, err := filepath.Glob(g)
		require.NoError(t, err)
		scripts = append(scripts, m...)
	}
	require.NotEmpty(t, scripts)
	out, err := exec.Command(sc, scripts...).CombinedOutput()
	require.NoError(t, err, "shellcheck:\n%s", out)
}
