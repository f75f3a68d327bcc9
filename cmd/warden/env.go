package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// `warden env` is the client a CI job uses to ask for a preview
// environment or its removal (docs/rules/workflow.md W7): the server from --server or
// WARDEN_URL, the operator's token from WARDEN_OPERATOR_TOKEN (never from
// the command line), the server's error message on a refusal.

// Exit statuses of `warden env`.
const (
	envExitOK      = 0
	envExitRefused = 1 // warden answered with an error (its message is printed)
	envExitUsage   = 2
)

// envClient is one invocation's connection to warden.
type envClient struct {
	server, token string
	client        *http.Client
	sleep         func(time.Duration)
	// deadline, if set, bounds every request and retry (wait --timeout):
	// nothing is tried or slept past it.
	deadline time.Time
}

// envOptions are the flags every env command shares.
type envOptions struct {
	server, tokenFile, output string
	getenv                    func(string) string
}

// newEnvCommand is the old `warden env create|remove|action|get`, kept
// hidden so that a CI job written for it still runs: each says on stderr
// what to type now (`warden create environment ID ...`), and answers as
// before (-o text: one line; -o json: warden's answer on one line).
// Long: one table of the env subcommands, read as one.
func newEnvCommand(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	o := &envOptions{getenv: getenv}
	env := &cobra.Command{Use: "env", Short: "the old form of create, remove, action and get environment", Hidden: true, Args: cobra.NoArgs}
	env.PersistentFlags().StringVar(&o.server, "server", envOr(getenv, "WARDEN_URL", "http://127.0.0.1:8080"), "warden's base URL (WARDEN_URL)")
	env.PersistentFlags().StringVar(&o.tokenFile, "token-file", "", "file holding the token (else WARDEN_OPERATOR_TOKEN)")
	env.PersistentFlags().StringVarP(&o.output, "output", "o", "text", "text (a line about the environment) or json (warden's whole answer)")

	var id, reason string
	var f envCreateFlags
	var ifPresent bool
	// run is the new command's code, answering as the old one did.
	run := func(c *cobra.Command, args []string, form string, do func(*clientOptions) error) error {
		fmt.Fprintf(stderr, "warden: %q is now %q\n", "warden env "+c.Name(), fmt.Sprintf(form, strings.Join(args, " ")))
		co := &clientOptions{server: o.server, tokenFile: o.tokenFile, getenv: o.getenv, stdout: stdout, stderr: stderr}
		switch o.output {
		case "text":
			co.output = "table"
		case "json":
			co.output, co.oneLine = "json", true
		default:
			return usageError("-o %q: want text or json", o.output)
		}
		return do(co)
	}
	create := &cobra.Command{Use: "create --id ID --branch B --revision R", Short: "ask for a preview environment", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return run(c, []string{id}, "warden create environment %s ...", func(co *clientOptions) error { return co.createEnv(id, f) })
		}}
	create.Flags().StringVar(&id, "id", "", "environment id")
	f.declare(create)

	remove := &cobra.Command{Use: "remove ID", Short: "ask for an environment's removal", Args: argsNamed("ID"),
		RunE: func(c *cobra.Command, args []string) error {
			return run(c, args, "warden remove environment %s ...", func(co *clientOptions) error { return co.removeEnv(args[0], reason, ifPresent) })
		}}
	remove.Flags().StringVar(&reason, "reason", "", "why")
	remove.Flags().BoolVar(&ifPresent, "if-present", false, "an environment that does not exist is success")

	action := &cobra.Command{Use: "action ID ACTION --reason R", Short: "take a manual action", Args: argsNamed("ID", "ACTION"),
		RunE: func(c *cobra.Command, args []string) error {
			return run(c, args, "warden action environment %s --reason ...", func(co *clientOptions) error { return co.envAction(args[0], args[1], reason) })
		}}
	action.Flags().StringVar(&reason, "reason", "", "why (recorded in the environment's audit)")

	get := &cobra.Command{Use: "get ID", Short: "print an environment", Args: argsNamed("ID"),
		RunE: func(c *cobra.Command, args []string) error {
			return run(c, args, "warden get environment %s", func(co *clientOptions) error {
				return co.showEnv(co.call(http.MethodGet, "/v1/environments/"+url.PathEscape(args[0]), nil))
			})
		}}
	env.AddCommand(create, remove, action, get)
	return env
}

// envSummary is one line about an environment view: what a person reads
// after a create or a removal (the whole view, receipts and
// all, was 6 KB of escaped JSON).
func envSummary(answer []byte) string {
	var v struct {
		ID, Branch, State, Desired, Status, URL, Removed string
		Generation                                       uint64
	}
	if json.Unmarshal(answer, &v) != nil || v.ID == "" {
		return compactJSON(answer)
	}
	if v.Removed == "absent" {
		return v.ID + ": absent, nothing to remove"
	}
	line := fmt.Sprintf("%s (branch %s): %s (desired %s, generation %d): %s", v.ID, v.Branch, v.State, v.Desired, v.Generation, v.Status)
	if v.URL != "" {
		line += " " + v.URL
	}
	return line
}

// do sends one request; a 503 (warden starting, stopping or busy) and a
// network error are tried again, three times at most, after Retry-After or
// a second. Creates and removals are safe to repeat (a create that did land
// answers 409, which --if-absent accepts).
// request is one request to warden with the client's token.
func (c *envClient) request(method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequest(method, c.server+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	return req, nil
}

// rawBody is a request body sent as it is, not as JSON.
type rawBody struct {
	contentType string
	data        []byte
}

func (c *envClient) do(method, path string, body any, headers ...string) (int, []byte, error) {
	var raw []byte
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case rawBody:
		raw, contentType = b.data, b.contentType
	default:
		raw, _ = json.Marshal(body)
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		if try > 0 {
			if !c.deadline.IsZero() && time.Until(c.deadline) < time.Second {
				break
			}
			c.sleep(time.Second)
		}
		req, err := c.request(method, path, bytes.NewReader(raw))
		if err != nil {
			return 0, nil, err
		}
		if !c.deadline.IsZero() {
			ctx, cancel := context.WithDeadline(req.Context(), c.deadline)
			defer cancel()
			req = req.WithContext(ctx)
		}
		if body != nil {
			req.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.client.Do(req)
		if err != nil {
			lastErr = unreachable(c.server, err)
			continue
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && try < 2 {
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 1 && s <= 30 {
				c.sleep(time.Duration(s-1) * time.Second)
			}
			lastErr = fmt.Errorf("%s %s: 503 %s", method, path, compactJSON(answer))
			continue
		}
		return resp.StatusCode, answer, nil
	}
	return 0, nil, lastErr
}

// unreachable says that warden could not be reached at server, and how
// to point the client elsewhere.
func unreachable(server string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("could not connect to warden at %s: %v (is it running? the address is --server or WARDEN_URL)", server, op.Err)
	}
	return fmt.Errorf("warden at %s: %w (the address is --server or WARDEN_URL)", server, err)
}

func compactJSON(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) == nil {
		return out.String()
	}
	return strings.TrimSpace(string(b))
}
