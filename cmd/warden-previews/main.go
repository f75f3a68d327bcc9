// Command warden-previews is `make previews` (docs/rules/platform.md P2,
// P15, P18): it starts, on one machine with nothing set up, a throwaway
// PostgreSQL cluster under the data directory on a pinned address, Caddy
// with its admin API on loopback and its config under the data directory,
// the example application's build context, and warden on the local
// platform; it says each step as it starts it, and stops all of it on
// Ctrl-C (SIGINT or SIGTERM): warden, the preview containers of this
// platform, Caddy and PostgreSQL. The next start brings the previews back
// through warden's own repair. Arguments after the flags go to `warden
// serve` as they are.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wardenhq/warden/internal/driver/local/pgcluster"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "make previews:", err)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		os.Exit(1)
	}
}

// options are the pinned addresses (P2, P15), from the environment as
// `make previews` passes them.
type options struct {
	listen, previewListen, caddyAdmin, pgListen, data, warden, source string
	serve                                                             []string
	clean                                                             bool
}

func parse(args []string, getenv func(string) string) (options, error) {
	or := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("warden-previews", flag.ContinueOnError)
	o := options{}
	fs.StringVar(&o.listen, "listen", or("LISTEN", "127.0.0.1:8080"), "where warden listens (LISTEN)")
	fs.StringVar(&o.previewListen, "preview-listen", or("PREVIEW_LISTEN", "127.0.0.1:8088"), "where Caddy serves the previews (PREVIEW_LISTEN)")
	fs.StringVar(&o.caddyAdmin, "caddy-admin", or("CADDY_ADMIN", "127.0.0.1:2019"), "Caddy's admin API (CADDY_ADMIN)")
	fs.StringVar(&o.pgListen, "pg-listen", or("PG_LISTEN", "127.0.0.1:5433"), "where PostgreSQL listens (PG_LISTEN), the same on every start so that the previews' connection strings stay true")
	fs.StringVar(&o.data, "data", or("DATA", "./data"), "data directory (DATA); the platform's parts live under <data>/previews")
	fs.StringVar(&o.warden, "warden", "bin/warden", "the warden binary")
	fs.StringVar(&o.source, "source", "examples/previewapp", "the application previewed: its Go main, Containerfile and migrations")
	fs.BoolVar(&o.clean, "clean", false, "remove what make previews left (make previews-clean): its containers, their images, the PostgreSQL cluster and <data>/previews")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.serve = fs.Args()
	return o, nil
}

// parts is what a run started, stopped in reverse.
type parts struct {
	out      io.Writer
	pg       *pgcluster.Cluster
	caddy    *exec.Cmd
	podman   []string // podman and its options, for the containers it stops
	instance string   // the label on this platform's containers
}

// say prints one step as it starts, or what it found.
func (p *parts) say(format string, args ...any) {
	fmt.Fprintf(p.out, "make previews: "+format+"\n", args...)
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parse(args, getenv)
	if err != nil {
		return err
	}
	if err := missingParts(); err != nil {
		return err
	}
	base, err := filepath.Abs(filepath.Join(o.data, "previews"))
	if err != nil {
		return err
	}
	p := &parts{out: stdout, instance: instanceOf(base)}
	if o.clean {
		return p.clean(base)
	}
	defer p.stop()
	serve, err := p.start(base, o)
	if err != nil {
		return err
	}
	p.say("starting warden on http://%s (stop everything with Ctrl-C)", o.listen)
	return runWarden(o.warden, serve, "http://"+o.listen, p, stdout, stderr)
}

// start starts PostgreSQL and Caddy and builds the application's
// context; it returns `warden serve`'s arguments on them.
func (p *parts) start(base string, o options) ([]string, error) {
	if err := p.startPostgres(base, o); err != nil {
		return nil, err
	}
	p.say("starting Caddy: admin API on %s, previews at http://<branch>.localhost:%s/", o.caddyAdmin, portOf(o.previewListen))
	if err := p.startCaddy(filepath.Join(base, "caddy"), o); err != nil {
		return nil, fmt.Errorf("caddy: %w", err)
	}
	app := filepath.Join(base, "app")
	p.say("building the application %s (go build; about a minute the first time, seconds after)", o.source)
	if err := buildContext(o.source, app); err != nil {
		return nil, fmt.Errorf("the application: %w", err)
	}
	podmanOptions, podmanNote := podmanOptions()
	p.podman = append([]string{"podman"}, strings.Fields(podmanOptions)...)
	p.say("podman %s; each preview's image is built when the preview is created", podmanNote)
	return append([]string{"serve", "--listen", o.listen, "--data", o.data, "--env-platform", "local",
		"--platform-postgres", p.pg.DSN("postgres"), "--platform-app", app, "--platform-migrations", filepath.Join(o.source, "migrations"),
		"--platform-podman-options", podmanOptions, "--platform-podman-run", "--network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024",
		"--platform-caddy-admin", "http://" + o.caddyAdmin, "--platform-preview-listen", o.previewListen, "--platform-preview-domain", "localhost",
		"--platform-instance", p.instance,
		// Caddy writes the previews' access log beside its own: a preview
		// created with sleep_after sleeps once no one visits it (E19).
		"--platform-access-log", filepath.Join(base, "caddy", "access.log")}, o.serve...), nil
}

