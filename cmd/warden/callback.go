package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/marquee"
)

// `warden callback` is the workflow's side of the wire (docs/rules/workflow.md
// W1-W3): one callback, configured from the environment the workflow sets,
// the credential never on the command line, retried where a retry can
// help and stopped where it cannot, with an exit status a workflow can
// branch on.

// Exit statuses of `warden callback`.
const (
	exitOK       = 0 // applied, duplicate, ignored, pending_confirmation, checking, vetoed
	exitUsage    = 2 // a flag, a variable or the connection file is wrong: nothing was sent
	exitObsolete = 3 // stale or locked: this run is obsolete; stop quietly
	exitRefused  = 4 // warden refused the callback (4xx)
	exitGaveUp   = 5 // no answer within the retry budget (network, 429, 5xx)
)

// callbackRetryable are the statuses worth sending again.
var callbackRetryable = map[int]bool{http.StatusTooManyRequests: true, http.StatusBadGateway: true,
	http.StatusServiceUnavailable: true, http.StatusGatewayTimeout: true}

// callbackOptions is one invocation, after the flags and the environment.
type callbackOptions struct {
	url, marqueeID, token string
	generation            uint64
	body                  map[string]any
	deliveryID            string
	budget                time.Duration
	client                *http.Client
	sleep                 func(time.Duration)
	jitter                func(time.Duration) time.Duration
}

// callbackLong is `warden callback --help`'s text.
const callbackLong = `usage: warden callback --verb VERB [--step S | --reason R | --connection-from FILE]

Sends one callback to warden. Configuration comes from the environment the
workflow sets, never from the command line: WARDEN_CALLBACK_URL,
WARDEN_MARQUEE_ID, WARDEN_GENERATION and the run's scoped credential
WARDEN_CALLBACK_TOKEN. The delivery id is derived from GITHUB_RUN_ID and
GITHUB_RUN_ATTEMPT (or another CI's run id in WARDEN_RUN_ID), the verb and
the step, so a retried step is one delivery and another run is another.

exit status: 0 accepted (applied, duplicate, ignored, pending_confirmation,
checking, vetoed); 3 this run is obsolete (stale, locked): stop quietly;
4 refused; 5 no answer within --retry-for; 2 usage.`

// callbackCommand is `warden callback`: its exit status is the answer's
// (callbackLong).
func callbackCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func([]string) error {
	parse := callbackFlags(fs, getenv)
	return func(args []string) error {
		o, err := parse(args)
		if err != nil {
			return usageError("%v", err)
		}
		if code := o.send(stdout, stderr); code != 0 {
			return exitError{code}
		}
		return nil
	}
}

// callbackFlags declares callback's flags; what it returns reads the rest
// of an invocation from the environment.
func callbackFlags(fs *flag.FlagSet, getenv func(string) string) func([]string) (*callbackOptions, error) {
	verb := fs.String("verb", "", "step, deployed, destroyed, failed, null or rebooted")
	step := fs.String("step", "", "for --verb step: vm_starting, ssh_configuring, tls_provisioning or app_deploying")
	reason := fs.String("reason", "", "for --verb failed: what went wrong")
	connFile := fs.String("connection-from", "", "for --verb deployed: the file `terraform output -json` wrote")
	budget := fs.Duration("retry-for", 2*time.Minute, "how long to keep retrying network errors, 429, 502, 503 and 504")
	return func(args []string) (*callbackOptions, error) {
		if len(args) > 0 {
			return nil, fmt.Errorf("unexpected arguments %q (the credential is read from WARDEN_CALLBACK_TOKEN, never from the command line)", args)
		}
		o := &callbackOptions{url: getenv("WARDEN_CALLBACK_URL"), marqueeID: getenv("WARDEN_MARQUEE_ID"), token: getenv("WARDEN_CALLBACK_TOKEN"),
			budget: *budget, client: &http.Client{Timeout: 30 * time.Second}, sleep: time.Sleep,
			jitter: func(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d) + 1)) }}
		var problems []string
		if o.url == "" || !(strings.HasPrefix(o.url, "https://") || strings.HasPrefix(o.url, "http://")) {
			problems = append(problems, "WARDEN_CALLBACK_URL must be warden's callback URL")
		}
		if !marquee.ValidID(o.marqueeID) {
			problems = append(problems, "WARDEN_MARQUEE_ID must be a marquee id")
		}
		g, err := strconv.ParseUint(getenv("WARDEN_GENERATION"), 10, 64)
		if err != nil {
			problems = append(problems, "WARDEN_GENERATION must be the dispatch's generation (0 for an unversioned caller)")
		}
		o.generation = g
		if o.token == "" {
			problems = append(problems, "WARDEN_CALLBACK_TOKEN must hold the run's credential (the input callback_token)")
		}
		if *budget < 0 || *budget > time.Hour {
			problems = append(problems, "--retry-for: 0..1h")
		}
		o.body = map[string]any{"marquee_id": o.marqueeID, "verb": *verb, "generation": o.generation}
		switch marquee.Verb(*verb) {
		case marquee.VerbStep:
			if _, err := marquee.ParseProgress(*step); err != nil || *step == "" {
				problems = append(problems, "--step: one of vm_starting, ssh_configuring, tls_provisioning, app_deploying")
			}
			o.body["step"] = *step
		case marquee.VerbDeployed:
			conn, err := connectionFromTerraform(*connFile)
			if err != nil {
				problems = append(problems, err.Error())
			}
			o.body["connection"] = conn
		case marquee.VerbFailed:
			if *reason != "" {
				o.body["reason"] = clipReason(*reason)
			}
		case marquee.VerbDestroyed, marquee.VerbNull, marquee.VerbRebooted:
		default:
			problems = append(problems, "--verb: one of step, deployed, destroyed, failed, null, rebooted")
		}
		if *verb != string(marquee.VerbStep) && *step != "" {
			problems = append(problems, "--step is only for --verb step")
		}
		if len(problems) > 0 {
			return nil, errors.New(strings.Join(problems, "; "))
		}
		o.deliveryID = deliveryID(getenv, o.marqueeID, o.generation, *verb, *step)
		return o, nil
	}
}

