// Package Serve is what `warden serve` is told: its flags declared from
// one table (Declare), each falling back to WARDEN_<FLAG>, the secrets read
// from the environment or files, and the whole checked before anything
// starts. The command wires what it is given; it decides nothing here.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/driver/local"
	"github.com/wardenhq/warden/internal/trust"
)

// Serve is everything `warden serve` is told. Every flag falls back to a
// WARDEN_* environment variable; secrets come only from the environment or
// a file, never from a flag (a flag shows in ps and shell history).
type Serve struct {
	Listen           string
	Data             string
	PublicURL        string
	Dispatch         string
	GitHubAPIURL     string
	GitHubRepo       string
	GitHubWorkflow   string
	GitHubRef        string
	DispatchCommand  []string
	DispatchTimeout  time.Duration
	Bootstrap        string
	BootstrapCommand []string
	BootstrapTimeout time.Duration
	ControlPlaneURL  string
	Pools            map[string]int
	Rules            marquee.Config
	ProtectMetrics   bool
	LogFormat        string
	LogLevel         slog.Level
	// StorageReserve is S9's reserve in bytes; zero is the default.
	StorageReserve    uint64
	AcceptDataLoss    bool
	CallbackToken     string
	OperatorToken     string
	GitHubToken       string
	ControlPlaneToken string
	ShutdownGrace     time.Duration
	DedupRetention    time.Duration
	RestartLimit      int
	RestartWindow     time.Duration
	IdleAfter         time.Duration
	EnvDriverCommand  []string
	EnvDriverTimeout  time.Duration
	// EnvPlatform is "exec" (EnvDriverCommand) or "local" (Platform).
	EnvPlatform string
	Platform    local.Platform
	// PlatformAccessLog, set, lets the local platform's previews sleep
	// (E19): Caddy writes the preview server's access log there, and a
	// sleeping preview's route sends to the waker at PlatformWaker.
	PlatformAccessLog string
	PlatformWaker     string
	PreviewSleepAfter time.Duration
	NotifyURL         string
	Notify            string
	PreviewURL        string
	EnvReconcileEvery time.Duration
	EnvLease          time.Duration
	EnvRetryBackoff   time.Duration
	// Trust (docs/rules/trust.md): callback modes, keys and identities.
	CallbackAuth           []string
	CallbackSigningKeyFile string
	CallbackTokenTTL       time.Duration
	WebhookSecretsFile     string
	WebhookPublicKeysFile  string
	OIDCIssuer             string
	OIDCAudience           string
	OIDCRepository         string
	OIDCWorkflowRef        string
	OIDCJWKSURL            string
	OperatorsFile          string
	SealKeyFile            string
	DriverEnv              []string
	BenchNoop              bool
	CPUProfile             string
	CPUProfileAfter        time.Duration
	// Cluster (docs/rules/cluster.md): a node of several sharing one entity space on
	// etcd; Node empty is the single-node default.
	Node               string
	AdvertiseURL       string
	EtcdEmbed          bool
	EtcdPlaintext      bool
	EtcdOnly           bool
	EtcdPeerURL        string
	EtcdClientURL      string
	EtcdInitialCluster string
	EtcdJoin           bool
	EtcdEndpoints      []string
	EtcdCompaction     time.Duration
	EtcdQuota          uint64
	LeaseTTL           time.Duration
	ClusterToken       string
	// EtcdCert, EtcdKey and EtcdCA are this node's certificate for etcd's
	// mutual TLS and the cluster CA.
	EtcdCert, EtcdKey, EtcdCA string
}

// ListFlag is a comma-separated list that may also be repeated.
type ListFlag struct{ L *[]string }

func (f ListFlag) String() string {
	if f.L == nil {
		return ""
	}
	return strings.Join(*f.L, ",")
}

func (f ListFlag) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*f.L = append(*f.L, item)
		}
	}
	return nil
}

type Pools map[string]int

func (p Pools) String() string {
	var parts []string
	for n, l := range p {
		parts = append(parts, fmt.Sprintf("%s=%d", n, l))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (p Pools) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		name, lim, ok := strings.Cut(strings.TrimSpace(item), "=")
		n, err := strconv.Atoi(lim)
		if !ok || err != nil || n < 0 || n > 10_000 || !marquee.ValidID(name) {
			return fmt.Errorf("pool %q: want NAME=LIMIT with LIMIT in 0..10000", item)
		}
		p[name] = n
	}
	return nil
}

type durationsFlag struct{ d *[]time.Duration }

func (f durationsFlag) String() string {
	if f.d == nil {
		return ""
	}
	var parts []string
	for _, d := range *f.d {
		parts = append(parts, d.String())
	}
	return strings.Join(parts, ",")
}

