package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/trust"
)

// The webhook: POST /v1/webhooks/terraform, a workflow's callback. The
// handler reads the body, authenticates it, decodes it, binds the
// credential to what the body claims and asks the marquee's actor for its
// durable decision; this file holds the handler, the callback's
// credential check (an operator's is auth.go's) and the body's two
// readers, the simple one a workflow's step callbacks take and the strict
// one that reads every form and names every error.

// webhook is POST /v1/webhooks/terraform: the callback taken in
// (callbackIn), delivered to the marquee's actor, its durable decision
// answered. Every refusal is answered before anything is written.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	in, body, ok := s.callbackIn(w, r)
	if !ok {
		return
	}
	in.BodyHash = sha256.Sum256(body)
	ans, err := s.sys.Callback(r.Context(), in)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeRaw(w, http.StatusOK, ans.Body)
}

// callbackIn is what a callback goes through before any actor sees it:
// its body read, its credential checked (T1-T4), its Webhook-Id and body
// decoded, the credential bound to the marquee and generation the body
// claims. It answers every refusal itself (ok false). The request it
// returns has no body hash: only a delivery to an actor needs one.
func (s *Server) callbackIn(w http.ResponseWriter, r *http.Request) (in actors.CallbackRequest, body []byte, ok bool) {
	body, ok = readBody(w, r, false)
	if !ok {
		return in, nil, false
	}
	caller, fail := s.authenticateCallback(r, body)
	if fail != nil {
		fail.write(w)
		return in, nil, false
	}
	deliveryID, id, cb, ok := s.decodeDelivery(w, r, body)
	if !ok {
		return in, nil, false
	}
	auth, fail := caller.bind(id, cb.Generation)
	if fail != nil {
		fail.write(w)
		return in, nil, false
	}
	return actors.CallbackRequest{MarqueeID: id, DeliveryID: deliveryID, Auth: auth, Callback: cb}, body, true
}

// decodeDelivery reads a callback's Webhook-Id and its body, answering
// what is wrong with either (the webhook and a dry run read them alike).
func (s *Server) decodeDelivery(w http.ResponseWriter, r *http.Request, body []byte) (string, string, marquee.Callback, bool) {
	deliveryID := r.Header.Get("Webhook-Id")
	if deliveryID != "" && !validDeliveryID(deliveryID) {
		refuse(w, invalidRequest, "header Webhook-Id: 1..200 printable ASCII characters")
		return "", "", marquee.Callback{}, false
	}
	id, cb, err := DecodeCallback(body)
	if err != nil {
		s.badRequest(w, err)
		return "", "", marquee.Callback{}, false
	}
	return deliveryID, id, cb, true
}

// Callback modes: how a workflow may prove who it is.
const (
	ModeScoped           = "scoped"
	ModeShared           = "shared"
	ModeStandardWebhooks = "standard-webhooks"
	ModeGitHubOIDC       = "github-oidc"
)

// CallbackModes lists every mode, in the order the flag documents them.
var CallbackModes = []string{ModeScoped, ModeShared, ModeStandardWebhooks, ModeGitHubOIDC}

// isSharedCallbackToken compares a token's digest with the shared
// token's in constant time.
func (s *Server) isSharedCallbackToken(got [32]byte) bool {
	return s.opts.CallbackToken != "" && subtle.ConstantTimeCompare(got[:], s.callback[:]) == 1
}

// validScoped says whether token is a scoped credential that verifies now.
func (s *Server) validScoped(token string) bool {
	_, fail := s.verifyScoped(token)
	return fail == nil
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
	if signed {
		if !s.modeOn(ModeStandardWebhooks) {
			return callerClaims{}, unauthorized("callback mode standard-webhooks is not enabled (--callback-auth)")
		}
		err := s.opts.Webhooks.Verify(r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), r.Header.Get("Webhook-Signature"), body, s.now())
		if err != nil {
			return callerClaims{}, unauthorized("%s", err.Error())
		}
		return callerClaims{mode: ModeStandardWebhooks}, nil
	}
	if !present {
		return callerClaims{}, unauthorized("a bearer token or a Standard Webhooks signature is required")
	}
	// The shared token is known by its digest whatever its shape, and is
	// told first: the other shapes are told apart only for the tokens
	// that are not it. Alone, it is the whole check.
	digest := sha256.Sum256([]byte(token)) // once, for both tables
	if extra == "" && s.isSharedCallbackToken(digest) {
		if !s.modeOn(ModeShared) {
			return callerClaims{}, unauthorized("the shared callback token is not accepted: callback mode shared is off (--callback-auth)")
		}
		return callerClaims{mode: ModeShared}, nil
	}
	if extra != "" && !trust.IsJWT(token) {
		return callerClaims{}, &authFail{refusal: invalidRequest, msg: ScopedHeader + " only accompanies a GitHub OIDC token (T4); send a scoped credential as the bearer token instead"}
	}
	switch {
	case trust.IsScoped(token):
		if !s.modeOn(ModeScoped) {
			return callerClaims{}, unauthorized("callback mode scoped is not enabled (--callback-auth)")
		}
		sc, fail := s.verifyScoped(token)
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
			sc, fail := s.verifyScoped(extra)
			if fail != nil {
				return callerClaims{}, fail
			}
			c.scoped = sc
		}
		return c, nil
	}
	if _, isOp := s.operatorOf(digest); isOp {
		return callerClaims{}, &authFail{refusal: forbidden, msg: "this token's role may not call this endpoint"}
	}
	return callerClaims{}, unauthorized("unknown token")
}

