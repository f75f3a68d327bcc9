package main

import (
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wardenhq/warden/cmd/internal/previewworld"
	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/testports"
)

// Options of one crash run.
type Options struct {
	Kills    int
	Duration time.Duration
	Seed     int64
	Binary   string
	Log      io.Writer
}

// Report is what a run measured.
type Report struct {
	Seed              int64
	Kills             int
	Restarts          int
	Marquees          int
	AppliedChecked    int // acknowledged callbacks found again after restarts
	AdmissionsChecked int
	Dispatches        int
	SilentVerified    int // silent workflows whose retries fired once each
	Envs              int // preview environments settled and checked at the end
	EnvsChecked       int // environment records found again after restarts
	// EnvResumes counts environments found mid-transition under a killed
	// process's lease after a restart; EnvResumeMax is the longest any of
	// them waited, from the new process being ready to its takeover.
	EnvResumes   int
	EnvResumeMax time.Duration
	// StoreVerified: warden verify found no problem in the store the run
	// left, live and then offline with warden stopped.
	StoreVerified bool
	// LongestCheck is the slowest check after a restart: reads of every
	// marquee, its history, the environments and the pools. It says when
	// the run's own load starves warden (the check's reads are what an
	// operator's would be), which a green run alone does not.
	LongestCheck time.Duration
	Elapsed      time.Duration
}

func (r Report) String() string {
	return fmt.Sprintf("seed=%d kills=%d restarts=%d marquees=%d applied-callbacks-checked=%d admissions-checked=%d dispatches=%d silent-workflows-verified=%d environments=%d environment-records-checked=%d environments-resumed-after-restart=%d longest-resume-wait=%s store-verified=%t longest-check=%s elapsed=%s",
		r.Seed, r.Kills, r.Restarts, r.Marquees, r.AppliedChecked, r.AdmissionsChecked, r.Dispatches, r.SilentVerified, r.Envs, r.EnvsChecked,
		r.EnvResumes, r.EnvResumeMax.Round(time.Millisecond), r.StoreVerified, r.LongestCheck.Round(time.Millisecond), r.Elapsed.Round(time.Second))
}

const (
	cbToken = "crash-callback-token"
	opToken = "crash-operator-token"
	// retries and their wait: short, so that stuck retries and their
	// timers fire many times between kills.
	retryWait  = 300 * time.Millisecond
	retryCount = 6
	poolLimit  = 3
)

type harness struct {
	o     Options
	rnd   *rand.Rand
	rndMu sync.Mutex
	dir   string
	addr  string
	bin   string
	cmd   *exec.Cmd
	// exited is closed when the running process has exited, with
	// exitErr its status.
	exited  chan struct{}
	exitErr error
	// readyAt is when the running process first answered /readyz.
	readyAt time.Time
	client  *http.Client
	gh      *httptest.Server
	stop    atomic.Bool

	mu         sync.Mutex
	dispatches testkit.Dispatches
	applied    map[string][]string // marquee -> delivery ids answered applied
	created    []string            // marquees whose create was answered 201
	silent     map[string]bool
	seq        atomic.Uint64
	envs       []*previewworld.Env
	wg         sync.WaitGroup
	// previewBin is the reference environment driver (examples/preview).
	previewBin string
	logMu      sync.Mutex
}

func (h *harness) logf(format string, args ...any) {
	if h.o.Log == nil {
		return
	}
	h.logMu.Lock()
	defer h.logMu.Unlock()
	fmt.Fprintf(h.o.Log, format+"\n", args...)
}

func (h *harness) intn(n int) int {
	h.rndMu.Lock()
	defer h.rndMu.Unlock()
	return h.rnd.Intn(n)
}