func (f durationsFlag) Set(v string) error {
	var out []time.Duration
	for _, s := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return fmt.Errorf("retry backoff %q: want a comma-separated list of positive durations", v)
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > 20 {
		return errors.New("retry backoff: 1..20 durations")
	}
	*f.d = out
	return nil
}

type commandFlag struct{ c *[]string }

func (f commandFlag) String() string {
	if f.c == nil {
		return ""
	}
	return strings.Join(*f.c, " ")
}

// Set splits on white space; no shell quoting, so nothing is interpreted.
func (f commandFlag) Set(v string) error { *f.c = strings.Fields(v); return nil }

// Declare declares serve's flags on fs; finish completes the
// configuration once the command line is parsed: WARDEN_<FLAG> fills any
// flag not given (given), the secrets are read, and the whole is checked.
// Long: one table of every flag serve takes, each declared, defaulted and
// documented in one place.
func Declare(fs *flag.FlagSet, getenv func(string) string) (finish func(args []string, given func(string) bool) (Serve, error)) {
	c := Serve{Pools: map[string]int{}, Rules: marquee.DefaultConfig()}
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to serve HTTP on")
	fs.StringVar(&c.Data, "data", "./data", "directory of the Pebble store")
	fs.StringVar(&c.PublicURL, "public-url", "", "base URL the workflow calls back on (default http://<listen>)")
	fs.StringVar(&c.Dispatch, "dispatch", "github", "workflow dispatch driver: github or exec")
	fs.StringVar(&c.GitHubAPIURL, "github-api-url", "https://api.github.com", "GitHub API base URL")
	fs.StringVar(&c.GitHubRepo, "github-repo", "", "owner/name of the repository holding the workflow")
	fs.StringVar(&c.GitHubWorkflow, "github-workflow", "terraform.yml", "workflow file name or id")
	fs.StringVar(&c.GitHubRef, "github-ref", "main", "git ref the workflow runs on")
	fs.Var(commandFlag{&c.DispatchCommand}, "dispatch-command", "command of the exec dispatch driver (split on spaces)")
	fs.DurationVar(&c.DispatchTimeout, "dispatch-timeout", 30*time.Second, "limit on one dispatch call")
	fs.StringVar(&c.Bootstrap, "bootstrap", "https", "bootstrap driver: https (probe the free domain) or exec")
	fs.Var(commandFlag{&c.BootstrapCommand}, "bootstrap-command", "command of the exec bootstrap driver (split on spaces)")
	fs.DurationVar(&c.BootstrapTimeout, "bootstrap-timeout", 5*time.Minute, "limit on one bootstrap run")
	fs.StringVar(&c.ControlPlaneURL, "control-plane-url", "", "control plane base URL (empty: chats unknown, live hosts preserved)")
	fs.Var(Pools(c.Pools), "pool", "admission pool NAME=LIMIT (repeatable; default default=1)")
	RuleFlags(fs, &c.Rules)
	fs.BoolVar(&c.ProtectMetrics, "protect-metrics", false, "require the operator token on /metrics")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json")
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "least level logged: debug (Pebble's routine messages too), info, warn or error")
	fs.Var(bytesFlag{&c.StorageReserve}, "storage-reserve", "free space below which new work is refused with 507 storage_low, e.g. 512MiB or 2GiB (default: the larger of 1% of the disk and 256MiB)")
	fs.BoolVar(&c.AcceptDataLoss, "accept-data-loss", false, "open a store whose write-ahead log is damaged by truncating it at the damage; the original is kept and an audit entry records what was dropped")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 20*time.Second, "how long SIGTERM waits for work in hand")
	fs.DurationVar(&c.DedupRetention, "dedup-retention", 72*time.Hour, "how long Webhook-Id deliveries are remembered (at least 72h)")
	fs.IntVar(&c.RestartLimit, "restart-limit", 5, "actor failures within --restart-window before it is parked")
	fs.DurationVar(&c.RestartWindow, "restart-window", time.Minute, "window of --restart-limit")
	fs.DurationVar(&c.IdleAfter, "idle-after", 10*time.Minute, "passivate an entity actor after this long without a message (negative: never)")
	fs.Var(commandFlag{&c.EnvDriverCommand}, "env-driver-command", "exec driver for every preview-environment capability; empty: none")
	fs.DurationVar(&c.EnvDriverTimeout, "env-driver-timeout", time.Minute, "limit on one environment driver call")
	c.platformFlags(fs)
	fs.DurationVar(&c.EnvReconcileEvery, "env-reconcile-every", 0, "how often environments at rest are observed for drift; 0: 30s, or 5s with --env-platform local")
	fs.DurationVar(&c.EnvLease, "env-lease", environment.DefaultConfig().LeaseFor, "how long a worker holds an environment transition before another may take it over")
	fs.DurationVar(&c.EnvRetryBackoff, "env-retry-backoff", environment.DefaultConfig().RetryBackoff, "first wait after a transient environment failure, doubling")
	fs.StringVar(&c.PreviewURL, "preview-url-template", "", "a preview's public URL, e.g. https://{branch}.preview.example.com; {id}, {branch}, {generation} are filled in; empty: the URL the route driver observes")
	fs.StringVar(&c.NotifyURL, "notify-url", "", "where environment notifications are POSTed with --notify webhook")
	fs.StringVar(&c.Notify, "notify", "", "where environment notifications go: webhook (--notify-url), github (commit status and pull-request comment in --github-repo) or none; default webhook if --notify-url is set, else none (they stay in the outbox)")
	fs.BoolVar(&c.BenchNoop, "bench-noop", false, "serve the benchmark's baselines (POST /v1/webhooks/noop, floor, floor-records); only a build with -tags benchfloor, make bench's, has them")
	fs.StringVar(&c.CPUProfile, "cpu-profile", "", "write a CPU profile of the whole run to this file (the benchmark's profile)")
	fs.DurationVar(&c.CPUProfileAfter, "cpu-profile-after", 0, "start --cpu-profile this long after start, so that it leaves out start-up and the store's first growth")
	fs.Var(ListFlag{&c.CallbackAuth}, "callback-auth", "accepted callback modes: scoped,shared,standard-webhooks,github-oidc (default: scoped, and shared and standard-webhooks where their secrets are configured)")
	fs.StringVar(&c.CallbackSigningKeyFile, "callback-signing-key-file", "", "keyring that derives scoped callback credentials (default <data>/callback-signing.key, created when absent)")
	fs.DurationVar(&c.CallbackTokenTTL, "callback-token-ttl", 24*time.Hour, "lifetime of a scoped callback credential; a rotated-out signing key verifies this long")
	fs.StringVar(&c.WebhookSecretsFile, "webhook-secrets-file", "", "Standard Webhooks whsec_ secrets, one a line")
	fs.StringVar(&c.WebhookPublicKeysFile, "webhook-public-keys-file", "", "Standard Webhooks whpk_ ed25519 public keys, one a line")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", "https://token.actions.githubusercontent.com", "GitHub Actions OIDC issuer")
	fs.StringVar(&c.OIDCAudience, "oidc-audience", "", "audience a GitHub OIDC token must carry (default: the public URL)")
	fs.StringVar(&c.OIDCRepository, "oidc-repository", "", "owner/name a GitHub OIDC token must come from")
	fs.StringVar(&c.OIDCWorkflowRef, "oidc-workflow-ref", "", "workflow (owner/name/.github/workflows/file.yml[@ref]) a GitHub OIDC token must come from")
	fs.StringVar(&c.OIDCJWKSURL, "oidc-jwks-url", "", "the issuer's key set (default: the jwks_uri of the issuer's discovery document)")
	fs.StringVar(&c.OperatorsFile, "operators-file", "", "named operators and viewers: `name role sha256-of-token` a line")
	fs.StringVar(&c.SealKeyFile, "seal-key-file", "", "keyring that seals secrets at rest (default <data>/seal.key, created when absent)")
	fs.Var(ListFlag{&c.DriverEnv}, "driver-env", "environment variable passed to driver processes besides PATH, HOME, LANG, TMPDIR (repeatable)")
	fs.StringVar(&c.Node, "node", "", "run as this node of a cluster on etcd (docs/rules/cluster.md); empty: a single node on Pebble")
	fs.StringVar(&c.AdvertiseURL, "advertise-url", "", "URL the other nodes reach this node's HTTP on (default http://<listen>)")
	fs.BoolVar(&c.EtcdEmbed, "etcd-embed", false, "run an etcd member inside this process, data under <data>/etcd")
	fs.BoolVar(&c.EtcdOnly, "etcd-only", false, "with --etcd-embed: run only this node's etcd member, no node (no lease, no shards, no HTTP API), so that migrate or an offline rekey can reach a cluster whose nodes are stopped; SIGINT or SIGTERM stops it")
	fs.BoolVar(&c.EtcdPlaintext, "etcd-plaintext", false, "let the embedded member use http:// URLs on loopback, without TLS: for tests and benchmarks only, warned at start (anyone on this machine could read every record)")
	fs.StringVar(&c.EtcdPeerURL, "etcd-peer-url", "", "the embedded member's peer URL, e.g. http://127.0.0.1:2380")
	fs.StringVar(&c.EtcdClientURL, "etcd-client-url", "", "the embedded member's client URL, e.g. http://127.0.0.1:2379")
	fs.StringVar(&c.EtcdInitialCluster, "etcd-initial-cluster", "", "every founding member: n1=peerURL,n2=peerURL,n3=peerURL")
	fs.BoolVar(&c.EtcdJoin, "etcd-join", false, "the embedded member was added to a running cluster (etcdctl member add) rather than founding it")
	fs.Var(ListFlag{&c.EtcdEndpoints}, "etcd-endpoints", "client URLs of an existing etcd cluster (instead of --etcd-embed)")
	fs.StringVar(&c.EtcdCert, "etcd-cert-file", "", "this node's certificate for etcd's mutual TLS, embedded member or external (warden keygen DIR --node NAME writes it)")
	fs.StringVar(&c.EtcdKey, "etcd-key-file", "", "the key of --etcd-cert-file")
	fs.StringVar(&c.EtcdCA, "etcd-ca-file", "", "the cluster CA: only certificates it signed are let in, or trusted (warden keygen DIR writes cluster-ca.crt)")
	fs.DurationVar(&c.EtcdCompaction, "etcd-compaction-retention", 10*time.Minute, "with --etcd-embed: how much of etcd's history the member keeps (compacted every tenth of it): under steady writes the db holds about this long of revisions")
	fs.Var(bytesFlag{&c.EtcdQuota}, "etcd-quota", "with --etcd-embed: the member's space quota, e.g. 8GiB (default etcd's 2GiB; every member of a cluster the same): delivery records for --dedup-retention must fit in it")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", 3*time.Second, "TTL of this node's shard lease: a dead node's shards move after about this long")
	clusterFile := fs.String("cluster-token-file", "", "file holding the token the nodes of a cluster authenticate each other with (else WARDEN_CLUSTER_TOKEN)")
	callbackFile := fs.String("callback-token-file", "", "file holding the callback token (else WARDEN_CALLBACK_TOKEN)")
	operatorFile := fs.String("operator-token-file", "", "file holding the operator token (else WARDEN_OPERATOR_TOKEN)")
	githubFile := fs.String("github-token-file", "", "file holding the GitHub token (else WARDEN_GITHUB_TOKEN)")
	cpFile := fs.String("control-plane-token-file", "", "file holding the control plane token (else WARDEN_CONTROL_PLANE_TOKEN)")

	return func(args []string, given func(string) bool) (Serve, error) {
		// WARDEN_<FLAG> fills any flag not given on the command line.
		var envErr error
		fs.VisitAll(func(f *flag.Flag) {
			if given(f.Name) || envErr != nil {
				return
			}
			name := "WARDEN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if v := getenv(name); v != "" {
				if err := f.Value.Set(v); err != nil {
					envErr = fmt.Errorf("%s: %w", name, err)
				}
			}
		})
		if envErr != nil {
			return c, envErr
		}
		if len(args) > 0 {
			return c, UsageError(fmt.Sprintf("unexpected arguments: %v", args))
		}
		if len(c.Pools) == 0 {
			c.Pools["default"] = 1
		}
		if _, ok := c.Pools["default"]; !ok {
			c.Pools["default"] = 1 // tutorial creates without a pool ask this one
		}
		var err error
		for _, s := range []struct {
			dst  *string
			file string
			env  string
		}{{&c.CallbackToken, *callbackFile, "WARDEN_CALLBACK_TOKEN"}, {&c.OperatorToken, *operatorFile, "WARDEN_OPERATOR_TOKEN"},
			{&c.GitHubToken, *githubFile, "WARDEN_GITHUB_TOKEN"}, {&c.ControlPlaneToken, *cpFile, "WARDEN_CONTROL_PLANE_TOKEN"},
			{&c.ClusterToken, *clusterFile, "WARDEN_CLUSTER_TOKEN"}} {
			if *s.dst, err = secret(s.file, s.env, getenv); err != nil {
				return c, err
			}
		}
		if err := c.validate(); err != nil {
			return c, err
		}
		return c, nil
	}
}