// verifyScoped verifies a scoped credential now, or says why not.
func (s *Server) verifyScoped(token string) (*trust.Scoped, *authFail) {
	if s.opts.CallbackKeys == nil {
		return nil, unauthorized("no callback signing key is configured")
	}
	sc, err := trust.VerifyScoped(s.opts.CallbackKeys, token, s.now(), s.opts.CallbackTokenTTL)
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

// Limits on callback fields: generous for real values, small enough that
// nothing from outside can bloat a snapshot.
const (
	maxField      = 256   // host, user, domains, acme-dns fields
	maxKey        = 16384 // an SSH private key
	maxReason     = 2048
	maxDeliveryID = 200
)

// wireCallback is the webhook body (docs/rules/http-api.md).
type wireCallback struct {
	MarqueeID  string          `json:"marquee_id"`
	Verb       string          `json:"verb"`
	Generation *uint64         `json:"generation"`
	Step       string          `json:"step"`
	Connection *wireConnection `json:"connection"`
	Reason     string          `json:"reason"`
	// generation is where the simple reader puts Generation's value, so
	// that the pointer does not take it to the heap.
	generation uint64
}

// strictCallback reads body with the strict decoder, which sees every
// form and names every error.
func strictCallback(body []byte) (wireCallback, error) {
	var w wireCallback
	err := strictDecode(body, &w)
	return w, err
}

type wireConnection struct {
	Host          string       `json:"host"`
	Port          int          `json:"port"`
	User          string       `json:"user"`
	SSHPrivateKey string       `json:"ssh_private_key"`
	FreeDomain    string       `json:"free_domain"`
	ACMEDNS       *wireACMEDNS `json:"acme_dns"`
}

type wireACMEDNS struct {
	ServerURL  string `json:"server_url"`
	Username   string `json:"username"`
	Password   string `json:"password"`
	Subdomain  string `json:"subdomain"`
	FullDomain string `json:"full_domain"`
}

// DecodeCallback validates a webhook body into the machine's Callback.
func DecodeCallback(body []byte) (string, marquee.Callback, error) {
	var w wireCallback // on the stack: only the strict decoder's copy escapes
	if !decodeSimple(body, &w) {
		var err error
		if w, err = strictCallback(body); err != nil {
			return "", marquee.Callback{}, err
		}
	}
	if !marquee.ValidID(w.MarqueeID) {
		return "", marquee.Callback{}, invalidf("field marquee_id: must match [a-z0-9][a-z0-9-]{0,62}")
	}
	if w.Generation == nil {
		return "", marquee.Callback{}, invalidf("field generation: required (0 means unversioned)")
	}
	c := marquee.Callback{Verb: marquee.Verb(w.Verb), Generation: *w.Generation}
	known := false
	for _, v := range marquee.Verbs {
		known = known || v == c.Verb
	}
	if !known {
		return "", marquee.Callback{}, invalidf("field verb: %q is not one of step, deployed, destroyed, failed, null, rebooted", clipWire(w.Verb))
	}
	if c.Verb == marquee.VerbStep {
		if w.Step == "" {
			return "", marquee.Callback{}, invalidf("field step: required for verb step")
		}
		p, err := marquee.ParseProgress(w.Step)
		if err != nil {
			return "", marquee.Callback{}, invalidf("field step: %q is not a known step", clipWire(w.Step))
		}
		c.Step = p
	} else if w.Step != "" {
		return "", marquee.Callback{}, invalidf("field step: only for verb step")
	}
	if c.Verb == marquee.VerbDeployed {
		if w.Connection == nil {
			return "", marquee.Callback{}, invalidf("field connection: required for verb deployed")
		}
		conn, err := w.Connection.toMachine()
		if err != nil {
			return "", marquee.Callback{}, err
		}
		c.Connection = &conn
	} else if w.Connection != nil {
		return "", marquee.Callback{}, invalidf("field connection: only for verb deployed")
	}
	if len(w.Reason) > maxReason || !utf8.ValidString(w.Reason) {
		return "", marquee.Callback{}, invalidf("field reason: at most %d bytes of UTF-8", maxReason)
	}
	c.Reason = w.Reason
	return w.MarqueeID, c, nil
}

func (w *wireConnection) toMachine() (marquee.Connection, error) {
	check := func(name, v string, limit int, required bool) error {
		if required && v == "" {
			return invalidf("field connection.%s: required", name)
		}
		if len(v) > limit || !utf8.ValidString(v) {
			return invalidf("field connection.%s: at most %d bytes of UTF-8", name, limit)
		}
		return nil
	}
	for _, f := range []struct {
		name     string
		v        string
		limit    int
		required bool
	}{{"host", w.Host, maxField, true}, {"user", w.User, maxField, true}, {"ssh_private_key", w.SSHPrivateKey, maxKey, true},
		{"free_domain", w.FreeDomain, maxField, false}} {
		if err := check(f.name, f.v, f.limit, f.required); err != nil {
			return marquee.Connection{}, err
		}
	}
	if w.Port < 1 || w.Port > 65535 {
		return marquee.Connection{}, invalidf("field connection.port: must be 1..65535")
	}
	c := marquee.Connection{Host: w.Host, Port: w.Port, User: w.User, SSHPrivateKey: w.SSHPrivateKey, FreeDomain: w.FreeDomain}
	if a := w.ACMEDNS; a != nil {
		for _, f := range []struct{ name, v string }{{"server_url", a.ServerURL}, {"username", a.Username}, {"password", a.Password},
			{"subdomain", a.Subdomain}, {"full_domain", a.FullDomain}} {
			if err := check("acme_dns."+f.name, f.v, maxField, false); err != nil {
				return marquee.Connection{}, err
			}
		}
		c.ACMEDNS = marquee.ACMEDNS(*a)
	}
	return c, nil
}

// validDeliveryID bounds the Webhook-Id header: printable ASCII, no spaces.
func validDeliveryID(s string) bool {
	if len(s) == 0 || len(s) > maxDeliveryID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// A callback body in its simple form is a flat object of the fields every
// step callback has: ASCII strings without escapes, a generation of
// digits. decodeSimple reads that form by hand; anything else (a
// connection, an escape, a repeated or unknown field, a byte it does not
// expect) it leaves to strictDecode, which reads every form and names
// what is wrong. It accepts only what strictDecode reads the same way
// (FuzzSimpleCallbackDecodesAsStrictDoes). strictDecode was a tenth of
// the server's own work on a durable callback (docs/decisions, "The durable
// path's CPU").

// decodeSimple fills w from body if body is in the simple form.
func decodeSimple(body []byte, w *wireCallback) bool {
	s := simpleScan{b: body}
	if !s.punct('{') {
		return false
	}
	var seen uint8
	for first := true; ; first = false {
		if s.punct('}') {
			s.space()
			return s.i == len(s.b)
		}
		if !first && !s.punct(',') {
			return false
		}
		name, ok := s.str()
		if !ok || !s.punct(':') {
			return false
		}
		bit, ok := s.member(name, w)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
	}
}

// simpleScan reads body from i.
type simpleScan struct {
	b []byte
	i int
}

// member reads the value of the field name into w, and says which field
// it was.
func (s *simpleScan) member(name string, w *wireCallback) (uint8, bool) {
	var into *string
	var bit uint8
	switch name {
	case "marquee_id":
		into, bit = &w.MarqueeID, 1
	case "verb":
		into, bit = &w.Verb, 2
	case "step":
		into, bit = &w.Step, 4
	case "reason":
		into, bit = &w.Reason, 8
	case "generation":
		g, ok := s.uint()
		if ok {
			w.generation = g
			w.Generation = &w.generation
		}
		return 16, ok
	default:
		return 0, false
	}
	v, ok := s.str()
	*into = v
	return bit, ok
}

func (s *simpleScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// punct skips white space and reads c.
func (s *simpleScan) punct(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes, after white
// space.
func (s *simpleScan) str() (string, bool) {
	if !s.punct('"') {
		return "", false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
	}
	return "", false
}

// uint reads a JSON integer, after white space, without a sign, a
// fraction or an exponent, that fits a uint64.
func (s *simpleScan) uint() (uint64, bool) {
	s.space()
	start := s.i
	var n uint64
	for ; s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	digits := s.i - start
	if digits == 0 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}
