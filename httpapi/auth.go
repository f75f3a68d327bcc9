package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/internal/trust"
)

// Callback modes: how a workflow may prove who it is.
const (
	ModeScoped           = "scoped"
	ModeShared           = "shared"
	ModeStandardWebhooks = "standard-webhooks"
	ModeGitHubOIDC       = "github-oidc"
)

// CallbackModes lists every mode, in the order the flag documents them.
var CallbackModes = []string{ModeScoped, ModeShared, ModeStandardWebhooks, ModeGitHubOIDC}

// Roles of an operator token: a viewer reads everything an operator
// may and changes nothing.
const (
	RoleOperator = "operator"
	RoleViewer   = "viewer"
)

// Operator is one named operator or viewer; only its token's SHA-256 is
// kept, so the file that lists them holds no token.
type Operator struct {
	Name        string
	Role        string
	TokenSHA256 [32]byte
}

// ParseOperators reads an operators file: `name role sha256-of-token` a
// line, blank lines and # comments ignored. Errors name the line.
func ParseOperators(b []byte) ([]Operator, error) {
	var out []Operator
	err := trust.EachLine(b, func(line int, text string) error {
		f := strings.Fields(text)
		if len(f) != 3 {
			return fmt.Errorf("line %d: want `name role sha256-of-token`", line)
		}
		if !validOperatorName(f[0]) {
			return fmt.Errorf("line %d: a name is 1..64 of [A-Za-z0-9._@-]", line)
		}
		if f[1] != RoleOperator && f[1] != RoleViewer {
			return fmt.Errorf("line %d: role must be operator or viewer", line)
		}
		raw, err := hex.DecodeString(f[2])
		if err != nil || len(raw) != sha256.Size {
			return fmt.Errorf("line %d: the third field is the token's SHA-256 in hex (sha256sum)", line)
		}
		op := Operator{Name: f[0], Role: f[1]}
		copy(op.TokenSHA256[:], raw)
		if slices.ContainsFunc(out, func(o Operator) bool { return o.Name == op.Name || o.TokenSHA256 == op.TokenSHA256 }) {
			return fmt.Errorf("line %d: name or token appears twice", line)
		}
		out = append(out, op)
		if len(out) > maxOperators {
			return fmt.Errorf("more than %d operators", maxOperators)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxOperators bounds the list every operator request is compared with.
const maxOperators = 256

func validOperatorName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '@' || c == '-') {
			return false
		}
	}
	return true
}

// authFail is a refused credential: its kind (invalid, unauthenticated,
// forbidden, rate limited) and a message that says which check failed,
// never the credential.
type authFail struct {
	refusal    refusal
	msg        string
	retryAfter string // overrides the refusal's
}

func (f *authFail) Error() string { return f.msg }

func (f *authFail) write(w http.ResponseWriter) {
	a := answers[f.refusal]
	if f.retryAfter != "" {
		a.retryAfter = f.retryAfter
	}
	respond(w, a, f.msg)
}

func unauthorized(format string, args ...any) *authFail {
	return &authFail{refusal: unauthenticated, msg: fmt.Sprintf(format, args...)}
}

// bearer reads the Authorization header: the scheme is case-insensitive,
// the token is what follows one space.
func bearer(r *http.Request) (token string, present bool, fail *authFail) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return "", false, nil
	}
	if len(h) > 1 {
		return "", true, &authFail{refusal: invalidRequest, msg: "more than one Authorization header"}
	}
	scheme, tok, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
		return "", true, unauthorized("Authorization must be `Bearer <token>`")
	}
	return tok, true, nil
}