// Run runs one crash test.
// Long: the crash test's script, read top to bottom as it runs.
func Run(o Options) (_ Report, runErr error) {
	start := time.Now()
	h := &harness{o: o, rnd: rand.New(rand.NewSource(o.Seed)),
		applied: map[string][]string{}, silent: map[string]bool{},
		client: &http.Client{Timeout: 5 * time.Second}}
	rep := Report{Seed: o.Seed}
	var err error
	if h.dir, err = os.MkdirTemp("", "warden-crash"); err != nil {
		return rep, err
	}
	defer func() {
		if runErr != nil {
			// The server's log says why: kept with the data for a look.
			runErr = fmt.Errorf("%w\n(kept for inspection: %s; warden's log: %s)", runErr, h.dir, filepath.Join(h.dir, "warden.log"))
			return
		}
		os.RemoveAll(h.dir)
	}()
	if h.bin = o.Binary; h.bin == "" {
		if h.bin, err = testkit.BuildWarden(h.dir); err != nil {
			return rep, err
		}
	}
	if h.previewBin, err = previewworld.BuildDriver(h.dir); err != nil {
		return rep, err
	}
	defer previewworld.StopApps(filepath.Join(h.dir, "preview"))
	// The process restarts on one port for the whole run: one that no
	// other process can be handed while it is down.
	if h.addr, err = testports.StablePort(); err != nil {
		return rep, err
	}
	h.gh = httptest.NewServer(http.HandlerFunc(h.github))
	defer h.gh.Close()
	okScript, err := testkit.OKScript(h.dir)
	if err != nil {
		return rep, err
	}
	if err := h.startWarden(okScript); err != nil {
		return rep, err
	}
	defer func() {
		if h.cmd != nil {
			_ = h.cmd.Process.Kill()
			<-h.exited
		}
	}()

	// Clients: operators create, redeploy and destroy; workflows call back
	// (started by the fake GitHub on each dispatch).
	h.wg.Add(2)
	go h.operators()
	go h.envOperators()

	deadline := time.Now().Add(o.Duration)
	for kill := 1; ; kill++ {
		if o.Kills > 0 && kill > o.Kills || o.Kills == 0 && time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Duration(150+h.intn(700)) * time.Millisecond)
		if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return rep, err
		}
		<-h.exited
		rep.Kills++
		if err := h.startWarden(okScript); err != nil {
			return rep, fmt.Errorf("restart after kill %d: %w", kill, err)
		}
		rep.Restarts++
		h.logf("kill %d: restarted", kill)
		checkStart := time.Now()
		if err := h.check(&rep, false); err != nil {
			return rep, fmt.Errorf("after kill %d: %w", kill, err)
		}
		rep.LongestCheck = max(rep.LongestCheck, time.Since(checkStart))
	}
	// Quiet phase: no more kills and no new work; every timer may fire.
	h.stop.Store(true)
	h.wg.Wait()
	time.Sleep(time.Duration(retryCount+3) * (retryWait + 150*time.Millisecond))
	if err := h.check(&rep, true); err != nil {
		return rep, fmt.Errorf("after the quiet phase: %w", err)
	}
	if err := h.settleEnvs(&rep); err != nil {
		return rep, fmt.Errorf("environments after the quiet phase: %w", err)
	}
	if err := h.verifyStore(); err != nil {
		return rep, fmt.Errorf("D6, after the run: %w", err)
	}
	rep.StoreVerified = true
	h.mu.Lock()
	rep.Marquees = len(h.created)
	h.mu.Unlock()
	rep.Dispatches = h.dispatches.Total()
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// verifyStore runs warden verify on the store the kills left: --live
// against the running warden, then, once it stopped cleanly, offline with
// the timings it ran with.
func (h *harness) verifyStore() error {
	env := append(os.Environ(), "WARDEN_OPERATOR_TOKEN="+opToken)
	live := exec.Command(h.bin, "verify", "--live", "--server", "http://"+h.addr)
	live.Env = env
	if out, err := live.CombinedOutput(); err != nil {
		return fmt.Errorf("warden verify --live: %v\n%s", err, out)
	}
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	<-h.exited
	if h.exitErr != nil {
		return fmt.Errorf("warden did not stop cleanly: %v", h.exitErr)
	}
	retry := make([]string, retryCount)
	for i := range retry {
		retry[i] = retryWait.String()
	}
	offline := exec.Command(h.bin, "verify", "--data", filepath.Join(h.dir, "data"), "--pool", fmt.Sprintf("default=%d", poolLimit),
		"--stale-after", "1s", "--retry-backoff", strings.Join(retry, ","), "--provisioning-timeout", "1m")
	offline.Env = env
	if out, err := offline.CombinedOutput(); err != nil {
		return fmt.Errorf("warden verify --data: %v\n%s", err, out)
	}
	return nil
}