// clipReason bounds a failure reason to what warden keeps (2 KiB).
func clipReason(s string) string {
	if len(s) > 2000 {
		return s[:2000]
	}
	return s
}

// deliveryID is the same for every try of one callback of one run (W2,
// M20) and differs between runs: GitHub's run id and attempt, or another
// CI's run id in WARDEN_RUN_ID (GitLab's CI_PIPELINE_ID, Buildkite's
// BUILDKITE_BUILD_ID), then the verb and the step. With neither, it is
// derived from the marquee, generation, verb and step, so two runs of one
// generation share ids: a second run's differing body is then refused as
// a reused key rather than taken for the first's.
func deliveryID(getenv func(string) string, marqueeID string, generation uint64, verb, step string) string {
	what := verb
	if step != "" {
		what += "-" + step
	}
	if run := getenv("GITHUB_RUN_ID"); run != "" {
		attempt := getenv("GITHUB_RUN_ATTEMPT")
		if attempt == "" {
			attempt = "1"
		}
		return fmt.Sprintf("gh-%s-%s-%s", run, attempt, what)
	}
	if run := getenv("WARDEN_RUN_ID"); run != "" {
		h := sha256.Sum256([]byte(run))
		// The run id is the caller's text: only its digest goes on the wire,
		// so the id stays within Webhook-Id's alphabet and length.
		return fmt.Sprintf("run-%s-%s", hex.EncodeToString(h[:8]), what)
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%s", marqueeID, generation, what)))
	return fmt.Sprintf("wc-%s-%d-%s-%s", marqueeID, generation, what, hex.EncodeToString(h[:4]))
}

// connectionFromTerraform reads `terraform output -json`. The outputs
// are named like the callback's fields: host, port, user,
// ssh_private_key, free_domain, and acme_dns (an object with server_url,
// username, password, subdomain, full_domain). A missing one is an error
// before anything is sent.
func connectionFromTerraform(path string) (map[string]any, error) {
	if path == "" {
		return nil, errors.New("--verb deployed needs --connection-from (the file `terraform output -json` wrote)")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--connection-from: %w", err)
	}
	if len(raw) > 1<<20 {
		return nil, errors.New("--connection-from: over 1 MiB")
	}
	var outputs map[string]struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &outputs); err != nil {
		return nil, fmt.Errorf("--connection-from: not `terraform output -json`: %v", err)
	}
	conn := map[string]any{}
	var missing []string
	for _, name := range []string{"host", "port", "user", "ssh_private_key", "free_domain", "acme_dns"} {
		out, ok := outputs[name]
		if !ok || len(out.Value) == 0 || string(out.Value) == "null" {
			missing = append(missing, name)
			continue
		}
		var v any
		if err := json.Unmarshal(out.Value, &v); err != nil {
			return nil, fmt.Errorf("--connection-from: output %s: %v", name, err)
		}
		conn[name] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("--connection-from: terraform outputs missing: %s (see examples/terraform for the naming)", strings.Join(missing, ", "))
	}
	if p, ok := conn["port"].(string); ok { // a port output declared as a string
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("--connection-from: output port %q is not a number", p)
		}
		conn["port"] = n
	}
	return conn, nil
}

// send delivers the callback, retrying what may succeed later.
func (o *callbackOptions) send(stdout, stderr io.Writer) int {
	body, _ := json.Marshal(o.body)
	deadline := time.Now().Add(o.budget)
	wait := time.Second
	for try := 1; ; try++ {
		status, answer, retryAfter, err := o.post(body)
		switch {
		case err == nil && status == http.StatusOK:
			fmt.Fprintln(stdout, strings.TrimSpace(string(answer)))
			var a struct {
				Result string `json:"result"`
			}
			_ = json.Unmarshal(answer, &a)
			if a.Result == string(marquee.Stale) || a.Result == string(marquee.Locked) {
				return exitObsolete
			}
			return exitOK
		case err == nil && !callbackRetryable[status]:
			fmt.Fprintln(stdout, strings.TrimSpace(string(answer)))
			fmt.Fprintf(stderr, "warden callback: refused with %d; not retried\n", status)
			return exitRefused
		}
		why := fmt.Sprintf("status %d", status)
		if err != nil {
			why = err.Error()
		}
		next := o.jitter(wait)
		if retryAfter > next {
			next = retryAfter
		}
		if time.Now().Add(next).After(deadline) {
			fmt.Fprintf(stderr, "warden callback: no answer after %d tries (%s); giving up\n", try, why)
			return exitGaveUp
		}
		fmt.Fprintf(stderr, "warden callback: try %d: %s; again in %s\n", try, why, next.Round(time.Millisecond))
		o.sleep(next)
		wait = min(wait*2, 30*time.Second) // capped exponential back-off, full jitter
	}
}

// post sends one try; the credential goes only into the header.
func (o *callbackOptions) post(body []byte) (status int, answer []byte, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Id", o.deliveryID)
	resp, err := o.client.Do(req)
	if err != nil {
		return 0, nil, 0, errors.New(strings.ReplaceAll(err.Error(), o.token, "[redacted]"))
	}
	defer resp.Body.Close()
	answer, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 300 {
			retryAfter = time.Duration(n) * time.Second
		}
	}
	return resp.StatusCode, answer, retryAfter, nil
}