// operatorOf finds the operator a token's digest belongs to, comparing it
// with every entry in constant time: neither the content nor which
// entry matched shows in the timing.
func (s *Server) operatorOf(got [32]byte) (Operator, bool) {
	found := -1
	for i := range s.operators {
		if subtle.ConstantTimeCompare(got[:], s.operators[i].TokenSHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Operator{}, false
	}
	return s.operators[found], true
}

func (s *Server) isSharedCallbackToken(got [32]byte) bool {
	return s.opts.CallbackToken != "" && subtle.ConstantTimeCompare(got[:], s.callback[:]) == 1
}

// operatorAccess authenticates an operator request: any named operator or
// viewer may read; only the operator role may change anything. A
// callback credential here is a valid token of the wrong role (403).
func (s *Server) operatorAccess(write bool, h func(http.ResponseWriter, *http.Request, httprouter.Params, Operator)) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		op, fail := s.operator(r, write)
		if fail != nil {
			fail.write(w)
			return
		}
		h(w, r, p, op)
	}
}

// operator is the operator a request's bearer token names, with the role
// write needs, or why not. Failures from one address are limited (a
// guessed token costs a minute of waiting after ten); a
// limited address is refused before its token is looked at.
func (s *Server) operator(r *http.Request, write bool) (Operator, *authFail) {
	addr := clientAddr(r)
	if fail := s.limiter.refused(addr, "api"); fail != nil {
		return Operator{}, fail
	}
	token, present, fail := bearer(r)
	if fail != nil {
		return Operator{}, fail
	}
	if !present {
		return Operator{}, unauthorized("a bearer token is required")
	}
	digest := sha256.Sum256([]byte(token)) // once, for every table it is compared with
	op, ok := s.operatorOf(digest)
	switch {
	case ok && write && op.Role != RoleOperator:
		return Operator{}, &authFail{refusal: forbidden, msg: "operator " + op.Name + " is a viewer: it may read, not change (T8)"}
	case ok:
		return op, nil
	case s.isSharedCallbackToken(digest) || s.validScoped(token):
		return Operator{}, &authFail{refusal: forbidden, msg: "this token's role may not call this endpoint"}
	}
	s.limiter.failed(addr)
	return Operator{}, unauthorized("unknown token")
}

func (s *Server) read(h func(http.ResponseWriter, *http.Request, httprouter.Params, Operator)) httprouter.Handle {
	return s.operatorAccess(false, h)
}

func (s *Server) write(h func(http.ResponseWriter, *http.Request, httprouter.Params, Operator)) httprouter.Handle {
	return s.operatorAccess(true, h)
}

func (s *Server) validScoped(token string) bool {
	if s.opts.CallbackKeys == nil || !trust.IsScoped(token) {
		return false
	}
	_, err := trust.VerifyScoped(s.opts.CallbackKeys, token, s.now(), s.opts.CallbackTokenTTL)
	return err == nil
}

// callerClaims is what a callback's credential says before the body is
// read: who sent it, and for a scoped credential which marquee and
// generation it speaks for.
type callerClaims struct {
	mode   string
	scoped *trust.Scoped // scoped mode, or the scoped credential beside an OIDC token
	runID  uint64
	oidc   bool
}

// ScopedHeader carries a scoped credential beside a GitHub OIDC token,
// for a run whose id warden does not know.
const ScopedHeader = "Warden-Callback-Token"

func (s *Server) modeOn(mode string) bool { return slices.Contains(s.modes, mode) }

