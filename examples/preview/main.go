// Command example-preview is the reference driver set for preview
// environments, runnable on one machine without Docker: artifacts are
// manifest files, databases are directories with an owner file and a
// migration ledger, applications are local processes on a local port, and
// routes are files mapping a branch to a generation and a port.
//
//	example-preview          one driver call: a CapabilityRequest as JSON on
//	                         stdin, a CapabilityResult as JSON on stdout
//	example-preview serve    the preview application itself (started by the
//	                         app capability): PORT, ENV_ID, REVISION
//	example-preview stop     stop every application started under
//	                         WARDEN_PREVIEW_DIR (make run's Ctrl-C): the
//	                         next start finds them gone and starts them
//	                         again, as drift
//
// State lives under WARDEN_PREVIEW_DIR (default ./data/preview). Break an
// environment by hand to see warden notice: kill its process (apps/*.json
// has the pid) or edit its route (routes/<branch>.json).
// WARDEN_PREVIEW_APPLY_DELAY (a duration) slows every apply by that much
// before it acts: a crash test's window mid-effect.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type request struct {
	Capability      string `json:"capability"`
	Op              string `json:"op"`
	EnvID           string `json:"env_id"`
	Identity        string `json:"identity"`
	AttemptID       string `json:"attempt_id"`
	LeaseGeneration uint64 `json:"lease_generation"`
	Generation      uint64 `json:"generation"`
	ExpectedRoute   uint64 `json:"expected_route"`
	Branch          string `json:"branch"`
	Revision        string `json:"revision"`
}

type observation struct {
	Exists      bool   `json:"exists"`
	Owner       string `json:"owner,omitempty"`
	Matches     bool   `json:"matches"`
	ProviderID  string `json:"provider_id,omitempty"`
	RouteTarget uint64 `json:"route_target,omitempty"`
	URL         string `json:"url,omitempty"`
	Detail      string `json:"detail,omitempty"`
}

type result struct {
	OK          bool         `json:"ok"`
	Category    string       `json:"category,omitempty"`
	Message     string       `json:"message,omitempty"`
	Observation *observation `json:"observation,omitempty"`
}

// migrations is the schema this example's database must reach.
var migrations = []string{"0001_create_items", "0002_add_search_index", "0003_seed_fixtures"}