// startPostgres starts the cluster on its pinned address, saying
// whether it initialises one first.
func (p *parts) startPostgres(base string, o options) error {
	pgDir, err := clusterDir(base)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(o.pgListen)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || host != "127.0.0.1" || n <= 0 {
		return fmt.Errorf("PG_LISTEN %q: want 127.0.0.1:<port>", o.pgListen)
	}
	if l, err := net.Listen("tcp", o.pgListen); err != nil {
		return fmt.Errorf("PostgreSQL's address %s is taken (another PostgreSQL, or another make previews?): give it a free one, e.g. PG_LISTEN=%s make previews", o.pgListen, suggestAddr())
	} else {
		l.Close()
	}
	if !pgcluster.Initialized(pgDir) {
		p.say("initialising PostgreSQL's cluster in %s (first start only, a few seconds)", pgDir)
	}
	p.say("starting PostgreSQL on %s", o.pgListen)
	if p.pg, err = pgcluster.StartOn(pgDir, "warden", n); err != nil {
		return fmt.Errorf("postgres on PG_LISTEN %s (another make previews running?): %w", o.pgListen, err)
	}
	p.say("PostgreSQL on 127.0.0.1:%d, its cluster in %s", p.pg.Port(), pgDir)
	return nil
}

// suggestAddr is a loopback address free now, to suggest.
func suggestAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:<port>"
	}
	defer l.Close()
	return l.Addr().String()
}

// instanceOf names this platform after its data directory: its
// containers are labelled with it, and only those are stopped on Ctrl-C.
func instanceOf(base string) string {
	sum := sha256.Sum256([]byte(base))
	return "previews-" + hex.EncodeToString(sum[:6])
}

// clusterDir is where the PostgreSQL cluster lives: under the data
// directory, run by the same user. As root, PostgreSQL runs as the
// postgres user, who may not enter the data directory (warden keeps it
// 0700), so the cluster lives in a directory of its own under /var/tmp,
// named after the data directory, and that is said.
func clusterDir(base string) (string, error) {
	if os.Geteuid() != 0 {
		return filepath.Join(base, "postgres"), nil
	}
	sum := sha256.Sum256([]byte(base))
	parent := filepath.Join("/var/tmp", "warden-previews-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return "", err
	}
	if err := os.Chmod(parent, 0o711); err != nil { // traversable by the postgres user, not readable
		return "", err
	}
	return filepath.Join(parent, "postgres"), nil
}

// missingParts names the Debian package of each part that is not here.
func missingParts() error {
	var missing []string
	if _, err := pgcluster.Find(); err != nil {
		missing = append(missing, "postgresql")
	}
	for _, bin := range []string{"caddy", "podman", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing parts; install them with: apt-get install -y %s", strings.Join(missing, " "))
	}
	return nil
}

// startCaddy runs Caddy with its config and autosave under dir: resumed
// from the autosave when there is one, so that a restart keeps the routes
// (P7).
func (p *parts) startCaddy(dir string, o options) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	args := []string{"run", "--resume"}
	if _, err := os.Stat(filepath.Join(dir, "config", "caddy", "autosave.json")); err != nil {
		cfg := map[string]any{"admin": map[string]any{"listen": o.caddyAdmin}, "apps": map[string]any{"http": map[string]any{"servers": map[string]any{
			"previews": map[string]any{"listen": []string{o.previewListen}, "routes": []any{}, "automatic_https": map[string]any{"disable": true}}}}}}
		b, _ := json.Marshal(cfg)
		if err := os.WriteFile(filepath.Join(dir, "caddy.json"), b, 0o600); err != nil {
			return err
		}
		args = []string{"run", "--config", filepath.Join(dir, "caddy.json")}
	}
	log, err := os.OpenFile(filepath.Join(dir, "caddy.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	c := exec.Command("caddy", args...)
	c.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"))
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stopped by stop, after warden
	if err := c.Start(); err != nil {
		return err
	}
	p.caddy = c
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + o.caddyAdmin + "/config/"); err == nil {
			resp.Body.Close()
			return nil
		}
	}
	return fmt.Errorf("its admin API did not answer on %s (see %s)", o.caddyAdmin, filepath.Join(dir, "caddy.log"))
}

// buildContext builds the application's static binary and puts it beside
// its Containerfile: the image is FROM scratch (no registry is reachable).
func buildContext(source, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "previewapp"), "./"+filepath.Clean(source))
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	cf, err := os.ReadFile(filepath.Join(source, "Containerfile"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "Containerfile"), cf, 0o600)
}

