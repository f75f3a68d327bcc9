package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
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
}

func runEnv(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprint(stderr, `usage: warden env create --id ID --branch B --revision R [--ttl 72h] [--data disposable|preserve] [--if-absent]
       warden env remove ID [--reason R] [--if-present]
       warden env action ID ACTION [--reason R]   (resume, repair, adopt, continue-removal, abandon, rollback-route)
       warden env get ID

The server is --server or WARDEN_URL (default http://127.0.0.1:8080); the
token is WARDEN_OPERATOR_TOKEN. Prints a line about the environment, or
with -o json warden's whole answer on one line; exits 1 with warden's
message when it refuses, 2 on a usage error.
`)
	}
	if len(args) == 0 {
		usage()
		return envExitUsage
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("warden env "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usage
	server := fs.String("server", envOr(getenv, "WARDEN_URL", "http://127.0.0.1:8080"), "warden's base URL")
	id := fs.String("id", "", "environment id (create)")
	branch := fs.String("branch", "", "branch (create)")
	revision := fs.String("revision", "", "revision, e.g. the commit SHA (create)")
	ttl := fs.String("ttl", "", "time to live, e.g. 72h (create)")
	data := fs.String("data", "", "disposable or preserve (create)")
	reason := fs.String("reason", "", "why (remove, action)")
	ifAbsent := fs.Bool("if-absent", false, "create: an environment that already exists is success")
	ifPresent := fs.Bool("if-present", false, "remove: an environment that does not exist is success")
	output := fs.String("o", "text", "text (a line about the environment) or json (warden's whole answer)")
	// Positional arguments first (warden env remove ID --reason R), then
	// flags: the flag package stops at the first non-flag.
	var positional []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		positional, args = append(positional, args[0]), args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return envExitUsage
	}
	positional = append(positional, fs.Args()...)
	if *output != "text" && *output != "json" {
		fmt.Fprintf(stderr, "warden env: -o %q: want text or json\n", *output)
		return envExitUsage
	}
	c := &envClient{server: strings.TrimRight(*server, "/"), token: getenv("WARDEN_OPERATOR_TOKEN"),
		client: &http.Client{Timeout: 30 * time.Second}, sleep: time.Sleep}
	if c.token == "" {
		fmt.Fprintln(stderr, "warden env: WARDEN_OPERATOR_TOKEN is not set")
		return envExitUsage
	}
	if u, err := url.Parse(c.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintln(stderr, "warden env: --server / WARDEN_URL must be warden's http(s) base URL")
		return envExitUsage
	}
	need := func(n int) bool {
		if len(positional) != n {
			fmt.Fprintf(stderr, "warden env %s: expected %d argument(s), got %q\n", cmd, n, positional)
			return false
		}
		return true
	}
	var (
		status int
		answer []byte
		err    error
	)
	switch cmd {
	case "create":
		if !need(0) {
			return envExitUsage
		}
		body := map[string]any{"id": *id, "branch": *branch, "revision": *revision}
		if *ttl != "" {
			body["ttl"] = *ttl
		}
		if *data != "" {
			body["data"] = *data
		}
		status, answer, err = c.do(http.MethodPost, "/v1/environments", body)
		if err == nil && status == http.StatusConflict && *ifAbsent && errorCode(answer) == "conflict" {
			status, answer, err = c.do(http.MethodGet, "/v1/environments/"+url.PathEscape(*id), nil)
		}
	case "remove":
		if !need(1) {
			return envExitUsage
		}
		status, answer, err = c.do(http.MethodPost, "/v1/environments/"+url.PathEscape(positional[0])+"/remove", map[string]any{"reason": *reason})
		if err == nil && status == http.StatusNotFound && *ifPresent {
			if *output == "json" {
				fmt.Fprintf(stdout, "{\"id\":%q,\"removed\":\"absent\"}\n", positional[0])
			} else {
				fmt.Fprintf(stdout, "%s: absent, nothing to remove\n", positional[0])
			}
			return envExitOK
		}
	case "action":
		if !need(2) {
			return envExitUsage
		}
		status, answer, err = c.do(http.MethodPost, "/v1/environments/"+url.PathEscape(positional[0])+"/actions/"+url.PathEscape(positional[1]),
			map[string]any{"reason": *reason})
	case "get":
		if !need(1) {
			return envExitUsage
		}
		status, answer, err = c.do(http.MethodGet, "/v1/environments/"+url.PathEscape(positional[0]), nil)
	default:
		fmt.Fprintf(stderr, "warden env: unknown command %q\n", cmd)
		usage()
		return envExitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "warden env:", err)
		return envExitRefused
	}
	line := compactJSON(answer)
	if status/100 != 2 {
		fmt.Fprintf(stderr, "warden env %s: warden answered %d: %s\n", cmd, status, line)
		return envExitRefused
	}
	if *output == "json" {
		fmt.Fprintln(stdout, line)
	} else {
		fmt.Fprintln(stdout, envSummary(answer))
	}
	return envExitOK
}

// envSummary is one line about an environment view: what a person reads
// after a create or a removal (issue 22: the whole view, receipts and
// all, was 6 KB of escaped JSON).
func envSummary(answer []byte) string {
	var v struct {
		ID, Branch, State, Desired, Status, URL string
		Generation                              uint64
	}
	if json.Unmarshal(answer, &v) != nil || v.ID == "" {
		return compactJSON(answer)
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

func (c *envClient) do(method, path string, body any) (int, []byte, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		if try > 0 {
			c.sleep(time.Second)
		}
		req, err := c.request(method, path, bytes.NewReader(raw))
		if err != nil {
			return 0, nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.client.Do(req)
		if err != nil {
			lastErr = err
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

// errorCode is the code of warden's error answer, "" for any other body.
func errorCode(answer []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(answer, &e)
	return e.Error.Code
}

func compactJSON(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) == nil {
		return out.String()
	}
	return strings.TrimSpace(string(b))
}
