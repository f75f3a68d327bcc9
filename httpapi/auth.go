package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/internal/trust"
)

// Operators' credentials: named operator and viewer tokens, known by
// their digests, and the refusal any credential gets (a callback's own
// check is the webhook's, webhook.go).

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
