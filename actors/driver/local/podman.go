package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/driver"
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
	// Client asks the health endpoints.
	Client *http.Client
}

// The labels this driver's images and containers carry: its ownership
// receipts (E3). A container inherits its image's labels, so a
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
	}
	return driver.CapabilityResult{Category: "configuration", Message: "podman does not do " + r.Capability + "/" + r.Op}, nil
}

// podman runs one command; notFound reports podman's "no such" answer to
// an inspect (any other failure is an error).
func (p *Podman) podman(ctx context.Context, args ...string) (out []byte, notFound bool, err error) {
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
		Running bool
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
		return &driver.CapabilityObservation{}, err
	}
	l := c.labels()
	o := &driver.CapabilityObservation{Exists: true, Owner: ownerLabel(l, LabelAppEnvironment), ProviderID: c.ID,
		Detail: fmt.Sprintf("running=%t", c.State.Running)}
	if !c.State.Running || o.Owner != r.EnvID {
		return o, nil
	}
	id, err := p.health(ctx, "127.0.0.1:"+l[LabelAppPort])
	if err != nil {
		o.Detail += ", health: " + err.Error()
		return o, nil
	}
	o.Matches = id.Environment == r.EnvID && id.Revision == r.Revision
	o.Detail += fmt.Sprintf(" revision=%s environment=%s", id.Revision, id.Environment)
	return o, nil
}

// health asks the application who it is (P6).
func (p *Podman) health(ctx context.Context, addr string) (health, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return health{}, err
	}
	client := p.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return health{}, err
	}
	defer resp.Body.Close()
	var h health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&h); err != nil {
		return health{}, fmt.Errorf("health answer does not decode: %w", err)
	}
	return h, nil
}

// start runs the application's container, replacing this environment's
// own if it is stopped or runs another image; another's is left (E3).
// It answers once the container is started: readiness is observed.
func (p *Podman) start(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	c, err := p.inspect(ctx, "container", r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if c != nil {
		l := c.labels()
		if l[LabelAppEnvironment] != r.EnvID {
			o, err := p.observeApp(ctx, r)
			return observed(o, err)
		}
		if c.State.Running && c.ImageName == imageRef(artifactOf(r)) {
			o, err := p.observeApp(ctx, r)
			return observed(o, err)
		}
		if _, _, err := p.podman(ctx, "rm", "--force", r.Identity); err != nil {
			return driver.CapabilityResult{}, err
		}
	}
	port, err := freePort()
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	args := append([]string{"run", "--detach", "--name", r.Identity,
		"--label", LabelAppEnvironment + "=" + r.EnvID, "--label", LabelAppGeneration + "=" + strconv.FormatUint(r.Generation, 10),
		"--label", LabelAppAttempt + "=" + r.AttemptID, "--label", LabelAppPort + "=" + strconv.Itoa(port),
		"--env", "PREVIEW_ENVIRONMENT=" + r.EnvID, "--env", "PREVIEW_LISTEN=127.0.0.1:" + strconv.Itoa(port)}, p.Run...)
	if p.DatabaseURL != nil {
		args = append(args, "--env", "DATABASE_URL="+p.DatabaseURL(r.EnvID))
	}
	args = append(args, imageRef(artifactOf(r)))
	if _, _, err := p.podman(ctx, args...); err != nil {
		return driver.CapabilityResult{}, err
	}
	return driver.CapabilityResult{OK: true}, nil
}

func (p *Podman) removeApp(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	c, err := p.inspect(ctx, "container", r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if c != nil && c.labels()[LabelAppEnvironment] != r.EnvID {
		return driver.CapabilityResult{Category: "conflict", Message: fmt.Sprintf("container %s is not this environment's (%s): left in place", r.Identity, ownerLabel(c.labels(), LabelAppEnvironment))}, nil
	}
	if c != nil {
		if _, _, err := p.podman(ctx, "rm", "--force", "--time", "2", r.Identity); err != nil {
			return driver.CapabilityResult{}, err
		}
	}
	o, err := p.observeApp(ctx, r)
	return observed(o, err)
}

// freePort is a loopback port free now, for an application on the host
// network.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
