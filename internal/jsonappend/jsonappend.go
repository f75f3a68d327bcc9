// Package jsonappend writes JSON by hand for the records written with
// every step, byte for byte as encoding/json writes them: a stored record
// reads back the same whichever wrote it, so no store format changes,
// and a record's encoding costs a tenth of reflection's. Each record's
// encoder is checked against encoding/json over every field
// (fieldcheck.Variants), so a field added to a record and not to its
// encoder fails a test.
package jsonappend

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// String appends s as encoding/json does: quoted, with <, > and &
// escaped (json.Marshal's HTML escaping), invalid UTF-8 as U+FFFD and
// U+2028, U+2029 escaped.
func String(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = escapeByte(dst, b)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hex = "0123456789abcdef"

// safe is a byte written as itself.
func safe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

func escapeByte(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
}

// Key appends a field's name and its colon, after a comma unless it is
// the object's first; name is a literal the caller knows needs no escape.
func Key(dst []byte, name string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// Uint appends n.
func Uint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }

// Int appends n.
func Int(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// Bool appends b.
func Bool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }

// Time appends t as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds, quoted), refusing what it refuses.
func Time(dst []byte, t time.Time) ([]byte, error) {
	dst = append(dst, '"')
	dst, err := t.AppendText(dst)
	return append(dst, '"'), err
}

// Object writes one JSON object's fields by hand, keeping the first
// error; B is the encoding so far.
type Object struct {
	B   []byte
	Err error
}

// Begin opens the object (or a nested one, after its Key).
func (o *Object) Begin() { o.B = append(o.B, '{') }

// End closes it.
func (o *Object) End() { o.B = append(o.B, '}') }

// Key writes a field's name (a literal needing no escape).
func (o *Object) Key(name string) { o.B = Key(o.B, name) }

func (o *Object) String(name, v string)      { o.Key(name); o.B = String(o.B, v) }
func (o *Object) Uint(name string, v uint64) { o.Key(name); o.B = Uint(o.B, v) }
func (o *Object) Int(name string, v int)     { o.Key(name); o.B = Int(o.B, int64(v)) }
func (o *Object) Bool(name string, v bool)   { o.Key(name); o.B = Bool(o.B, v) }

// Time writes a time field; a time encoding/json refuses is kept as Err.
func (o *Object) Time(name string, t time.Time) {
	o.Key(name)
	var err error
	if o.B, err = Time(o.B, t); err != nil && o.Err == nil {
		o.Err = err
	}
}

// Text writes a field encoded by its AppendText (encoding/json writes an
// encoding.TextMarshaler's text as a string; the texts here need no
// escaping, which AppendText's callers guarantee).
func (o *Object) Text(name string, v interface {
	AppendText([]byte) ([]byte, error)
}) {
	o.Key(name)
	o.B = append(o.B, '"')
	var err error
	if o.B, err = v.AppendText(o.B); err != nil && o.Err == nil {
		o.Err = err
	}
	o.B = append(o.B, '"')
}

// The fields tagged omitempty (or omitzero, for a time) are left out when
// empty, as encoding/json leaves them.

func (o *Object) StringOmitEmpty(name, v string) {
	if v != "" {
		o.String(name, v)
	}
}

func (o *Object) UintOmitEmpty(name string, v uint64) {
	if v != 0 {
		o.Uint(name, v)
	}
}

func (o *Object) BoolOmitEmpty(name string, v bool) {
	if v {
		o.Bool(name, v)
	}
}

func (o *Object) TimeOmitZero(name string, t time.Time) {
	if !t.IsZero() {
		o.Time(name, t)
	}
}