// podmanOptions: crun refuses these machines' hybrid cgroups, so where
// runc is installed podman is told to use it, with the cgroupfs manager.
func podmanOptions() (string, string) {
	if _, err := exec.LookPath("runc"); err == nil {
		return "--runtime runc --cgroup-manager cgroupfs", "runs containers with runc and cgroupfs, on the host network with explicit ulimits"
	}
	return "", "runs containers with its defaults"
}

// runWarden runs warden in the foreground, says when it is ready and how
// long that took; Ctrl-C is passed on as SIGTERM and waited for.
func runWarden(bin string, args []string, url string, p *parts, stdout, stderr io.Writer) error {
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr = stdout, stderr
	start := time.Now()
	if err := c.Start(); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done, gone := make(chan error, 1), make(chan struct{})
	go func() { err := c.Wait(); close(gone); done <- err }()
	go func() {
		if waitReady(url, gone) {
			p.say("warden is ready after %s: previews are created through its API or the console at %s/ui/environments", time.Since(start).Round(time.Second), url)
		}
	}()
	select {
	case err := <-done:
		return err
	case <-sigs:
		_ = c.Process.Signal(syscall.SIGTERM)
		return <-done
	}
}

// waitReady polls warden's /readyz until it answers 200 (true), or warden
// is gone.
func waitReady(url string, gone <-chan struct{}) bool {
	client := &http.Client{Timeout: time.Second}
	for {
		if resp, err := client.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-gone:
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop stops the preview containers of this platform, then Caddy, then
// PostgreSQL, saying so: nothing make previews started is left running.
func (p *parts) stop() {
	p.stopContainers()
	if p.caddy != nil {
		_ = p.caddy.Process.Signal(os.Interrupt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { _ = p.caddy.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			_ = p.caddy.Process.Kill()
		}
		p.say("Caddy stopped")
	}
	if p.pg != nil {
		if err := p.pg.Stop(); err != nil {
			p.say("PostgreSQL did not stop: %v", err)
			return
		}
		p.say("PostgreSQL stopped")
	}
}

// stopContainers stops the running application containers labelled with
// this platform's instance. They are stopped, not removed: warden
// still holds their records, and on the next start it finds them stopped
// and reprovisions each through its own repair (E15).
func (p *parts) stopContainers() {
	if len(p.podman) == 0 {
		return
	}
	ps := exec.Command(p.podman[0], append(p.podman[1:], "ps", "--filter", "label=warden.platform="+p.instance, "--format", "{{.Names}}")...)
	out, err := ps.Output()
	if err != nil {
		p.say("could not list the preview containers: %v", err)
		return
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		return
	}
	stop := exec.Command(p.podman[0], append(append(p.podman[1:], "stop", "--time", "5"), names...)...)
	if b, err := stop.CombinedOutput(); err != nil {
		p.say("could not stop the preview containers %s: %v: %s", strings.Join(names, " "), err, b)
		return
	}
	p.say("stopped the preview containers %s; the next make previews brings them back", strings.Join(names, " "))
}

// clean removes what make previews leaves after a clean stop, which the
// next one reuses: this platform's containers (stopped) and their images,
// the PostgreSQL cluster and the platform's directory. warden's own store
// under the data directory is not touched: its records of these previews
// are then of resources gone, which it repairs or removes as drift.
func (p *parts) clean(base string) error {
	podmanOptions, _ := podmanOptions()
	p.podman = append([]string{"podman"}, strings.Fields(podmanOptions)...)
	ps := exec.Command(p.podman[0], append(p.podman[1:], "ps", "--all", "--filter", "label=warden.platform="+p.instance, "--format", "{{.Names}} {{.ImageID}}")...)
	out, err := ps.Output()
	if err != nil {
		return fmt.Errorf("listing this platform's containers: %w", err)
	}
	var names, images []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			names, images = append(names, f[0]), append(images, f[1])
		}
	}
	if len(names) > 0 {
		if b, err := exec.Command(p.podman[0], append(append(p.podman[1:], "rm", "--force"), names...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("removing the containers %s: %w: %s", strings.Join(names, " "), err, b)
		}
		p.say("removed the preview containers %s", strings.Join(names, " "))
		slices.Sort(images)
		images = slices.Compact(images)
		if b, err := exec.Command(p.podman[0], append(append(p.podman[1:], "rmi", "--force"), images...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("removing their images: %w: %s", err, b)
		}
		p.say("removed their images (%d)", len(images))
	}
	pgDir, err := clusterDir(base)
	if err != nil {
		return err
	}
	dirs := []string{base}
	if !strings.HasPrefix(pgDir, base+string(filepath.Separator)) {
		dirs = append(dirs, filepath.Dir(pgDir)) // as root, under /var/tmp
	}
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		p.say("removed %s", dir)
	}
	return nil
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}
