package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// The client half of the binary: get, describe, history and the
// marquee actions against a running warden, with kubectl's conventions:
// a table by default, -o wide for more columns, -o json or yaml for the
// server's own answer; a refusal exits non-zero with the server's message.

// clientOptions are the flags every client command shares.
type clientOptions struct {
	server, tokenFile, output string
	getenv                    func(string) string
	stdout, stderr            io.Writer
	// deadline, if set, bounds every call (wait --timeout).
	deadline time.Time
	// oneLine prints -o json on one line, as the old env commands did.
	oneLine bool
}

// maxListRows bounds how many rows `get` follows cursors for.
const maxListRows = 10_000

// clientFlags registers --server and --token-file on a command that asks
// a running warden as an operator (verify --live, backup, rekey --online);
// when says to which of its uses they apply.
func clientFlags(fs *flag.FlagSet, getenv func(string) string, when string) *clientOptions {
	o := &clientOptions{output: "json", getenv: getenv}
	fs.StringVar(&o.server, "server", envOr(getenv, "WARDEN_URL", "http://127.0.0.1:8080"), when+"warden's base URL (a node's, on a cluster)")
	fs.StringVar(&o.tokenFile, "token-file", "", when+"file holding an operator token (else WARDEN_OPERATOR_TOKEN)")
	return o
}

func (o *clientOptions) client() (*envClient, error) {
	token := o.getenv("WARDEN_OPERATOR_TOKEN")
	if o.tokenFile != "" {
		raw, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(raw))
	}
	// What the command line got wrong is a usage error (exit 2), checked
	// before the token: it is the first thing to fix.
	u, err := url.Parse(o.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if !strings.Contains(o.server, "://") {
			return nil, usageError("--server / WARDEN_URL %q has no scheme: use http://%s", o.server, o.server)
		}
		return nil, usageError("--server / WARDEN_URL %q must be warden's http(s) base URL", o.server)
	}
	switch o.output {
	case "table", "wide", "json", "yaml":
	default:
		return nil, usageError("-o %q: want table, wide, json or yaml", o.output)
	}
	if token == "" {
		return nil, fmt.Errorf("no token: set WARDEN_OPERATOR_TOKEN or --token-file (an operator's or a viewer's)")
	}
	return &envClient{server: strings.TrimRight(o.server, "/"), token: token, client: &http.Client{Timeout: 30 * time.Second}, sleep: time.Sleep, deadline: o.deadline}, nil
}

// call sends one request and decodes the answer; a refusal becomes an
// error holding warden's message.
func (o *clientOptions) call(method, path string, body any) (map[string]any, error) {
	return o.callWith(method, path, body)
}

// callWith is call with request headers, as name and value pairs.
func (o *clientOptions) callWith(method, path string, body any, headers ...string) (map[string]any, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	status, raw, err := c.do(method, path, body, headers...)
	if err != nil {
		return nil, err
	}
	var answer map[string]any
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("%s %s: warden answered %d with something that is not JSON", method, path, status)
	}
	if status/100 != 2 {
		return nil, refusalOf(status, raw)
	}
	return answer, nil
}

// refusalOf is warden's error answer as an error: its message, status and
// code, printed as one line (never the JSON).
func refusalOf(status int, raw []byte) answerError {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	return answerError{status: status, message: e.Error.Message, code: e.Error.Code}
}

// answerError is warden's refusal of a call: its status and its error.
type answerError struct {
	status        int
	message, code string
}

func (e answerError) Error() string {
	if e.code == "" {
		return fmt.Sprintf("warden answered %d", e.status)
	}
	return fmt.Sprintf("%s (%d %s)", e.message, e.status, e.code)
}

// print writes v as json or yaml; false means the caller prints a table.
func (o *clientOptions) print(v any) (bool, error) {
	switch o.output {
	case "json":
		enc := json.NewEncoder(o.stdout)
		if !o.oneLine {
			enc.SetIndent("", "  ")
		}
		return true, enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = o.stdout.Write(b)
		return true, err
	}
	return false, nil
}

