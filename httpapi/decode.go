package httpapi

import (
	"fmt"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/actors/marquee"
)

// invalid is a 400 whose message names the field.
type invalid struct{ msg string }

func (e *invalid) Error() string { return e.msg }

// Unwrap makes a decoding refusal an errs.Invalid, so the one status table
// answers it 400 wherever it surfaces.
func (e *invalid) Unwrap() error { return errs.Invalid }

func invalidf(format string, args ...any) error { return &invalid{fmt.Sprintf(format, args...)} }

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

func clipWire(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