func (h *harness) startWarden(script string) error {
	retry := make([]string, retryCount)
	for i := range retry {
		retry[i] = retryWait.String()
	}
	h.cmd = exec.Command(h.bin, "serve", "--listen", h.addr, "--data", filepath.Join(h.dir, "data"),
		"--dispatch", "github", "--github-api-url", h.gh.URL, "--github-repo", "acme/infra",
		"--bootstrap", "exec", "--bootstrap-command", script, "--pool", fmt.Sprintf("default=%d", poolLimit),
		"--stale-after", "1s", "--retry-backoff", strings.Join(retry, ","), "--provisioning-timeout", "1m",
		"--log-format", "json", "--driver-env", "WARDEN_PREVIEW_DIR")
	h.cmd.Args = append(h.cmd.Args, h.envArgs()...)
	h.cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN="+cbToken, "WARDEN_OPERATOR_TOKEN="+opToken, "WARDEN_GITHUB_TOKEN=gh",
		"WARDEN_PREVIEW_DIR="+filepath.Join(h.dir, "preview"))
	logf, err := os.OpenFile(filepath.Join(h.dir, "warden.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	if err := h.cmd.Start(); err != nil {
		return err
	}
	cmd, exited := h.cmd, make(chan struct{})
	h.exited = exited
	go func() { h.exitErr = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("warden exited while starting (%v); the end of its log:\n%s", h.exitErr, testkit.Tail(filepath.Join(h.dir, "warden.log"), 20))
		default:
		}
		if st, _, err := h.do("GET", "/readyz", "", nil, ""); err == nil && st == 200 {
			h.readyAt = time.Now()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("warden did not become ready in 20 s; the end of its log:\n%s", testkit.Tail(filepath.Join(h.dir, "warden.log"), 20))
}

func (h *harness) do(method, path, token string, body any, delivery string) (int, map[string]any, error) {
	return testkit.Do(h.client, "http://"+h.addr, method, path, token, body, delivery)
}

// github is the fake GitHub Actions API. Each dispatch is recorded (I2) and
// starts a workflow run that calls back, unless the marquee is silent.
func (h *harness) github(w http.ResponseWriter, r *http.Request) {
	d, ok := h.dispatches.Record(w, r)
	if !ok {
		return
	}
	if !h.isSilent(d.Marquee) && !h.stop.Load() {
		h.wg.Add(1)
		go h.workflow(d.Marquee, d.Generation, d.Action)
	}
}

// workflow plays one run: steps then deployed (or destroyed), sometimes a
// stale callback, sometimes a duplicate delivery. Each callback is retried
// with the same Webhook-Id until answered, as a webhook sender does.
func (h *harness) workflow(id string, gen uint64, action string) {
	defer h.wg.Done()
	send := func(body map[string]any) {
		body["marquee_id"] = id
		delivery := fmt.Sprintf("%s-g%d-%d", id, gen, h.seq.Add(1))
		for attempt := 0; attempt < 200 && !h.stop.Load(); attempt++ {
			st, ans, err := h.do("POST", "/v1/webhooks/terraform", cbToken, body, delivery)
			if err == nil && st == 200 {
				if ans["result"] == "applied" {
					h.mu.Lock()
					h.applied[id] = append(h.applied[id], delivery)
					h.mu.Unlock()
				}
				if h.intn(6) == 0 { // a duplicate delivery gets the same answer
					_, _, _ = h.do("POST", "/v1/webhooks/terraform", cbToken, body, delivery)
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(time.Duration(20+h.intn(200)) * time.Millisecond)
	if action == "destroy" {
		send(map[string]any{"verb": "destroyed", "generation": gen})
		return
	}
	for _, step := range []string{"vm_starting", "tls_provisioning"} {
		send(map[string]any{"verb": "step", "generation": gen, "step": step})
		time.Sleep(time.Duration(h.intn(100)) * time.Millisecond)
	}
	if gen > 1 && h.intn(4) == 0 { // a superseded attempt reports late
		send(map[string]any{"verb": "deployed", "generation": gen - 1, "connection": conn(gen - 1)})
	}
	send(map[string]any{"verb": "deployed", "generation": gen, "connection": conn(gen)})
}

// conn encodes the generation in the host, so I1 can be checked from the view.
func conn(gen uint64) map[string]any {
	return map[string]any{"host": fmt.Sprintf("h-%d", gen), "port": 22, "user": "root", "ssh_private_key": "k", "free_domain": "x.example"}
}

func (h *harness) operators() {
	defer h.wg.Done()
	n := 0
	for !h.stop.Load() {
		time.Sleep(time.Duration(30+h.intn(120)) * time.Millisecond)
		h.mu.Lock()
		created := append([]string(nil), h.created...)
		h.mu.Unlock()
		switch r := h.intn(10); {
		case r < 4 && n < 60:
			n++
			id := fmt.Sprintf("m-%03d", n)
			silent := n%6 == 0 // a workflow that never calls back: stuck retries, then failed
			h.mu.Lock()
			h.silent[id] = silent
			h.mu.Unlock()
			st, _, err := h.do("POST", "/v1/marquees", opToken, map[string]any{"id": id, "kind": "tutorial"}, "")
			if err == nil && (st == 201 || st == 409) {
				// 409: an earlier try was durable but its answer was lost.
				h.mu.Lock()
				h.created = append(h.created, id)
				h.mu.Unlock()
			}
		case r < 7 && len(created) > 0:
			id := created[h.intn(len(created))]
			if h.isSilent(id) {
				continue
			}
			_, _, _ = h.do("POST", "/v1/marquees/"+id+"/redeploy", opToken, nil, "")
		case r < 8 && len(created) > 0:
			id := created[h.intn(len(created))]
			if h.isSilent(id) {
				continue
			}
			_, _, _ = h.do("POST", "/v1/marquees/"+id+"/destroy", opToken, nil, "")
		}
	}
}

func (h *harness) isSilent(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.silent[id]
}

// check verifies the invariants against the ledger of acknowledged answers.
func (h *harness) check(rep *Report, final bool) error {
	h.mu.Lock()
	created := append([]string(nil), h.created...)
	applied := map[string][]string{}
	for k, v := range h.applied {
		applied[k] = append([]string(nil), v...)
	}
	h.mu.Unlock()
	if err := h.dispatches.Twice(); err != nil {
		return err
	}
	for _, id := range created {
		st, v, err := h.do("GET", "/v1/marquees/"+id, opToken, nil, "")
		if err != nil || st != 200 {
			return fmt.Errorf("I10: marquee %s was answered 201 and is gone (status %d, %v)", id, st, err)
		}
		rep.AdmissionsChecked++
		if v["serving"] == "active" {
			c, _ := v["connection"].(map[string]any)
			if want := fmt.Sprintf("h-%d", uint64(v["generation"].(float64))); c == nil || c["host"] != want {
				return fmt.Errorf("I1: %s is active at generation %v with host %v", id, v["generation"], c["host"])
			}
		}
		_, hist, err := h.do("GET", fmt.Sprintf("/v1/marquees/%s/history?limit=%d", id, testkit.HistoryPage), opToken, nil, "")
		if err != nil {
			return err
		}
		checked, err := testkit.AppliedFound(id, hist, applied[id])
		if err != nil {
			return err
		}
		rep.AppliedChecked += checked
		items, _ := hist["items"].([]any)
		retries := map[string]int{}
		for _, it := range items {
			if e := it.(map[string]any); e["verb"] == "retry" {
				retries[fmt.Sprint(e["detail"])]++
			}
		}
		if final && h.isSilent(id) {
			for detail, n := range retries {
				if n > 1 {
					return fmt.Errorf("M23: %s: %q fired %d times", id, detail, n)
				}
			}
			if v["lifecycle"] == "failed" {
				if len(retries) != retryCount+1 { // six retries and the final verdict
					return fmt.Errorf("M21: silent %s failed after %d timer decisions, want %d", id, len(retries), retryCount+1)
				}
				rep.SilentVerified++
			}
		}
	}
	if err := h.checkEnvs(rep); err != nil {
		return err
	}
	// Pools: I7 at once; I9 once recovery has reconciled reserved jobs.
	var lastErr error
	for try := 0; try < 100; try++ {
		lastErr = h.checkPool()
		if lastErr == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return lastErr
}

func (h *harness) checkPool() error {
	st, p, err := h.do("GET", "/v1/pools/default", opToken, nil, "")
	if err != nil || st != 200 {
		return fmt.Errorf("pool: %d %v", st, err)
	}
	reserved, _ := p["reserved"].([]any)
	queued, _ := p["queued"].([]any)
	if len(reserved) > poolLimit {
		return fmt.Errorf("I7: %d reserved, limit %d", len(reserved), poolLimit)
	}
	seen := map[string]bool{}
	for _, j := range append(append([]any(nil), reserved...), queued...) {
		id := j.(map[string]any)["job"].(string)
		if seen[id] {
			return fmt.Errorf("I9: %s holds two places", id)
		}
		seen[id] = true
	}
	for _, j := range reserved {
		id := j.(map[string]any)["job"].(string)
		_, v, err := h.do("GET", "/v1/marquees/"+id, opToken, nil, "")
		if err != nil {
			return err
		}
		if l := v["lifecycle"]; l == "provisioned" || l == "destroyed" || l == "failed" {
			return fmt.Errorf("I9: settled marquee %s (%v) holds a slot", id, l)
		}
	}
	return nil
}