// addClientCommands adds the API's clients (get, create, history, ...).
// Long: one table of the client's commands, read as one.
func addClientCommands(root *cobra.Command, getenv func(string) string, stdout, stderr io.Writer) {
	o := &clientOptions{getenv: getenv, stdout: stdout, stderr: stderr}
	shared := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&o.server, "server", envOr(getenv, "WARDEN_URL", "http://127.0.0.1:8080"), "warden's base URL (WARDEN_URL)")
		c.Flags().StringVar(&o.tokenFile, "token-file", "", "file holding the token (else WARDEN_OPERATOR_TOKEN)")
		c.Flags().StringVarP(&o.output, "output", "o", "table", "table, wide, json or yaml")
		return c
	}

	get := &cobra.Command{Use: "get TYPE [ID]", Short: "list marquees, environments, pools or actors, or get one",
		Args: cobra.ArbitraryArgs, RunE: func(_ *cobra.Command, args []string) error { return unknownType("get", args) }}
	filters := map[string]*string{}
	listCmd := func(use, path string, names []string, table func([]map[string]any) [][]string, wide func([]map[string]any) [][]string) *cobra.Command {
		c := shared(&cobra.Command{Use: use + " [ID]", Aliases: typeAliases[use], Short: "list " + use + ", or get one",
			Args: cobra.MaximumNArgs(1), RunE: func(_ *cobra.Command, args []string) error {
				if len(args) == 1 {
					return o.getOne(path, args[0], table, wide)
				}
				q := url.Values{}
				for _, n := range names {
					if v := *filters[use+"/"+n]; v != "" {
						q.Set(n, v)
					}
				}
				rows, answer, err := o.list(path, q)
				if err != nil {
					return err
				}
				if done, err := o.print(answer); done {
					return err
				}
				if o.output == "wide" && wide != nil {
					return o.table(wide(rows))
				}
				return o.table(table(rows))
			}})
		for _, n := range names {
			v := new(string)
			filters[use+"/"+n] = v
			c.Flags().StringVar(v, n, "", "only those with this "+n)
		}
		return c
	}
	get.AddCommand(
		listCmd("marquees", "/v1/marquees", []string{"kind", "serving", "lifecycle", "progress", "pool", "status"}, marqueeRows(false), marqueeRows(true)),
		listCmd("environments", "/v1/environments", []string{"state", "desired", "branch", "status"}, envRows(false), envRows(true)),
		listCmd("pools", "/v1/pools", nil, poolRows, nil),
		listCmd("actors", "/v1/actors", nil, actorRows, nil),
		seedsCmd(o, shared),
	)

	describe := shared(&cobra.Command{Use: "describe [TYPE] ID", Short: "one marquee or environment: status, next, timeline",
		Args: cobra.ArbitraryArgs, RunE: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return unknownType("describe", args)
			}
			return o.describeAny(args[0])
		}})
	describe.AddCommand(
		shared(&cobra.Command{Use: "marquee ID", Aliases: typeAliases["marquees"], Short: "a marquee: status, next step, attempt, and its history as a timeline", Args: argsNamed("ID"),
			RunE: func(_ *cobra.Command, args []string) error { return o.describeMarquee(args[0]) }}),
		shared(&cobra.Command{Use: "environment ID", Aliases: typeAliases["environments"], Short: "an environment: status, next step, desired and observed resources, drift, audit",
			Args: argsNamed("ID"), RunE: func(_ *cobra.Command, args []string) error { return o.describeEnv(args[0]) }}),
	)
	explain := shared(&cobra.Command{Use: "explain TYPE ID", Short: "why an entity is where it is, what moves it now, what holds it, what it refused",
		Args: cobra.ArbitraryArgs, RunE: func(_ *cobra.Command, args []string) error { return unknownType("explain", args) }})
	explain.AddCommand(shared(&cobra.Command{Use: "marquee ID", Aliases: typeAliases["marquees"], Short: "a marquee's explanation",
		Args: argsNamed("ID"), RunE: func(_ *cobra.Command, args []string) error { return o.explainMarquee(args[0]) }}),
		shared(&cobra.Command{Use: "environment ID", Aliases: typeAliases["environments"], Short: "an environment's explanation: its verified steps, what moves it now, what holds it",
			Args: argsNamed("ID"), RunE: func(_ *cobra.Command, args []string) error { return o.explainEnv(args[0]) }}),
		shared(&cobra.Command{Use: "pool NAME", Aliases: []string{"pools"}, Short: "a pool's explanation: who holds its slots, who waits, what each release would do",
			Args: argsNamed("NAME"), RunE: func(_ *cobra.Command, args []string) error { return o.explainPool(args[0]) }}))
	root.AddCommand(get, describe, explain, o.waitCommand(shared))
	o.addEntityVerbs(root, shared)
}

// typeAliases are the names people type for each resource type (issue
// 22), as kubectl takes pod, pods and po.
var typeAliases = map[string][]string{
	"marquees":     {"marquee", "mq", "mqs"},
	"environments": {"environment", "env", "envs"},
	"pools":        {"pool"},
	"actors":       {"actor"},
	"seeds":        {"seed"},
}