func main() {
	root := os.Getenv("WARDEN_PREVIEW_DIR")
	if root == "" {
		root = filepath.Join("data", "preview")
	}
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		serve()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "stop" {
		drivers{root: root}.stopAll()
		return
	}
	var r request
	if err := json.NewDecoder(io.LimitReader(os.Stdin, 64<<10)).Decode(&r); err != nil {
		fail("configuration", "request: "+err.Error())
	}
	d := drivers{root: root}
	res, err := d.fenced(r)
	if err != nil {
		fail("transient", err.Error())
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

// fail is one scoped failure: a category on stdout, the story on stderr,
// a non-zero exit.
func fail(category, msg string) {
	_ = json.NewEncoder(os.Stdout).Encode(result{Category: category, Message: msg})
	fmt.Fprintln(os.Stderr, "example-preview:", msg)
	os.Exit(2)
}

type drivers struct{ root string }

func (d drivers) path(parts ...string) string {
	return filepath.Join(append([]string{d.root}, parts...)...)
}

// fenced runs an effect under the environment's fence: the newest
// lease generation any call for it has carried is kept in a file, and an
// effect under an older one is refused, so a worker that paused past its
// lease (or a driver process that outlived a killed warden) cannot act
// after a takeover. The check and the effect hold an exclusive lock on the
// fence, so they cannot interleave with another call's. Observations never
// change anything and are not fenced.
func (d drivers) fenced(r request) (result, error) {
	if !validName(r.EnvID) || !validName(r.Identity) || !validName(r.Branch) {
		return result{Category: "configuration", Message: "env_id, identity and branch must be plain names"}, nil
	}
	if r.Op == "observe" {
		return d.do(r)
	}
	if delay, err := time.ParseDuration(os.Getenv("WARDEN_PREVIEW_APPLY_DELAY")); err == nil && r.Op == "apply" {
		time.Sleep(min(delay, time.Minute))
	}
	p := d.path("fences", r.EnvID)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return result{}, err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return result{}, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return result{}, err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	raw, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return result{}, err
	}
	newest, _ := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if r.LeaseGeneration < newest {
		return result{Category: "conflict", Message: fmt.Sprintf("lease generation %d is obsolete (newest %d)", r.LeaseGeneration, newest)}, nil
	}
	if r.LeaseGeneration > newest {
		if err := f.Truncate(0); err != nil {
			return result{}, err
		}
		if _, err := f.WriteAt([]byte(strconv.FormatUint(r.LeaseGeneration, 10)), 0); err != nil {
			return result{}, err
		}
	}
	return d.do(r)
}

// validName keeps a name from the request a plain file name here: 1 to
// 128 of [A-Za-z0-9._-], not starting with a dot.
func validName(n string) bool {
	if n == "" || len(n) > 128 || n[0] == '.' {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// do is the example's whole driver protocol: one case per capability and
// operation, kept together for a reader who writes their own driver.
// Long: the protocol read as one switch.
func (d drivers) do(r request) (result, error) {
	switch r.Capability + "/" + r.Op {
	case "artifact/apply":
		// "Build": write the manifest once; a rebuild of the same revision
		// finds it.
		p := d.path("artifacts", r.Identity, "manifest.json")
		if _, err := os.Stat(p); err == nil {
			return result{OK: true}, nil
		}
		return result{OK: true}, writeJSON(p, map[string]string{"revision": r.Revision})
	case "artifact/observe":
		var m map[string]string
		err := readJSON(d.path("artifacts", r.Identity, "manifest.json"), &m)
		return observed(err == nil, "", err == nil && m["revision"] == r.Revision, "manifest "+m["revision"]), nil
	case "database/apply":
		dir := d.path("databases", r.Identity)
		if owner, err := os.ReadFile(filepath.Join(dir, "owner")); err == nil {
			_ = owner // create-or-find: the controller checks the owner by observing
			return result{OK: true}, nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return result{}, err
		}
		return result{OK: true}, os.WriteFile(filepath.Join(dir, "owner"), []byte(r.EnvID), 0o644)
	case "database/observe":
		owner, err := os.ReadFile(d.path("databases", r.Identity, "owner"))
		return observed(err == nil, string(owner), err == nil, "owner "+string(owner)), nil
	case "database/remove":
		owner, err := os.ReadFile(d.path("databases", r.Identity, "owner"))
		if err == nil && string(owner) == r.EnvID {
			return result{OK: true}, os.RemoveAll(d.path("databases", r.Identity))
		}
		return result{OK: true}, nil // absent, or not ours: never removed
	case "migrations/apply":
		ledger := d.ledger(r.Identity)
		f, err := os.OpenFile(d.path("databases", r.Identity, "ledger"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		for _, m := range migrations[len(ledger):] {
			if _, err := fmt.Fprintln(f, m); err != nil {
				return result{}, err
			}
		}
		return result{OK: true}, nil
	case "migrations/observe":
		ledger := d.ledger(r.Identity)
		return observed(len(ledger) > 0, r.EnvID, strings.Join(ledger, ",") == strings.Join(migrations, ","), strings.Join(ledger, ",")), nil
	case "migrations/remove":
		// The ledger of a database that is ours goes first, then the database.
		if owner, err := os.ReadFile(d.path("databases", r.Identity, "owner")); err == nil && string(owner) == r.EnvID {
			if err := os.Remove(d.path("databases", r.Identity, "ledger")); err != nil && !os.IsNotExist(err) {
				return result{}, err
			}
		}
		return result{OK: true}, nil
	case "app/apply", "smoke/apply":
		if r.Capability == "smoke" {
			return result{OK: true}, nil // the check is the observation
		}
		if a, alive := d.app(r.Identity); alive && a.Owner == r.EnvID {
			return result{OK: true}, nil
		}
		return result{OK: true}, d.start(r)
	case "app/observe":
		a, alive := d.app(r.Identity)
		if !alive {
			return observed(false, "", false, "no process"), nil
		}
		body, err := get(a.Port, "/health")
		return observed(true, a.Owner, err == nil && strings.Contains(body, r.Revision), "pid "+strconv.Itoa(a.PID)+": "+body), nil
	case "app/remove":
		if a, alive := d.app(r.Identity); alive && a.Owner == r.EnvID {
			_ = syscall.Kill(a.PID, syscall.SIGTERM)
		}
		_ = os.Remove(d.path("apps", r.Identity+".json"))
		return result{OK: true}, nil
	case "route/apply":
		// Compare-and-set on the generation the route had.
		var cur routeFile
		_ = readJSON(d.path("routes", r.Branch+".json"), &cur)
		if cur.Generation > r.ExpectedRoute && cur.Generation != r.Generation {
			return result{OK: true}, nil // someone else's generation: the observation will say so
		}
		a, _ := d.app("app-" + r.EnvID)
		return result{OK: true}, writeJSON(d.path("routes", r.Branch+".json"), routeFile{Generation: r.Generation, Env: r.EnvID, Port: a.Port})
	case "route/observe":
		// The route as it is: the environment it names, its generation and
		// its upstream (the provider id warden compares with the one it
		// recorded: a port changed by hand is drift). Whether anything
		// answers there is the application's observation, not the route's.
		var cur routeFile
		err := readJSON(d.path("routes", r.Branch+".json"), &cur)
		res := observed(err == nil, cur.Env, err == nil && cur.Port > 0, fmt.Sprintf("generation %d -> %s:%d", cur.Generation, cur.Env, cur.Port))
		res.Observation.RouteTarget = cur.Generation
		if cur.Port > 0 {
			res.Observation.ProviderID = fmt.Sprintf("127.0.0.1:%d", cur.Port)
		}
		if cur.Port > 0 {
			res.Observation.URL = fmt.Sprintf("http://127.0.0.1:%d/", cur.Port) // where this route serves the preview (W8)
		}
		return res, nil
	case "route/remove":
		var cur routeFile
		if err := readJSON(d.path("routes", r.Branch+".json"), &cur); err == nil && cur.Generation == r.Generation {
			_ = os.Remove(d.path("routes", r.Branch+".json"))
		}
		return result{OK: true}, nil
	case "smoke/observe":
		var cur routeFile
		if err := readJSON(d.path("routes", r.Branch+".json"), &cur); err != nil {
			return observed(false, "", false, "no route"), nil
		}
		body, err := get(cur.Port, "/")
		res := observed(err == nil, cur.Env, err == nil && cur.Env == r.EnvID && strings.Contains(body, r.Revision), body)
		res.Observation.RouteTarget = cur.Generation // a newer preview may hold the hostname by now
		return res, nil
	}
	return result{Category: "configuration", Message: "unsupported " + r.Capability + "/" + r.Op}, nil
}

func observed(exists bool, owner string, matches bool, detail string) result {
	return result{OK: true, Observation: &observation{Exists: exists, Owner: owner, Matches: matches, Detail: detail}}
}

func (d drivers) ledger(db string) []string {
	b, err := os.ReadFile(d.path("databases", db, "ledger"))
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

type appFile struct {
	PID   int    `json:"pid"`
	Port  int    `json:"port"`
	Owner string `json:"owner"`
}

type routeFile struct {
	Generation uint64 `json:"generation"`
	Env        string `json:"env"`
	Port       int    `json:"port"`
}

func (d drivers) app(identity string) (appFile, bool) {
	var a appFile
	if err := readJSON(d.path("apps", identity+".json"), &a); err != nil || a.PID == 0 {
		return a, false
	}
	return a, syscall.Kill(a.PID, 0) == nil
}

// stopAll stops every application this preview directory started and
// waits, a few seconds at most, until each is gone. A pid is only
// signalled while it is still an example-preview serve (a pid reused by
// another process is left alone).
func (d drivers) stopAll() {
	files, _ := filepath.Glob(d.path("apps", "*.json"))
	var stopping []int
	for _, f := range files {
		var a appFile
		if readJSON(f, &a) != nil || a.PID == 0 || !isPreviewApp(a.PID) {
			continue
		}
		if syscall.Kill(a.PID, syscall.SIGTERM) == nil {
			stopping = append(stopping, a.PID)
		}
	}
	for _, pid := range stopping {
		for i := 0; i < 100 && isPreviewApp(pid); i++ {
			time.Sleep(30 * time.Millisecond)
		}
	}
	if len(stopping) > 0 {
		fmt.Fprintf(os.Stderr, "example-preview: stopped %d preview application(s) under %s\n", len(stopping), d.root)
	}
}

// isPreviewApp reports whether pid is a live example-preview serve.
func isPreviewApp(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// A zombie (state Z) is gone; it only waits for its parent.
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
	}
	args := strings.Split(string(cmdline), "\x00")
	return len(args) > 1 && strings.HasSuffix(args[0], "example-preview") && args[1] == "serve"
}

// start runs the application as a detached local process on a free port.
func (d drivers) start(r request) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "serve")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "ENV_ID="+r.EnvID, "REVISION="+r.Revision)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	a := appFile{PID: cmd.Process.Pid, Port: port, Owner: r.EnvID}
	_ = cmd.Process.Release()
	// Give it a moment; readiness is the controller's observation anyway.
	for i := 0; i < 20; i++ {
		if _, err := get(port, "/health"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return writeJSON(d.path("apps", r.Identity+".json"), a)
}

func serve() {
	env, rev := os.Getenv("ENV_ID"), os.Getenv("REVISION")
	http.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "ok %s\n", rev) })
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "preview %s at revision %s\n", env, rev) })
	srv := &http.Server{Addr: "127.0.0.1:" + os.Getenv("PORT"), ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func get(port int, path string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != 200 {
		return string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return strings.TrimSpace(string(b)), nil
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func writeJSON(p string, v any) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(v)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