// bytesFlag is a size: a number of bytes with an optional unit (KiB, MiB,
// GiB, TiB; KB, MB, GB, TB are powers of 1000).
type bytesFlag struct{ n *uint64 }

func (f bytesFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return "0"
	}
	return strconv.FormatUint(*f.n, 10)
}

func (f bytesFlag) Set(v string) error {
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := strings.TrimSpace(v), uint64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n > (1<<62)/mult {
		return fmt.Errorf("size %q: want a number of bytes, e.g. 536870912, 512MiB or 2GiB", v)
	}
	*f.n = n * mult
	return nil
}

// defaultCallbackAuth is T2's default: scoped always, shared and Standard
// Webhooks where their secrets are configured; github-oidc only when asked.
// RuleFlags are the marquee machine's timings: warden serve runs by them,
// warden verify judges the wake index by them.
func RuleFlags(fs *flag.FlagSet, r *marquee.Config) {
	fs.DurationVar(&r.StaleAfter, "stale-after", r.StaleAfter, "no callback for this long makes an attempt stuck")
	fs.DurationVar(&r.ProvisioningTimeout, "provisioning-timeout", r.ProvisioningTimeout, "per-attempt provisioning timeout")
	fs.DurationVar(&r.NullWindow, "null-window", r.NullWindow, "how long a first null waits for its confirmation")
	fs.Var(durationsFlag{&r.RetryBackoff}, "retry-backoff", "waits after stuck retries 1..n; n is the retry cap")
	fs.DurationVar(&r.BootstrapBackoff, "bootstrap-backoff", r.BootstrapBackoff, "first wait after a failed bootstrap, doubling")
	fs.DurationVar(&r.ChatsRecheckAfter, "chats-recheck", r.ChatsRecheckAfter, "when an unanswered control-plane question is asked again")
}