// authenticateCallback checks a callback's credential against the modes
// that are on (T1-T4, T7). body is needed for Standard Webhooks signatures.
func (s *Server) authenticateCallback(r *http.Request, body []byte) (callerClaims, *authFail) {
	token, present, fail := bearer(r)
	if fail != nil {
		return callerClaims{}, fail
	}
	signed := r.Header.Get("Webhook-Signature") != ""
	extra := r.Header.Get(ScopedHeader)
	if signed && (present || extra != "") {
		return callerClaims{}, &authFail{refusal: invalidRequest, msg: "credentials of two kinds at once: a Standard Webhooks signature and a bearer token (T7)"}
	}
	now := s.now()
	if signed {
		if !s.modeOn(ModeStandardWebhooks) {
			return callerClaims{}, unauthorized("callback mode standard-webhooks is not enabled (--callback-auth)")
		}
		err := s.opts.Webhooks.Verify(r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), r.Header.Get("Webhook-Signature"), body, now)
		if err != nil {
			return callerClaims{}, unauthorized("%s", err.Error())
		}
		return callerClaims{mode: ModeStandardWebhooks}, nil
	}
	if !present {
		return callerClaims{}, unauthorized("a bearer token or a Standard Webhooks signature is required")
	}
	if extra != "" && !trust.IsJWT(token) {
		return callerClaims{}, &authFail{refusal: invalidRequest, msg: ScopedHeader + " only accompanies a GitHub OIDC token (T4); send a scoped credential as the bearer token instead"}
	}
	switch {
	case trust.IsScoped(token):
		if !s.modeOn(ModeScoped) {
			return callerClaims{}, unauthorized("callback mode scoped is not enabled (--callback-auth)")
		}
		sc, fail := s.verifyScoped(token, now)
		if fail != nil {
			return callerClaims{}, fail
		}
		return callerClaims{mode: ModeScoped, scoped: sc}, nil
	case trust.IsJWT(token):
		if !s.modeOn(ModeGitHubOIDC) || s.opts.OIDC == nil {
			return callerClaims{}, unauthorized("callback mode github-oidc is not enabled (--callback-auth)")
		}
		claims, err := s.opts.OIDC.Verify(r.Context(), token)
		if err != nil {
			return callerClaims{}, unauthorized("%s", err.Error())
		}
		c := callerClaims{mode: ModeGitHubOIDC, oidc: true, runID: claims.RunID}
		if extra != "" {
			sc, fail := s.verifyScoped(extra, now)
			if fail != nil {
				return callerClaims{}, fail
			}
			c.scoped = sc
		}
		return c, nil
	}
	digest := sha256.Sum256([]byte(token)) // once, for both tables
	if _, isOp := s.operatorOf(digest); isOp {
		return callerClaims{}, &authFail{refusal: forbidden, msg: "this token's role may not call this endpoint"}
	}
	if !s.isSharedCallbackToken(digest) {
		return callerClaims{}, unauthorized("unknown token")
	}
	if !s.modeOn(ModeShared) {
		return callerClaims{}, unauthorized("the shared callback token is not accepted: callback mode shared is off (--callback-auth)")
	}
	return callerClaims{mode: ModeShared}, nil
}

func (s *Server) verifyScoped(token string, now time.Time) (*trust.Scoped, *authFail) {
	if s.opts.CallbackKeys == nil {
		return nil, unauthorized("no callback signing key is configured")
	}
	sc, err := trust.VerifyScoped(s.opts.CallbackKeys, token, now, s.opts.CallbackTokenTTL)
	var exp *trust.ExpiredError
	switch {
	case errors.As(err, &exp):
		return nil, unauthorized("%s: a run that lives longer is dead anyway; dispatch again (T1)", exp.Error())
	case err != nil:
		return nil, unauthorized("%s", err.Error())
	}
	return &sc, nil
}

// bind checks a decoded callback against what its credential speaks for:
// a scoped credential names one marquee and one generation.
func (c callerClaims) bind(marqueeID string, generation uint64) (actors.CallbackAuth, *authFail) {
	auth := actors.CallbackAuth{Mode: c.mode, OIDC: c.oidc, RunID: c.runID}
	if c.scoped == nil {
		return auth, nil
	}
	if c.scoped.MarqueeID != marqueeID {
		return auth, &authFail{refusal: forbidden, msg: fmt.Sprintf("this credential speaks for marquee %s, not %s (T1)", c.scoped.MarqueeID, marqueeID)}
	}
	if c.scoped.Generation != generation {
		return auth, &authFail{refusal: forbidden, msg: fmt.Sprintf("this credential speaks for generation %d of marquee %s, not generation %d (T1)", c.scoped.Generation, marqueeID, generation)}
	}
	auth.ScopedVouched = c.oidc
	return auth, nil
}
