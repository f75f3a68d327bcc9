package local

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/internal/driver"
)

// Podman drives the "artifact" and "app" capabilities with podman (P4,
// P6): the artifact is an image built from the application's build
// context, tagged with its identity and labelled with the environment,
// generation and revision (its digest is the receipt); the application is
// a container of that image named by its identity, labelled with the
// environment, generation, attempt and port, given its database's
// connection string, and asked on its health endpoint who it is.
type Podman struct {
	// Binary is podman; Global its options before the command (here
	// --runtime runc --cgroup-manager cgroupfs).
	Binary string
	Global []string
	// Context is the application's build context (its Containerfile).
	Context string
	// Run are `podman run`'s options for every application (here
	// --network host and explicit --ulimit nofile= and nproc=).
	Run []string
	// DatabaseURL is an environment's connection string.
	DatabaseURL func(env string) string
	// Instance, when set, is labelled on every application container, so
	// that one platform's containers are told from another's on a shared
	// podman (make previews stops its own on Ctrl-C, P15).
	Instance string
	// Client asks the health endpoints.
	Client *http.Client
	// Descriptors bounds the podman commands running at once with every
	// other driver's processes and connections; the events watch is
	// not one of them.
	Descriptors *driver.Descriptors
}

// The labels this driver's images and containers carry: its ownership
// receipts. A container inherits its image's labels, so a
// container's are under keys of their own: a container made by hand from
// a preview's image is not that preview's.
const (
	LabelEnvironment = "warden.environment"
	LabelGeneration  = "warden.generation"
	LabelRevision    = "warden.revision"

	LabelAppEnvironment = "warden.app.environment"
	LabelAppGeneration  = "warden.app.generation"
	LabelAppAttempt     = "warden.app.attempt"
	LabelAppPort        = "warden.app.port"
	// LabelAppConfig is a digest of what the application was given (its
	// database's address among it, never in clear): an application whose
	// dependencies moved since it started is not as desired.
	LabelAppConfig = "warden.app.config"
	// LabelPlatform names the platform instance (Podman.Instance).
	LabelPlatform = "warden.platform"
)

