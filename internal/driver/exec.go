package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Exec runs a configured command as a driver: the request is one JSON object
// on stdin, the result one JSON object on stdout, diagnostics on stderr, and
// a non-zero exit is one scoped failure. The command runs in its own process
// group and the whole group is killed when Timeout passes.
type Exec struct {
	Command []string
	Timeout time.Duration
	// PassEnv names the variables of warden's own environment the command
	// also gets, beside the minimal set (T9: --driver-env).
	PassEnv []string
	// Env is added to the command's environment (never secrets on argv).
	Env []string
	// Descriptors bounds the processes running at once with every other
	// driver's processes and connections; nil bounds nothing.
	Descriptors *Descriptors
}

// minimalEnv is what every child process gets of warden's environment
// (T9): enough to find programs and write temporary files, never a
// warden token or key, since what a driver starts (a preview
// application, a workflow) inherits it again.
var minimalEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// ChildEnv builds a child's environment from warden's own: the minimal
// set, the names pass lists, then extra.
func ChildEnv(getenv func(string) (string, bool), pass []string, extra ...string) []string {
	var env []string
	seen := map[string]bool{}
	for _, name := range append(append([]string(nil), minimalEnv...), pass...) {
		if seen[name] {
			continue
		}
		seen[name] = true
		if v, ok := getenv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return append(env, extra...)
}

// Limits on what a script may send back; a runaway script is cut off, not
// buffered.
const (
	maxStdout = 1 << 20
	maxStderr = 4 << 10
)

// ExecResult is the stdout contract: ok, and a human detail; a dispatch
// script may name the run it started.
type ExecResult struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	RunID  uint64 `json:"run_id,omitempty"`
	RunURL string `json:"run_url,omitempty"`
}

// Run sends req and decodes the result into res.
func (e *Exec) Run(ctx context.Context, req any, res any) error {
	if len(e.Command) == 0 {
		return errorf(Configuration, "no command configured")
	}
	in, err := json.Marshal(req)
	if err != nil {
		return errorf(Configuration, "encode request: %v", err)
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	done, err := e.Descriptors.Start(ctx, e.Command[0])
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Command[0], e.Command[1:]...)
	cmd.Env = ChildEnv(os.LookupEnv, e.PassEnv, e.Env...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr limitedBuffer
	stdout.limit, stderr.limit = maxStdout, maxStderr
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that keeps our pipes open must not hold us past the timeout.
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	name := e.Command[0]
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return &Error{Class: Transient, Msg: fmt.Sprintf("%s timed out after %s", name, timeout), Timeout: true}
	case errors.Is(err, exec.ErrNotFound):
		return errorf(Configuration, "%s: not found", name)
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			_ = decodeResult(stdout.Bytes(), res) // a failing script may still say why, on stdout
			return errorf(Scoped, "%s exited %d: %s", name, ee.ExitCode(), tail(stderr.String()))
		}
		return errorf(Transient, "%s: %v", name, err)
	}
	if stdout.truncated {
		return errorf(Scoped, "%s wrote more than %d bytes to stdout", name, maxStdout)
	}
	if err := decodeResult(stdout.Bytes(), res); err != nil {
		return errorf(Scoped, "%s: %v", name, err)
	}
	return nil
}

// decodeResult reads a script's stdout: exactly one JSON object (trailing
// white space allowed), bounded by maxStdout before it gets here.
func decodeResult(out []byte, res any) error {
	dec := json.NewDecoder(bytes.NewReader(out))
	if err := dec.Decode(res); err != nil {
		return fmt.Errorf("stdout is not one JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("stdout has more than one JSON value")
	}
	return nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = "..." + s[len(s)-300:]
	}
	return strings.Join(strings.Fields(s), " ")
}

type limitedBuffer struct {
	bytes.Buffer
	limit     int
	truncated bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.limit - b.Len(); room < len(p) {
		b.truncated = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return n, nil
	}
	b.Buffer.Write(p)
	return n, nil
}

var _ io.Writer = (*limitedBuffer)(nil)

// ExecDispatcher dispatches a workflow through a script.
type ExecDispatcher struct{ Exec }

func (d *ExecDispatcher) Dispatch(ctx context.Context, r DispatchRequest) (Run, error) {
	var res ExecResult
	if err := d.Run(ctx, r, &res); err != nil {
		return Run{}, err
	}
	if !res.OK {
		return Run{}, errorf(Scoped, "dispatch script: %s", res.Detail)
	}
	return Run{ID: res.RunID, URL: res.RunURL}, nil
}

// ExecBootstrapper runs the bootstrap job through a script.
type ExecBootstrapper struct{ Exec }

func (b *ExecBootstrapper) Bootstrap(ctx context.Context, r BootstrapRequest) error {
	var res ExecResult
	if err := b.Run(ctx, r, &res); err != nil {
		return err
	}
	if !res.OK {
		return errorf(Scoped, "bootstrap script: %s", res.Detail)
	}
	return nil
}
