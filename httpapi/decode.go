package httpapi

import (
	"fmt"
	"unicode/utf8"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
)

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

// invalid is a 400 whose message names the field.
type invalid struct{ msg string }

func (e *invalid) Error() string { return e.msg }

// Unwrap makes a decoding refusal an errs.Invalid, so the one status table
// answers it 400 wherever it surfaces.
func (e *invalid) Unwrap() error { return errs.Invalid }

func invalidf(format string, args ...any) error { return &invalid{fmt.Sprintf(format, args...)} }

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

// wireCreate is POST /v1/marquees.
type wireCreate struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Pool       string          `json:"pool"`
	Connection *wireConnection `json:"connection"`
}

// DecodeCreate validates a create body.
func DecodeCreate(body []byte) (marquee.Create, error) {
	var w wireCreate
	if err := strictDecode(body, &w); err != nil {
		return marquee.Create{}, err
	}
	if !marquee.ValidID(w.ID) {
		return marquee.Create{}, invalidf("field id: must match [a-z0-9][a-z0-9-]{0,62}")
	}
	c := marquee.Create{ID: w.ID, Kind: marquee.Origin(w.Kind), Pool: w.Pool}
	switch c.Kind {
	case marquee.BYO:
		if w.Connection == nil {
			return marquee.Create{}, invalidf("field connection: required for kind byo")
		}
		if w.Pool != "" {
			return marquee.Create{}, invalidf("field pool: only for kind tutorial")
		}
	case marquee.Tutorial:
		if w.Connection != nil {
			return marquee.Create{}, invalidf("field connection: a tutorial marquee's connection comes from its workflow")
		}
	default:
		return marquee.Create{}, invalidf("field kind: must be byo or tutorial")
	}
	if w.Connection != nil {
		conn, err := w.Connection.toMachine()
		if err != nil {
			return marquee.Create{}, err
		}
		c.Connection = &conn
	}
	if len(w.Pool) > 63 {
		return marquee.Create{}, invalidf("field pool: at most 63 bytes")
	}
	return c, nil
}

func decodeDestroy(body []byte, by string) (marquee.Event, error) {
	var w struct {
		Reap bool `json:"reap"`
	}
	if len(body) == 0 {
		return marquee.Destroy{By: by}, nil
	}
	if err := strictDecode(body, &w); err != nil {
		return nil, err
	}
	return marquee.Destroy{Reap: w.Reap, By: by}, nil
}

// decodeEmpty accepts no body or an empty object: a command without
// arguments refuses every field (T6), so `{"x":1}` is a 400, not ignored.
func decodeEmpty(body []byte) error {
	if len(body) == 0 {
		return nil
	}
	var w struct{}
	return strictDecode(body, &w)
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

func clipWire(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