// validImageName: the image and container names this driver makes, and
// the revisions in them (a commit's full hash fits, with a pull
// request's id beside it).
var validImageNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,127}$`)

func validImageName(s string) bool { return validImageNameRE.MatchString(s) }

// maxPodmanOutput bounds what is read from one podman command.
const maxPodmanOutput = 1 << 20

// Do performs one operation (see Data.Do for results and errors).
func (p *Podman) Do(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	if !validImageName(r.Identity) || !validImageName(r.Revision) {
		return driver.CapabilityResult{Category: "configuration", Message: fmt.Sprintf("identity %q or revision %q is not a name podman is given", r.Identity, r.Revision)}, nil
	}
	switch r.Capability + "/" + r.Op {
	case "artifact/observe":
		o, err := p.observeImage(ctx, r)
		return observed(o, err)
	case "artifact/apply":
		return p.build(ctx, r)
	case "artifact/remove":
		return p.removeImage(ctx, r)
	case "app/observe":
		o, err := p.observeApp(ctx, r)
		return observed(o, err)
	case "app/apply":
		return p.start(ctx, r)
	case "app/remove":
		return p.removeApp(ctx, r)
	case "app/sleep":
		return p.stopApp(ctx, r)
	}
	return driver.CapabilityResult{Category: "configuration", Message: "podman does not do " + r.Capability + "/" + r.Op}, nil
}

// podman runs one command; notFound reports podman's "no such" answer to
// an inspect (any other failure is an error).
func (p *Podman) podman(ctx context.Context, args ...string) (out []byte, notFound bool, err error) {
	done, err := p.Descriptors.Start(ctx, "podman")
	if err != nil {
		return nil, false, err
	}
	defer done()
	cmd := exec.CommandContext(ctx, p.Binary, append(append([]string(nil), p.Global...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{w: &stdout}, &limited{w: &stderr}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		inspect := len(args) > 1 && args[1] == "inspect"
		if inspect && (strings.Contains(msg, "no such") || strings.Contains(msg, "not known")) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("podman %s: %v: %s", strings.Join(args[:min(2, len(args))], " "), err, msg)
	}
	return stdout.Bytes(), false, nil
}

// limited keeps at most maxPodmanOutput bytes of a stream.
type limited struct{ w *bytes.Buffer }

func (l *limited) Write(b []byte) (int, error) {
	if room := maxPodmanOutput - l.w.Len(); room > 0 {
		l.w.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

func imageRef(identity string) string { return "localhost/" + identity + ":latest" }

type inspected struct {
	ID     string `json:"Id"`
	Digest string
	Labels map[string]string
	Config struct {
		Labels map[string]string
	}
	State struct {
		Running  bool
		Status   string
		ExitCode int
	}
	ImageName string
	Image     string
}

func (i inspected) labels() map[string]string {
	if i.Labels != nil {
		return i.Labels
	}
	return i.Config.Labels
}

func (p *Podman) inspect(ctx context.Context, kind, name string) (*inspected, error) {
	out, notFound, err := p.podman(ctx, kind, "inspect", name)
	if err != nil || notFound {
		return nil, err
	}
	var list []inspected
	if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 {
		return nil, fmt.Errorf("podman %s inspect %s: unreadable answer", kind, name)
	}
	return &list[0], nil
}

func (p *Podman) observeImage(ctx context.Context, r driver.CapabilityRequest) (*driver.CapabilityObservation, error) {
	img, err := p.inspect(ctx, "image", imageRef(r.Identity))
	if err != nil || img == nil {
		return &driver.CapabilityObservation{}, err
	}
	l := img.labels()
	receipt := img.Digest
	if receipt == "" {
		receipt = "sha256:" + img.ID
	}
	return &driver.CapabilityObservation{Exists: true, Owner: ownerLabel(l, LabelEnvironment), ProviderID: receipt,
		Matches: l[LabelRevision] == r.Revision, Detail: fmt.Sprintf("image %s, revision %s", shortID(img.ID), l[LabelRevision])}, nil
}

func ownerLabel(l map[string]string, key string) string {
	if env := l[key]; env != "" {
		return env
	}
	return "unlabelled"
}

func shortID(id string) string {
	return strings.TrimPrefix(id, "sha256:")[:min(12, len(strings.TrimPrefix(id, "sha256:")))]
}

// build makes the image, or finds this environment's of this revision; a
// same-name image of another environment is left and observed (E3).
func (p *Podman) build(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	o, err := p.observeImage(ctx, r)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if o.Exists && (o.Owner != r.EnvID || o.Matches) {
		return driver.CapabilityResult{OK: true, Observation: o}, nil
	}
	if _, _, err := p.podman(ctx, "build", "--quiet", "--tag", imageRef(r.Identity),
		"--build-arg", "REVISION="+r.Revision,
		"--label", LabelEnvironment+"="+r.EnvID, "--label", LabelGeneration+"="+strconv.FormatUint(r.Generation, 10),
		"--label", LabelRevision+"="+r.Revision, p.Context); err != nil {
		return driver.CapabilityResult{}, err
	}
	o, err = p.observeImage(ctx, r)
	return observed(o, err)
}

func (p *Podman) removeImage(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	o, err := p.observeImage(ctx, r)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if o.Exists && o.Owner != r.EnvID {
		return driver.CapabilityResult{Category: "conflict", Message: fmt.Sprintf("image %s is not this environment's (%s): left in place", r.Identity, o.Owner)}, nil
	}
	if o.Exists {
		if _, _, err := p.podman(ctx, "rmi", "--force", imageRef(r.Identity)); err != nil {
			return driver.CapabilityResult{}, err
		}
	}
	o, err = p.observeImage(ctx, r)
	return observed(o, err)
}

// artifactOf is the image an environment's application runs: the
// environment machine's artifact identity for its revision.
func artifactOf(r driver.CapabilityRequest) string { return "artifact-" + r.EnvID + "-" + r.Revision }

// Upstream is where an environment's application listens: its
// container's port label, on loopback (host networking).
func (p *Podman) Upstream(ctx context.Context, env string) (string, error) {
	c, err := p.inspect(ctx, "container", "app-"+env)
	if err != nil {
		return "", err
	}
	if c == nil || c.labels()[LabelAppEnvironment] != env {
		return "", fmt.Errorf("no application container of %s", env)
	}
	return "127.0.0.1:" + c.labels()[LabelAppPort], nil
}

func (p *Podman) observeApp(ctx context.Context, r driver.CapabilityRequest) (*driver.CapabilityObservation, error) {
	c, err := p.inspect(ctx, "container", r.Identity)
	if err != nil || c == nil {
		return &driver.CapabilityObservation{Detail: "no container " + r.Identity}, err
	}
	l := c.labels()
	o := &driver.CapabilityObservation{Exists: true, Owner: ownerLabel(l, LabelAppEnvironment), ProviderID: c.ID}
	switch {
	case o.Owner != r.EnvID:
		o.Detail = "labelled for " + o.Owner
		return o, nil
	case !c.State.Running:
		o.Replace, o.Stopped = true, true
		o.Detail = fmt.Sprintf("not running: %s, exit code %d", orUnknown(c.State.Status), c.State.ExitCode)
		return o, nil
	case l[LabelAppConfig] != p.configDigest(r):
		o.Replace = true
		o.Detail = "running with a configuration that is not the current one (its database's address changed?)"
		return o, nil
	}
	id, err := p.health(ctx, "127.0.0.1:"+l[LabelAppPort], healthPatience)
	if err != nil {
		o.Detail = "running; health: " + err.Error()
		return o, nil
	}
	o.Matches = id.answers(r)
	o.Detail = "running; " + id.String()
	return o, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// healthPatience is how long an observation waits for a running
// application that does not accept connections yet: a container just
// started is given the time to listen rather than reported not ready and
// backed off for half a minute.
const healthPatience = 3 * time.Second

// health asks the application who it is and whether its dependencies
// answer, waiting up to patience for one that does not listen
// yet.
func (p *Podman) health(ctx context.Context, addr string, patience time.Duration) (health, error) {
	deadline := time.Now().Add(patience)
	for {
		h, _, err := askHealth(ctx, p.Client, "http://"+addr+"/healthz", "")
		var refused *net.OpError
		if err == nil || !errors.As(err, &refused) || time.Now().After(deadline) || ctx.Err() != nil {
			return h, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// configDigest is the digest of what an environment's application is
// given (LabelAppConfig): its identity and its database's address.
func (p *Podman) configDigest(r driver.CapabilityRequest) string {
	sum := sha256.New()
	for _, v := range []string{r.EnvID, strconv.FormatUint(r.Generation, 10), r.Revision, p.databaseURL(r.EnvID)} {
		sum.Write([]byte(v))
		sum.Write([]byte{0})
	}
	return hex.EncodeToString(sum.Sum(nil)[:8])
}

func (p *Podman) databaseURL(env string) string {
	if p.DatabaseURL == nil {
		return ""
	}
	return p.DatabaseURL(env)
}

// start runs the application's container. This environment's own is kept
// only while it runs its image with the current configuration and answers
// as itself; otherwise it is replaced, on the port it had (its route then
// stays as written, P14). Another's is left. It answers once the
// container is started: readiness is observed.
func (p *Podman) start(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	c, err := p.inspect(ctx, "container", r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	port := 0
	if c != nil {
		l := c.labels()
		if l[LabelAppEnvironment] != r.EnvID {
			o, err := p.observeApp(ctx, r)
			return observed(o, err)
		}
		if c.State.Running && c.ImageName == imageRef(artifactOf(r)) && l[LabelAppConfig] == p.configDigest(r) {
			if o, err := p.observeApp(ctx, r); err != nil || o.Matches {
				return observed(o, err)
			}
		}

		port, _ = strconv.Atoi(l[LabelAppPort])
		if _, _, err := p.podman(ctx, "rm", "--force", "--time", "2", r.Identity); err != nil {
			return driver.CapabilityResult{}, err
		}
	}
	port, err = portFor(r.EnvID, port)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	args := []string{"run", "--detach", "--name", r.Identity,
		"--label", LabelAppEnvironment + "=" + r.EnvID, "--label", LabelAppGeneration + "=" + strconv.FormatUint(r.Generation, 10),
		"--label", LabelAppAttempt + "=" + r.AttemptID, "--label", LabelAppPort + "=" + strconv.Itoa(port),
		"--label", LabelAppConfig + "=" + p.configDigest(r),
		"--env", "PREVIEW_ENVIRONMENT=" + r.EnvID, "--env", "PREVIEW_GENERATION=" + strconv.FormatUint(r.Generation, 10),
		"--env", "PREVIEW_LISTEN=127.0.0.1:" + strconv.Itoa(port)}
	if p.Instance != "" {
		args = append(args, "--label", LabelPlatform+"="+p.Instance)
	}
	args = append(args, p.Run...)
	if p.DatabaseURL != nil {
		args = append(args, "--env", "DATABASE_URL="+p.DatabaseURL(r.EnvID))
	}
	args = append(args, imageRef(artifactOf(r)))
	if _, _, err := p.podman(ctx, args...); err != nil {
		return driver.CapabilityResult{}, err
	}
	return driver.CapabilityResult{OK: true}, nil
}

// stopApp stops this environment's application (E19); another's is
// left; one already stopped or gone is observed as it is. The wake's
// apply makes it anew, as provisioning does, on the port it had.
func (p *Podman) stopApp(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	return p.ownApp(ctx, r, "left running", func(c *inspected) []string {
		if c.State.Running {
			return []string{"stop", "--time", "5", r.Identity}
		}
		return nil
	})
}

func (p *Podman) removeApp(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	return p.ownApp(ctx, r, "left in place", func(*inspected) []string { return []string{"rm", "--force", "--time", "2", r.Identity} })
}

// ownApp runs the podman command do names (none: nothing to do) on the
// environment's container, if there is one and it is this environment's
// (another's is a conflict, left as it is, said so), then observes it.
func (p *Podman) ownApp(ctx context.Context, r driver.CapabilityRequest, left string, do func(*inspected) []string) (driver.CapabilityResult, error) {
	c, err := p.inspect(ctx, "container", r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if c != nil && c.labels()[LabelAppEnvironment] != r.EnvID {
		return driver.CapabilityResult{Category: "conflict", Message: fmt.Sprintf("container %s is not this environment's (%s): %s", r.Identity, ownerLabel(c.labels(), LabelAppEnvironment), left)}, nil
	}
	if c != nil {
		if args := do(c); args != nil {
			if _, _, err := p.podman(ctx, args...); err != nil {
				return driver.CapabilityResult{}, err
			}
		}
	}
	o, err := p.observeApp(ctx, r)
	return observed(o, err)
}

// maxEventLine bounds one line of podman's event stream.
const maxEventLine = 1 << 20

// Watch follows podman's own events: a container of an application
// of this platform that dies (killed, exited, out of memory) or is removed
// is reported at once, rather than found by the next reconcile round.
// podman's label filter does not filter events on these machines, so the
// labels are read here.
func (p *Podman) Watch(ctx context.Context, changed func(env string)) error {
	cmd := exec.CommandContext(ctx, p.Binary, append(append([]string(nil), p.Global...), "events", "--format", "json", "--filter", "type=container")...)
	var stderr bytes.Buffer
	cmd.Stderr = &limited{w: &stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	lines := bufio.NewScanner(out)
	lines.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	for lines.Scan() {
		var ev struct {
			Status     string
			Attributes map[string]string
		}
		if json.Unmarshal(lines.Bytes(), &ev) != nil {
			continue
		}
		env := ev.Attributes[LabelAppEnvironment]
		if env == "" || p.Instance != "" && ev.Attributes[LabelPlatform] != p.Instance {
			continue
		}
		switch ev.Status {
		case "died", "remove", "oom", "stop":
			changed(env)
		}
	}
	scanErr := lines.Err()
	_ = cmd.Process.Kill()
	waitErr := cmd.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("podman events ended (%v, %v): %s", scanErr, waitErr, strings.TrimSpace(stderr.String()))
}

// appPorts is where applications listen on the host network: a port
// derived from the environment, so that a preview keeps its address when
// it is reprovisioned, even after its container was removed by hand, and
// its route stays as warden wrote it.
const (
	appPortBase  = 20000
	appPortRange = 20000
	portProbes   = 32
)

// portFor is the port an environment's application gets: the one it had,
// else the one derived from its id, else the next free after it; a free
// port of the kernel's choosing if all of those are taken.
func portFor(env string, had int) (int, error) {
	if had > 0 && portFree(had) {
		return had, nil
	}
	h := fnv.New32a()
	h.Write([]byte(env))
	first := int(h.Sum32() % appPortRange)
	for i := range portProbes {
		if port := appPortBase + (first+i)%appPortRange; portFree(port) {
			return port, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
