// Command example-workflow stands in for the GitHub Actions + Terraform
// workflow on a machine with neither, so that `make run` shows a tutorial
// marquee's whole lifecycle offline. It speaks warden's exec driver
// contract and calls back over HTTP exactly as the real workflow does:
//
//	example-workflow            dispatch: read the request (JSON on stdin),
//	                            start a detached run, print {"ok":true}
//	example-workflow run        the run: step callbacks, then deployed (apply,
//	                            redeploy) or destroyed (destroy)
//	example-workflow bootstrap  bootstrap driver: nothing to bring up on a
//	                            laptop, so it reports success
//
// The run's scoped callback credential (T1) comes with the request on
// stdin, as a real workflow gets it as the input callback_token; it never
// travels in an environment variable or on a command line.
//
// With WARDEN_EXAMPLE_SCRIPTS set (the examples/github/scripts directory),
// the run is the GitHub workflow's own steps instead: it maps the request
// to the environment the workflow maps its inputs to, runs provision.sh
// (real Terraform on examples/terraform/local, `warden callback` at each
// step) and, if that fails, on-failure.sh, exactly as the workflow's
// `if: failure()` step does. `make run` chooses this when terraform is on
// the PATH.
//
// Environment: WARDEN_EXAMPLE_STEP_DELAY (pause between callbacks, default 1s),
// WARDEN_EXAMPLE_LOG (where runs write their diagnostics, default
// os.TempDir()/warden-example-workflow.log), WARDEN_EXAMPLE_SCRIPTS (above;
// the scripts read WARDEN_BIN, WARDEN_TF_DIR and WARDEN_TF_WORK).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

type request struct {
	MarqueeID     string `json:"marquee_id"`
	Generation    uint64 `json:"generation"`
	Action        string `json:"action"`
	CallbackURL   string `json:"callback_url"`
	CallbackToken string `json:"callback_token"`
}

func main() {
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var err error
	switch mode {
	case "":
		err = dispatch()
	case "run":
		err = run()
	case "bootstrap":
		err = bootstrap()
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "example-workflow:", err)
		os.Exit(1)
	}
}

func readRequest(v any) error {
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 64<<10))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// maxRequest bounds what the run reads on its stdin.
const maxRequest = 64 << 10

// dispatch answers like GitHub's 204: the run is accepted and goes on in
// the background, in its own session so the driver's timeout cannot kill it.
func dispatch() error {
	var r request
	if err := readRequest(&r); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	if r.CallbackToken == "" {
		return fmt.Errorf("the request holds no callback_token: start warden with the scoped callback mode (--callback-auth scoped)")
	}
	raw, _ := json.Marshal(r)
	if len(raw) > maxRequest {
		return fmt.Errorf("request over %d bytes", maxRequest)
	}
	logPath := os.Getenv("WARDEN_EXAMPLE_LOG")
	if logPath == "" {
		logPath = filepath.Join(os.TempDir(), "warden-example-workflow.log")
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The run gets the request, credential included, on its stdin: a
	// pipe written in full (a request is far below a pipe's buffer) and
	// closed before the run starts, so nothing waits on this process.
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	if _, err := pw.Write(raw); err != nil {
		return err
	}
	pw.Close()
	defer pr.Close()
	cmd := exec.Command(self, "run")
	cmd.Stdin = pr
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = cmd.Process.Release()
	fmt.Println(`{"ok":true,"detail":"run started"}`)
	return nil
}

func run() error {
	var r request
	if err := readRequest(&r); err != nil {
		return fmt.Errorf("request on stdin: %w", err)
	}
	if dir := os.Getenv("WARDEN_EXAMPLE_SCRIPTS"); dir != "" {
		return runScripts(dir, r)
	}
	delay := time.Second
	if d, err := time.ParseDuration(os.Getenv("WARDEN_EXAMPLE_STEP_DELAY")); err == nil {
		delay = d
	}
	token := r.CallbackToken
	post := func(body map[string]any, delivery string) error {
		body["marquee_id"] = r.MarqueeID
		body["generation"] = r.Generation
		b, _ := json.Marshal(body)
		// Like a webhook sender, retry what was not acknowledged, with the
		// same delivery id so warden answers a repeat byte for byte.
		for attempt := 0; attempt < 5; attempt++ {
			req, _ := http.NewRequest(http.MethodPost, r.CallbackURL, bytes.NewReader(b))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Webhook-Id", delivery)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				ans, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				fmt.Printf("%s gen=%d %s -> %d %s", r.MarqueeID, r.Generation, body["verb"], resp.StatusCode, ans)
				if resp.StatusCode < 500 {
					return nil
				}
			}
			time.Sleep(time.Duration(attempt+1) * time.Second)
		}
		return fmt.Errorf("callback %s not acknowledged", delivery)
	}
	id := func(what string) string {
		return r.MarqueeID + "-" + strconv.FormatUint(r.Generation, 10) + "-" + what
	}
	if r.Action == "destroy" {
		time.Sleep(delay)
		return post(map[string]any{"verb": "destroyed"}, id("destroyed"))
	}
	for _, step := range []string{"vm_starting", "ssh_configuring", "tls_provisioning", "app_deploying"} {
		time.Sleep(delay)
		if err := post(map[string]any{"verb": "step", "step": step}, id(step)); err != nil {
			return err
		}
	}
	time.Sleep(delay)
	return post(map[string]any{"verb": "deployed", "connection": map[string]any{
		"host": "127.0.0.1", "port": 22, "user": "warden",
		"ssh_private_key": "example key of generation " + strconv.FormatUint(r.Generation, 10) + " (not a real key)",
		"free_domain":     r.MarqueeID + ".localhost",
	}}, id("deployed"))
}

// runScripts runs the workflow's steps as GitHub Actions would: the inputs
// in the environment (the credential too, as the workflow's env: maps it),
// provision.sh, and on-failure.sh when it fails.
func runScripts(dir string, r request) error {
	env := append(os.Environ(),
		"WARDEN_CALLBACK_URL="+r.CallbackURL,
		"WARDEN_MARQUEE_ID="+r.MarqueeID,
		"WARDEN_GENERATION="+strconv.FormatUint(r.Generation, 10),
		"WARDEN_CALLBACK_TOKEN="+r.CallbackToken,
		// A run of its own, as GitHub's GITHUB_RUN_ID is: its callbacks'
		// delivery ids are its own.
		"WARDEN_RUN_ID="+fmt.Sprintf("example-%s-%d-%d", r.MarqueeID, r.Generation, time.Now().UnixNano()))
	step := func(script string, args ...string) error {
		cmd := exec.Command(filepath.Join(dir, script), args...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Printf("%s gen=%d: %s %v\n", r.MarqueeID, r.Generation, script, args)
		return cmd.Run()
	}
	err := step("provision.sh", r.Action)
	if err != nil {
		if ferr := step("on-failure.sh"); ferr != nil {
			return fmt.Errorf("provision.sh: %v; on-failure.sh: %v", err, ferr)
		}
		return fmt.Errorf("provision.sh: %w (reported to warden)", err)
	}
	return nil
}

func bootstrap() error {
	var r struct {
		MarqueeID  string `json:"marquee_id"`
		FreeDomain string `json:"free_domain"`
	}
	if err := readRequest(&r); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	fmt.Fprintf(os.Stderr, "example bootstrap of %s: no Traefik to start on this machine\n", r.MarqueeID)
	fmt.Printf(`{"ok":true,"detail":"example bootstrap of %s: nothing to bring up locally"}`+"\n", r.FreeDomain)
	return nil
}