func (c *Serve) defaultCallbackAuth() []string {
	modes := []string{httpapi.ModeScoped}
	if c.CallbackToken != "" {
		modes = append(modes, httpapi.ModeShared)
	}
	if c.WebhookSecretsFile != "" || c.WebhookPublicKeysFile != "" {
		modes = append(modes, httpapi.ModeStandardWebhooks)
	}
	return modes
}

// secret reads a token from a file (trailing newline trimmed) or the
// environment. Errors name the source, never the content.
func secret(file, env string, getenv func(string) string) (string, error) {
	if file == "" {
		file = getenv(env + "_FILE")
	}
	if file != "" {
		b, err := trust.ReadPrivateFile(file) // T11: refused if others may read it
		if err != nil {
			return "", fmt.Errorf("read %s file: %w", env, err)
		}
		if len(b) > 4096 {
			return "", fmt.Errorf("%s file is over 4096 bytes", env)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return getenv(env), nil
}

func (c *Serve) validate() error {
	if c.EtcdOnly {
		return joinProblems(c.validateEtcdOnly())
	}
	var problems []string
	problems = append(problems, c.validateCluster()...)
	problems = append(problems, c.validatePlatform()...)
	problems = append(problems, c.validateTrust()...)
	problems = append(problems, c.validateDrivers()...)
	problems = append(problems, c.validateNotify()...)
	if c.EnvLease <= 0 || c.EnvRetryBackoff <= 0 {
		problems = append(problems, "--env-lease and --env-retry-backoff must be positive")
	}
	if c.DedupRetention < 72*time.Hour {
		problems = append(problems, "--dedup-retention must be at least 72h (docs/rules/http-api.md)")
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
	}
	c.Platform.Console = strings.TrimRight(c.PublicURL, "/") + "/ui/environments"
	if c.PreviewURL != "" {
		probe := strings.NewReplacer("{id}", "x", "{branch}", "x", "{generation}", "1").Replace(c.PreviewURL)
		if u, err := url.Parse(probe); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.ContainsAny(probe, "{}") {
			problems = append(problems, "--preview-url-template: an http(s) URL with {id}, {branch} or {generation} in it")
		}
	}
	if c.OIDCAudience == "" {
		c.OIDCAudience = c.PublicURL
	}
	return joinProblems(problems)
}

// validateTrust checks who may call: an operator, and every callback mode
// with what it needs.
func (c *Serve) validateTrust() []string {
	var problems []string
	if c.OperatorToken == "" && c.OperatorsFile == "" {
		problems = append(problems, "an operator is required (WARDEN_OPERATOR_TOKEN, --operator-token-file or --operators-file)")
	}
	if c.CallbackAuth == nil {
		c.CallbackAuth = c.defaultCallbackAuth()
	}
	for _, m := range c.CallbackAuth {
		switch m {
		case httpapi.ModeScoped:
		case httpapi.ModeShared:
			if c.CallbackToken == "" {
				problems = append(problems, "--callback-auth shared needs a shared token (WARDEN_CALLBACK_TOKEN or --callback-token-file)")
			}
		case httpapi.ModeStandardWebhooks:
			if c.WebhookSecretsFile == "" && c.WebhookPublicKeysFile == "" {
				problems = append(problems, "--callback-auth standard-webhooks needs --webhook-secrets-file or --webhook-public-keys-file")
			}
		case httpapi.ModeGitHubOIDC:
			if c.OIDCRepository == "" || c.OIDCWorkflowRef == "" {
				problems = append(problems, "--callback-auth github-oidc needs --oidc-repository and --oidc-workflow-ref")
			}
		default:
			problems = append(problems, fmt.Sprintf("--callback-auth %q: want any of %s", m, strings.Join(httpapi.CallbackModes, ",")))
		}
	}
	if len(c.CallbackAuth) == 0 {
		problems = append(problems, "--callback-auth: at least one mode")
	}
	if c.CallbackTokenTTL < time.Minute || c.CallbackTokenTTL > 30*24*time.Hour {
		problems = append(problems, "--callback-token-ttl: 1m..720h")
	}
	if c.CallbackToken != "" && c.CallbackToken == c.OperatorToken {
		problems = append(problems, "the callback and operator tokens must differ: two roles, two secrets")
	}
	return problems
}

// validateDrivers checks the dispatch and bootstrap drivers.
func (c *Serve) validateDrivers() []string {
	var problems []string
	switch c.Dispatch {
	case "github":
		problems = append(problems, c.needGitHub("--dispatch github")...)
	case "exec":
		if len(c.DispatchCommand) == 0 {
			problems = append(problems, "--dispatch-command is required with --dispatch exec")
		}
	default:
		problems = append(problems, fmt.Sprintf("--dispatch %q: want github or exec", c.Dispatch))
	}
	switch c.Bootstrap {
	case "https":
	case "exec":
		if len(c.BootstrapCommand) == 0 {
			problems = append(problems, "--bootstrap-command is required with --bootstrap exec")
		}
	default:
		problems = append(problems, fmt.Sprintf("--bootstrap %q: want https or exec", c.Bootstrap))
	}
	return problems
}

// validateNotify checks where environment notifications go.
func (c *Serve) validateNotify() []string {
	if c.Notify == "" && c.NotifyURL != "" {
		c.Notify = "webhook"
	}
	switch c.Notify {
	case "", "none":
		c.Notify = ""
	case "webhook":
		if u, err := url.Parse(c.NotifyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return []string{"--notify webhook needs --notify-url, an http(s) URL"}
		}
	case "github":
		return c.needGitHub("--notify github")
	default:
		return []string{fmt.Sprintf("--notify %q: want webhook, github or none", c.Notify)}
	}
	return nil
}

// needGitHub is what using GitHub (for what) needs: its repository and a
// token.
func (c *Serve) needGitHub(what string) []string {
	var problems []string
	if c.GitHubRepo == "" || !strings.Contains(c.GitHubRepo, "/") {
		problems = append(problems, "--github-repo owner/name is required with "+what)
	}
	if c.GitHubToken == "" {
		problems = append(problems, "a GitHub token is required with "+what+" (WARDEN_GITHUB_TOKEN or --github-token-file)")
	}
	return problems
}

// joinProblems is every problem found, in one error.
func joinProblems(problems []string) error {
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// validateCluster checks the cluster flags: a node needs etcd (embedded or
// external), a token for its peers, and the keys every node shares
// (records sealed on one node are opened on another; a callback credential
// minted by one is verified by any).
func (c *Serve) validateCluster() []string {
	var problems []string
	if c.Node == "" {
		if c.EtcdEmbed || len(c.EtcdEndpoints) > 0 {
			problems = append(problems, "--etcd-embed and --etcd-endpoints need --node NAME")
		}
		return problems
	}
	if !ValidNodeName(c.Node) {
		problems = append(problems, "--node: 1..32 of a-z, 0-9 and -")
	}
	if c.EtcdEmbed == (len(c.EtcdEndpoints) > 0) {
		problems = append(problems, "--node needs exactly one of --etcd-embed or --etcd-endpoints")
	}
	if c.EtcdEmbed {
		for name, v := range map[string]string{"--etcd-peer-url": c.EtcdPeerURL, "--etcd-client-url": c.EtcdClientURL, "--etcd-initial-cluster": c.EtcdInitialCluster} {
			if v == "" {
				problems = append(problems, name+" is required with --etcd-embed")
			}
		}
	}
	if c.ClusterToken == "" {
		problems = append(problems, "a cluster token is required with --node (WARDEN_CLUSTER_TOKEN or --cluster-token-file; warden keygen DIR makes one)")
	}
	if c.SealKeyFile == "" || c.CallbackSigningKeyFile == "" {
		problems = append(problems, "every node of a cluster shares its keys: --seal-key-file and --callback-signing-key-file (warden keygen DIR makes both)")
	}
	if c.LeaseTTL < 2*time.Second || c.LeaseTTL > MaxLeaseTTL {
		problems = append(problems, "--lease-ttl: 2s..1m")
	}
	if c.EtcdCompaction < time.Minute || c.EtcdCompaction > 24*time.Hour {
		problems = append(problems, "--etcd-compaction-retention: 1m..24h")
	}
	if c.EtcdQuota != 0 && (c.EtcdQuota < 256<<20 || c.EtcdQuota > 64<<30) {
		problems = append(problems, "--etcd-quota: 256MiB..64GiB")
	}
	return append(problems, c.validateEtcdTLS()...)
}

// validateEtcdOnly checks a member started alone: the cluster flags it
// is started with, and nothing a node needs to serve (no tokens, no
// drivers: it runs none).
func (c *Serve) validateEtcdOnly() []string {
	if c.Node == "" || !c.EtcdEmbed {
		return []string{"--etcd-only runs a node's embedded etcd member alone: it needs --node NAME and --etcd-embed"}
	}
	return c.validateCluster()
}

// validateEtcdTLS: a cluster beyond loopback talks to etcd only over
// mutual TLS (an open etcd gave anyone who reached its port
// every record, and the member list the nodes forward to).
func (c *Serve) validateEtcdTLS() []string {
	given := 0
	for _, f := range []string{c.EtcdCert, c.EtcdKey, c.EtcdCA} {
		if f != "" {
			given++
		}
	}
	urls := c.etcdURLs()
	switch {
	case given > 0 && given < 3:
		return []string{"etcd's TLS needs all three: --etcd-cert-file, --etcd-key-file and --etcd-ca-file"}
	case given == 3:
		for _, u := range urls {
			if !strings.HasPrefix(u, "https://") {
				return []string{"with etcd's TLS every etcd URL is https://: " + u}
			}
		}
		return nil
	}
	for _, u := range urls {
		if !loopbackURL(u) {
			return []string{"a cluster on addresses beyond loopback needs etcd's mutual TLS (" + u + "): --etcd-cert-file, --etcd-key-file, --etcd-ca-file; `warden keygen DIR --node NAME --host ADDR` writes them (README, Running several nodes)"}
		}
	}
	if c.EtcdEmbed && !c.EtcdPlaintext {
		return []string{"an embedded etcd member without TLS is for tests only (--etcd-plaintext): give it --etcd-cert-file, --etcd-key-file, --etcd-ca-file and https:// URLs; `warden keygen DIR --node NAME` writes them (make cluster does)"}
	}
	return nil
}

// etcdURLs are every etcd URL this node uses or announces.
func (c *Serve) etcdURLs() []string {
	urls := append([]string(nil), c.EtcdEndpoints...)
	if c.EtcdEmbed {
		urls = append(urls, c.EtcdPeerURL, c.EtcdClientURL)
		for _, part := range strings.Split(c.EtcdInitialCluster, ",") {
			if _, u, ok := strings.Cut(part, "="); ok {
				urls = append(urls, u)
			}
		}
	}
	return urls
}

// loopbackURL reports whether u's host is this machine's loopback.
func loopbackURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	host := p.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func ValidNodeName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// platformFlags are the local preview platform's (docs/rules/platform.md
// P1): one PostgreSQL server, podman and one Caddy.
func (c *Serve) platformFlags(fs *flag.FlagSet) {
	p := &c.Platform
	fs.StringVar(&c.EnvPlatform, "env-platform", "exec", "preview drivers: exec (--env-driver-command) or local (PostgreSQL, podman and Caddy, the --platform-* flags)")
	fs.StringVar(&p.PostgresAdmin, "platform-postgres", "", "with --env-platform local: a PostgreSQL connection string for a role that may create roles and databases")
	fs.StringVar(&p.Migrations, "platform-migrations", "examples/previewapp/migrations", "with --env-platform local: the application's migrations directory (*.sql, in name order)")
	fs.StringVar(&p.AppContext, "platform-app", "", "with --env-platform local: the application's image build context, its Containerfile")
	fs.StringVar(&p.Podman, "platform-podman", "podman", "with --env-platform local: the podman binary")
	fs.Var(commandFlag{&p.PodmanGlobal}, "platform-podman-options", "with --env-platform local: podman's options before each command, e.g. \"--runtime runc --cgroup-manager cgroupfs\"")
	fs.Var(commandFlag{&p.PodmanRun}, "platform-podman-run", "with --env-platform local: options of every application container, e.g. \"--network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024\"")
	fs.StringVar(&p.CaddyAdmin, "platform-caddy-admin", "http://127.0.0.1:2019", "with --env-platform local: Caddy's admin API")
	fs.StringVar(&p.CaddyServer, "platform-caddy-server", "previews", "with --env-platform local: the Caddy server holding the preview routes")
	fs.StringVar(&p.PreviewListen, "platform-preview-listen", "127.0.0.1:8088", "with --env-platform local: where that Caddy server listens")
	fs.StringVar(&p.PreviewDomain, "platform-preview-domain", "localhost", "with --env-platform local: a branch is served at <branch>.<domain>")
	fs.StringVar(&p.Instance, "platform-instance", "", "with --env-platform local: a name labelled on every application container, telling this platform's from another's on a shared podman")
	fs.StringVar(&c.PlatformAccessLog, "platform-access-log", "", "with --env-platform local: an absolute file Caddy writes the preview server's access log to, read for each preview's last visit; set, previews may sleep")
	fs.StringVar(&c.PlatformWaker, "platform-waker", "", "with --platform-access-log: where Caddy reaches warden's waker, host:port (default: --listen)")
	fs.DurationVar(&c.PreviewSleepAfter, "preview-sleep-after", 0, "a preview's sleep_after when its create gives none, e.g. 30m (0: previews sleep only when asked); needs --platform-access-log")
}

// Reconcile rounds when none is given: a local platform's
// observations are a few local calls, so its links are looked at every
// 5 s, well inside the 10 s in which a broken link must leave ready; an
// exec driver's are a process each, every 30 s.
const (
	reconcileExec  = 30 * time.Second
	reconcileLocal = 5 * time.Second
)

func (c *Serve) validatePlatform() []string {
	if c.EnvReconcileEvery == 0 {
		c.EnvReconcileEvery = reconcileExec
		if c.EnvPlatform == "local" {
			c.EnvReconcileEvery = reconcileLocal
		}
	}
	switch c.EnvPlatform {
	case "exec":
		return nil
	case "local":
	default:
		return []string{fmt.Sprintf("--env-platform %q: exec or local", c.EnvPlatform)}
	}
	var problems []string
	if c.Platform.PostgresAdmin == "" {
		problems = append(problems, "--env-platform local needs --platform-postgres")
	}
	if c.Platform.AppContext == "" {
		problems = append(problems, "--env-platform local needs --platform-app")
	}
	if len(c.EnvDriverCommand) > 0 {
		problems = append(problems, "--env-driver-command and --env-platform local both drive previews: choose one")
	}
	return append(problems, c.validateSleep()...)
}

// validateSleep checks the flags that let previews sleep, and hands the
// platform its waker and access log.
func (c *Serve) validateSleep() []string {
	var problems []string
	if c.PreviewSleepAfter != 0 && (c.PreviewSleepAfter < environment.MinSleepAfter || c.PreviewSleepAfter > environment.MaxSleepAfter) {
		problems = append(problems, fmt.Sprintf("--preview-sleep-after %s: from %s to %s", c.PreviewSleepAfter, environment.MinSleepAfter, environment.MaxSleepAfter))
	}
	if c.PlatformAccessLog == "" {
		if c.PreviewSleepAfter != 0 || c.PlatformWaker != "" {
			problems = append(problems, "--preview-sleep-after and --platform-waker need --platform-access-log: a preview's visits are read from it")
		}
		return problems
	}
	if !filepath.IsAbs(c.PlatformAccessLog) {
		problems = append(problems, fmt.Sprintf("--platform-access-log %q: an absolute path (Caddy opens it from its own directory)", c.PlatformAccessLog))
	}
	waker := c.PlatformWaker
	if waker == "" {
		waker = c.Listen
	}
	host, port, err := net.SplitHostPort(waker)
	if err != nil || port == "" {
		return append(problems, fmt.Sprintf("--platform-waker %q: host:port", waker))
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1" // warden listens on every address; Caddy, here, dials loopback
	}
	c.Platform.Waker = net.JoinHostPort(host, port)
	c.Platform.Traffic = &local.AccessLog{Path: c.PlatformAccessLog}
	return problems
}

// MaxLeaseTTL bounds --lease-ttl, and so how long a stopped node's lease
// can outlive it (what the offline commands wait out, clusterServing).
const MaxLeaseTTL = time.Minute

// UsageError is a command line that cannot be read, as against a
// configuration that is refused (every other error of Declare's finish).
type UsageError string

func (e UsageError) Error() string { return string(e) }
