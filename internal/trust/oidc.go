package trust

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// GitHub Actions OIDC: a workflow job may ask GitHub for a JWT and
// send it as its bearer token. It is checked against the issuer's keys
// (JWKS, cached, fetched again when an unknown key id shows up: go-oidc's
// RemoteKeySet), the audience, the expiry, and the repository and workflow
// claims this warden is configured to trust.

// GitHubIssuer is GitHub Actions' OIDC issuer.
const GitHubIssuer = "https://token.actions.githubusercontent.com"

// ExpiryLeeway is how long after its exp a token is still taken: clocks
// drift a little; T4 allows a minute at most.
const ExpiryLeeway = time.Minute

// maxJWT bounds a bearer JWT; GitHub's are about 1.5 KiB.
const maxJWT = 8 << 10

// OIDCConfig says which tokens to trust.
type OIDCConfig struct {
	Issuer string
	// JWKSURL is the issuer's key set; empty: the jwks_uri of the
	// issuer's discovery document (/.well-known/openid-configuration).
	JWKSURL  string
	Audience string
	// Repository ("owner/name") must equal the token's repository claim.
	Repository string
	// WorkflowRef must equal the token's job_workflow_ref or workflow_ref
	// ("owner/name/.github/workflows/terraform.yml@refs/heads/main"); a
	// value without "@" matches any ref of that workflow file.
	WorkflowRef string
	Client      *http.Client
	Now         func() time.Time
}

// OIDCClaims is what warden reads from a verified token.
type OIDCClaims struct {
	Repository     string
	WorkflowRef    string
	JobWorkflowRef string
	RunID          uint64
}

// OIDCError says which check failed (401).
type OIDCError struct{ Check string }

func (e *OIDCError) Error() string { return "github oidc: " + e.Check }

// OIDC verifies GitHub Actions tokens.
type OIDC struct {
	cfg OIDCConfig
	mu  sync.Mutex
	// verifier is built at once from a configured key set URL, else on
	// first use from the issuer's discovery document (an issuer
	// whose jwks_uri is not <issuer>/.well-known/jwks was refused), so a
	// start-up never waits for the issuer.
	verifier *oidc.IDTokenVerifier
}

// NewOIDC builds a verifier; keys (and, without JWKSURL, the discovery
// document) are fetched on first use, not here.
func NewOIDC(cfg OIDCConfig) *OIDC {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	o := &OIDC{cfg: cfg}
	if cfg.JWKSURL != "" {
		ctx := oidc.ClientContext(context.Background(), cfg.Client)
		o.verifier = oidc.NewVerifier(cfg.Issuer, oidc.NewRemoteKeySet(ctx, cfg.JWKSURL), o.config())
	}
	return o
}

func (o *OIDC) config() *oidc.Config {
	now := o.cfg.Now
	return &oidc.Config{
		ClientID:             o.cfg.Audience,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256},
		// go-oidc compares exp with Now strictly; moving Now back gives
		// the leeway.
		Now: func() time.Time { return now().Add(-ExpiryLeeway) },
	}
}

// verifierFor is the verifier, discovering the issuer's key set first if
// it has not yet; a failed discovery is tried again on the next token.
func (o *OIDC) verifierFor(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verifier != nil {
		return o.verifier, nil
	}
	// The provider's key set lives on past this request.
	p, err := oidc.NewProvider(oidc.ClientContext(context.WithoutCancel(ctx), o.cfg.Client), o.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	o.verifier = p.Verifier(o.config())
	return o.verifier, nil
}

// Verify checks a token and its claims.
func (o *OIDC) Verify(ctx context.Context, raw string) (OIDCClaims, error) {
	if len(raw) > maxJWT {
		return OIDCClaims{}, &OIDCError{Check: fmt.Sprintf("token is over %d bytes", maxJWT)}
	}
	v, err := o.verifierFor(ctx)
	if err != nil {
		return OIDCClaims{}, &OIDCError{Check: "the issuer's discovery document could not be read: " + clip(err.Error())}
	}
	tok, err := v.Verify(oidc.ClientContext(ctx, o.cfg.Client), raw)
	if err != nil {
		return OIDCClaims{}, &OIDCError{Check: describeOIDC(err)}
	}
	var c struct {
		Repository     string `json:"repository"`
		WorkflowRef    string `json:"workflow_ref"`
		JobWorkflowRef string `json:"job_workflow_ref"`
		RunID          string `json:"run_id"`
	}
	if err := tok.Claims(&c); err != nil {
		return OIDCClaims{}, &OIDCError{Check: "claims do not decode"}
	}
	if c.Repository != o.cfg.Repository {
		return OIDCClaims{}, &OIDCError{Check: fmt.Sprintf("repository %q is not the configured one", clip(c.Repository))}
	}
	if !workflowMatches(o.cfg.WorkflowRef, c.JobWorkflowRef) && !workflowMatches(o.cfg.WorkflowRef, c.WorkflowRef) {
		return OIDCClaims{}, &OIDCError{Check: fmt.Sprintf("workflow %q is not the configured one", clip(c.WorkflowRef))}
	}
	out := OIDCClaims{Repository: c.Repository, WorkflowRef: c.WorkflowRef, JobWorkflowRef: c.JobWorkflowRef}
	if c.RunID != "" {
		n, err := strconv.ParseUint(c.RunID, 10, 64)
		if err != nil {
			return OIDCClaims{}, &OIDCError{Check: "run_id is not a number"}
		}
		out.RunID = n
	}
	return out, nil
}

func workflowMatches(want, got string) bool {
	if want == "" || got == "" {
		return false
	}
	if strings.Contains(want, "@") {
		return got == want
	}
	path, _, _ := strings.Cut(got, "@")
	return path == want
}

// describeOIDC turns go-oidc's errors into the check that failed, without
// echoing the token: by type where go-oidc has one (an expiry), by its
// words for the rest, which it returns as plain errors.
func describeOIDC(err error) string {
	var expired *oidc.TokenExpiredError
	var mismatch *oidc.IssuerMismatchError
	switch {
	case errors.As(err, &expired):
		return "token expired"
	case errors.As(err, &mismatch):
		return "issuer is not the configured one"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "audience"):
		return "audience is not this warden's"
	case strings.Contains(msg, "issued by a different provider"):
		return "issuer is not the configured one"
	case strings.Contains(msg, "signature"), strings.Contains(msg, "keys"):
		return "signature does not verify against the issuer's keys"
	case strings.Contains(msg, "malformed"):
		return "token is malformed"
	}
	return clip(msg)
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
