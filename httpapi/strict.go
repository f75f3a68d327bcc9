package httpapi

import (
	"errors"
	"net/url"
	"slices"
	"strings"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// strictDecode decodes exactly one JSON value into v. Field names match
// exactly (no case folding, so "MARQUEE_ID" is not "marquee_id"); a repeated
// name (escaped or not), an unknown name, trailing data, a wrong type or
// invalid UTF-8 is a 400 whose message names the field. The standard
// library's decoder folds case and lets a repeated field win silently,
// which let one body name two marquees; the JSON v2 decoder refuses both
// by default.
func strictDecode(body []byte, v any) error {
	if len(body) == 0 {
		return invalidf("body is empty")
	}
	err := json.Unmarshal(body, v, json.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var se *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &se):
		field := fieldName(se.JSONPointer)
		if errors.Is(se.Err, json.ErrUnknownName) {
			return invalidf("unknown field %q", field)
		}
		if field == "" {
			return invalidf("body: wrong type (want a JSON object)")
		}
		return invalidf("field %s: wrong type or out of range", field)
	case errors.As(err, &syn):
		field := fieldName(syn.JSONPointer)
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			return invalidf("field %s: repeated", field) // the pointer names the repeated member
		case syn.Err.Error() == "invalid UTF-8" && field != "": // jsonwire's error is internal
			return invalidf("field %s: invalid UTF-8", field)
		case syn.Err.Error() == "invalid UTF-8":
			return invalidf("body: invalid UTF-8")
		case strings.Contains(syn.Err.Error(), "after top-level value"):
			return invalidf("body has data after the JSON object")
		}
		return invalidf("body is not valid JSON (offset %d)", syn.ByteOffset)
	}
	return invalidf("body is not valid JSON")
}

// fieldName turns a JSON pointer (/connection/port) into the dotted name
// the contract's messages use (connection.port), bounded in length since it
// comes from the caller.
func fieldName(p jsontext.Pointer) string {
	s := strings.TrimPrefix(string(p), "/")
	s = strings.ReplaceAll(s, "/", ".")
	s = strings.ReplaceAll(s, "~1", "/")
	s = strings.ReplaceAll(s, "~0", "~")
	return clipWire(s)
}

// queryRule is what one query parameter of one endpoint accepts: any value
// (checked by the handler), or one of a fixed list.
type queryRule struct {
	name   string
	values []string // nil: the handler checks the value
}

// checkQuery refuses unknown parameter names, repeated parameters and
// values outside a fixed list: `?lifecycle=bogus` is a 400, never an
// empty list that looks like an answer.
func checkQuery(q url.Values, rules ...queryRule) error {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // the first problem reported is the same every time
	for _, name := range names {
		i := slices.IndexFunc(rules, func(r queryRule) bool { return r.name == name })
		if i < 0 {
			known := make([]string, len(rules))
			for j, r := range rules {
				known[j] = r.name
			}
			if len(known) == 0 {
				return invalidf("query %q: this endpoint takes no query parameters", clipWire(name))
			}
			return invalidf("query %q: unknown parameter (known: %s)", clipWire(name), strings.Join(known, ", "))
		}
		vals := q[name]
		if len(vals) != 1 {
			return invalidf("query %s: given %d times", name, len(vals))
		}
		if r := rules[i]; r.values != nil && !slices.Contains(r.values, vals[0]) {
			return invalidf("query %s: %q is not one of %s", name, clipWire(vals[0]), strings.Join(r.values, ", "))
		}
	}
	return nil
}