// unknownType is the usage error of get or describe with a type it does
// not know, or none.
func unknownType(cmd string, args []string) error {
	valid := "marquees (marquee, mq), environments (environment, env, envs), pools (pool), actors (actor), seeds (seed)"
	switch cmd {
	case "describe":
		valid = "marquee (mq), environment (env); or an id alone"
	case "explain":
		valid = "marquee (mq), environment (env), pool"
	}
	if len(args) == 0 {
		return usageError("%s needs a resource type: %s", cmd, valid)
	}
	return usageError("%s: unknown resource type %q; valid types: %s", cmd, args[0], valid)
}

// getOne is `get TYPE ID`: one row of the type's table.
func (o *clientOptions) getOne(path, id string, table, wide func([]map[string]any) [][]string) error {
	answer, err := o.call(http.MethodGet, path+"/"+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	if done, err := o.print(answer); done {
		return err
	}
	if o.output == "wide" && wide != nil {
		return o.table(wide([]map[string]any{answer}))
	}
	return o.table(table([]map[string]any{answer}))
}

// describeAny is `describe ID`: the marquee of that id, else the
// environment, else a message that names both.
func (o *clientOptions) describeAny(id string) error {
	if _, err := o.call(http.MethodGet, "/v1/marquees/"+url.PathEscape(id), nil); err == nil {
		return o.describeMarquee(id)
	} else if !strings.Contains(err.Error(), "not_found") {
		return err
	}
	if _, err := o.call(http.MethodGet, "/v1/environments/"+url.PathEscape(id), nil); err == nil {
		return o.describeEnv(id)
	} else if !strings.Contains(err.Error(), "not_found") {
		return err
	}
	return fmt.Errorf("no marquee or environment %q (say which with: warden describe marquee|environment ID)", id)
}

// list follows cursors and returns every row, and the whole answer (the
// items of all pages) for -o json and yaml.
func (o *clientOptions) list(path string, q url.Values) ([]map[string]any, map[string]any, error) {
	var rows []map[string]any
	for {
		p := path
		if len(q) > 0 {
			p += "?" + q.Encode()
		}
		answer, err := o.call(http.MethodGet, p, nil)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, items(answer)...)
		next, _ := answer["next_cursor"].(string)
		if next == "" || len(rows) >= maxListRows {
			asAny := make([]any, len(rows))
			for i, r := range rows {
				asAny[i] = r
			}
			return rows, map[string]any{"items": asAny}, nil
		}
		q.Set("cursor", next)
	}
}

func items(answer map[string]any) []map[string]any {
	list, _ := answer["items"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, it := range list {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// table prints rows (the first is the header) in aligned columns.
func (o *clientOptions) table(rows [][]string) error {
	tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// str renders one field of a JSON object for a table cell.
func str(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case map[string]any:
		if at, ok := v["at"].(string); ok {
			return fmt.Sprintf("%s at %s", v["what"], at)
		}
		b, _ := json.Marshal(v)
		return string(b)
	default:
		return fmt.Sprint(v)
	}
}

func marqueeRows(wide bool) func([]map[string]any) [][]string {
	return func(rows []map[string]any) [][]string {
		head := []string{"ID", "KIND", "LIFECYCLE", "SERVING", "GEN", "STATUS"}
		if wide {
			head = append(head, "PROGRESS", "POOL", "NEXT", "UPDATED")
		}
		out := [][]string{head}
		for _, r := range rows {
			row := []string{str(r, "id"), str(r, "kind"), str(r, "lifecycle"), str(r, "serving"), str(r, "generation"), str(r, "status")}
			if wide {
				row = append(row, str(r, "progress"), str(r, "pool"), str(r, "next"), str(r, "updated_at"))
			}
			out = append(out, row)
		}
		return out
	}
}

func envRows(wide bool) func([]map[string]any) [][]string {
	return func(rows []map[string]any) [][]string {
		head := []string{"ID", "BRANCH", "STATE", "DESIRED", "GEN", "STATUS"}
		if wide {
			head = append(head, "REVISION", "URL", "EXPIRES", "NEXT")
		}
		out := [][]string{head}
		for _, r := range rows {
			row := []string{str(r, "id"), str(r, "branch"), str(r, "state"), str(r, "desired"), str(r, "generation"), str(r, "status")}
			if wide {
				row = append(row, str(r, "revision"), str(r, "url"), str(r, "expires_at"), str(r, "next"))
			}
			out = append(out, row)
		}
		return out
	}
}

func poolRows(rows []map[string]any) [][]string {
	out := [][]string{{"NAME", "LIMIT", "RESERVED", "QUEUED"}}
	for _, r := range rows {
		reserved, _ := r["reserved"].([]any)
		queued, _ := r["queued"].([]any)
		out = append(out, []string{str(r, "name"), str(r, "limit"), strconv.Itoa(len(reserved)), strconv.Itoa(len(queued))})
	}
	return out
}

// seedsCmd is `get seeds`: the platform's seeds, each with the previews
// copied from it (P20). A seed is listed, never got alone.
func seedsCmd(o *clientOptions, shared func(*cobra.Command) *cobra.Command) *cobra.Command {
	return shared(&cobra.Command{Use: "seeds", Aliases: typeAliases["seeds"], Short: "list the platform's seeds and the previews copied from each",
		Args: cobra.NoArgs, RunE: func(_ *cobra.Command, _ []string) error {
			rows, answer, err := o.list("/v1/seeds", url.Values{})
			if err != nil {
				return err
			}
			if done, err := o.print(answer); done {
				return err
			}
			out := [][]string{{"NAME", "FINGERPRINT", "PREVIEWS"}}
			for _, r := range rows {
				var previews []string
				previewList, _ := r["previews"].([]any)
				for _, p := range previewList {
					previews = append(previews, fmt.Sprint(p))
				}
				out = append(out, []string{str(r, "name"), str(r, "fingerprint"), orDash(strings.Join(previews, ","))})
			}
			return o.table(out)
		}})
}

func actorRows(rows []map[string]any) [][]string {
	out := [][]string{{"KIND", "ID", "MAILBOX", "RESTARTS", "PARKED", "LAST FAILURE"}}
	for _, r := range rows {
		out = append(out, []string{str(r, "kind"), str(r, "id"), str(r, "mailbox"), str(r, "restarts"), str(r, "parked"), str(r, "last_failure")})
	}
	return out
}

func historyRows(rows []map[string]any) [][]string {
	out := [][]string{{"AT", "SOURCE", "VERB", "GEN", "RECEIVED", "RESULT", "ACTOR", "DETAIL"}}
	for _, r := range rows {
		out = append(out, []string{str(r, "at"), str(r, "source"), str(r, "verb"), str(r, "generation"), str(r, "received_generation"),
			str(r, "result"), str(r, "actor"), str(r, "detail")})
	}
	return out
}

func (o *clientOptions) describeMarquee(id string) error {
	view, err := o.call(http.MethodGet, "/v1/marquees/"+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	hist, err := o.call(http.MethodGet, "/v1/marquees/"+url.PathEscape(id)+"/history?limit=200", nil)
	if err != nil {
		return err
	}
	if done, err := o.print(map[string]any{"marquee": view, "history": hist["items"]}); done {
		return err
	}
	w := o.stdout
	fmt.Fprintf(w, "Marquee:     %s (%s)\n", str(view, "id"), str(view, "kind"))
	fmt.Fprintf(w, "Status:      %s\n", str(view, "status"))
	fmt.Fprintf(w, "Next:        %s\n", orDash(str(view, "next")))
	fmt.Fprintf(w, "Lifecycle:   %s, serving %s, generation %s\n", orDash(str(view, "lifecycle")), str(view, "serving"), str(view, "generation"))
	if a, ok := view["attempt"].(map[string]any); ok {
		fmt.Fprintf(w, "Attempt:     %s of generation %s, dispatch %s", str(a, "action"), str(a, "generation"), str(a, "dispatch"))
		if u := str(a, "run_url"); u != "" {
			fmt.Fprintf(w, ", run %s", u)
		}
		fmt.Fprintln(w)
	}
	if f, ok := view["failure"].(map[string]any); ok {
		fmt.Fprintf(w, "Failure:     %s (%s) at %s\n", str(f, "reason"), str(f, "rule"), str(f, "at"))
	}
	if c, ok := view["connection"].(map[string]any); ok {
		fmt.Fprintf(w, "Connection:  %s@%s:%s, %s (secrets redacted)\n", str(c, "user"), str(c, "host"), str(c, "port"), str(c, "free_domain"))
	}
	fmt.Fprintln(w, "Timeline (oldest first; each generation its band; stale and duplicate callbacks set apart):")
	entries := items(hist)
	// One table for the whole timeline, so that its columns line up
	// across the generations' bands.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	band := ""
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if g := str(e, "generation"); g != band {
			band = g
			fmt.Fprintf(tw, "  -- generation %s --\n", g)
		}
		mark := " "
		switch str(e, "result") {
		case "stale", "duplicate", "locked":
			mark = "x" // set apart: it changed nothing
		}
		who := str(e, "source")
		if a := str(e, "actor"); a != "" && a != who {
			who += " " + a
		}
		fmt.Fprintf(tw, "   %s %s\t%s\t%s\t%s\t%s\n", mark, timelineTime(str(e, "at")), who, str(e, "verb"), str(e, "result"), str(e, "detail"))
	}
	return tw.Flush()
}

// timelineTime is an instant of the timeline at one width, to the
// millisecond (RFC 3339 drops trailing zeros, so its widths vary).
func timelineTime(at string) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return at
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func (o *clientOptions) describeEnv(id string) error {
	view, err := o.call(http.MethodGet, "/v1/environments/"+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	if done, err := o.print(view); done {
		return err
	}
	w := o.stdout
	fmt.Fprintf(w, "Environment: %s (branch %s, revision %s, generation %s)\n", str(view, "id"), str(view, "branch"), str(view, "revision"), str(view, "generation"))
	fmt.Fprintf(w, "Status:      %s\n", str(view, "status"))
	fmt.Fprintf(w, "Next:        %s\n", orDash(str(view, "next")))
	fmt.Fprintf(w, "State:       %s (desired %s)\n", str(view, "state"), str(view, "desired"))
	if u := str(view, "url"); u != "" {
		fmt.Fprintf(w, "URL:         %s\n", u)
	}
	if s := str(view, "data_from"); s != "" {
		fmt.Fprintf(w, "Data from:   seed %s\n", s)
	}
	if s := str(view, "sleep_after"); s != "" {
		fmt.Fprintf(w, "Sleeps:      after %s with no visit (last visit %s)\n", s, orDash(str(view, "last_visit")))
	}
	if s := str(view, "asleep_since"); s != "" {
		fmt.Fprintf(w, "Asleep:      since %s; the next visit to its URL wakes it\n", s)
	}
	if a, ok := view["attempt"].(map[string]any); ok {
		lease, _ := a["lease"].(map[string]any)
		fmt.Fprintf(w, "Attempt:     %s: %s %s %s, leased to %s until %s\n", str(a, "id"), str(a, "op"), str(a, "capability"), str(a, "identity"),
			str(lease, "owner"), str(lease, "expires_at"))
	}
	fmt.Fprintln(w, "Resources (desired | observed):")
	rows := [][]string{{"  CAPABILITY", "IDENTITY", "DESIRED", "OBSERVED"}}
	for _, r := range asMaps(view["resources"]) {
		desired := "present"
		switch {
		case str(view, "desired") == "asleep" && str(r, "capability") == "app":
			desired = "stopped"
		case str(view, "desired") == "asleep" && str(r, "capability") == "route":
			desired = "at the waker"
		case str(view, "desired") != "removed":
		case str(r, "capability") == "artifact":
			desired = "kept" // shared, immutable: removal keeps it on purpose
		default:
			desired = "absent"
		}
		rows = append(rows, []string{"  " + str(r, "capability"), str(r, "identity"), desired, str(r, "status")})
	}
	if err := o.table(rows); err != nil {
		return err
	}
	if drift := asMaps(view["drift"]); len(drift) > 0 {
		fmt.Fprintln(w, "Drift:")
		for _, d := range drift {
			fmt.Fprintf(w, "  %s %s: desired %s, observed %s; outcome %s; resolved %s\n", str(d, "capability"), str(d, "identity"), str(d, "desired"),
				str(d, "observed"), orDash(str(d, "outcome")), orDash(str(d, "resolved_at")))
		}
	}
	if acts, _ := view["actions"].([]any); len(acts) > 0 {
		fmt.Fprintf(w, "Actions:     %s\n", strings.Trim(fmt.Sprint(acts), "[]"))
	}
	if audit := asMaps(view["audit"]); len(audit) > 0 {
		fmt.Fprintln(w, "Audit:")
		for _, a := range audit {
			fmt.Fprintf(w, "  %s %s %s: %s\n", str(a, "at"), str(a, "actor"), str(a, "action"), str(a, "reason"))
		}
	}
	return nil
}

func asMaps(v any) []map[string]any {
	list, _ := v.([]any)
	out := make([]map[string]any, 0, len(list))
	for _, it := range list {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
