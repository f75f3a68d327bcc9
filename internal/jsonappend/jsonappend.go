// Package jsonappend writes JSON by hand for the records written with
// every step, byte for byte as encoding/json writes them: a stored record
// reads back the same whichever wrote it, so no store format changes,
// and a record's encoding costs a tenth of reflection's. Each record's
// encoder is checked against encoding/json over every field
// (fieldcheck.Variants), so a field added to a record and not to its
// encoder fails a test.
package jsonappend

import (
	"encoding/base64"
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
		if safeASCII(s[i]) {
			i++
			continue
		}
		if n := plainRune(s[i:]); n > 0 {
			i += n
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		dst = appendEscape(append(dst, s[start:i]...), s[i:i+size])
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plainRune is the length of the non-ASCII character s starts with if
// encoding/json writes it as itself, else 0 (an ASCII byte is
// safeASCII's to tell).
func plainRune(s string) int {
	if s[0] < utf8.RuneSelf {
		return 0
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 0
	}
	return size
}

// safeASCII is an ASCII byte written as itself.
func safeASCII(c byte) bool {
	return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

const hex = "0123456789abcdef"

// appendEscape appends the escape of one character String does not
// write as itself.
func appendEscape(dst []byte, c string) []byte {
	switch r, _ := utf8.DecodeRuneInString(c); {
	case len(c) == 1 && c[0] >= utf8.RuneSelf:
		return append(dst, `\ufffd`...) // a byte that is not UTF-8
	case r == '\u2028' || r == '\u2029':
		return append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
	}
	switch b := c[0]; b {
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
	default:
		return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
	}
}

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

// Begin opens the object.
func (o *Object) Begin() { o.B = append(o.B, '{') }

// Open opens a nested object, the value of field name.
func (o *Object) Open(name string) { o.Key(name); o.Begin() }

// End closes the object last opened.
func (o *Object) End() { o.B = append(o.B, '}') }

// OpenList opens a list of objects, the value of field name: each opened
// by Item and closed by End, the list by CloseList.
func (o *Object) OpenList(name string) { o.Key(name); o.B = append(o.B, '[') }

// Item opens the list's next object, after a comma unless it is the first.
func (o *Object) Item() {
	if o.B[len(o.B)-1] != '[' {
		o.B = append(o.B, ',')
	}
	o.Begin()
}

// CloseList closes the list last opened.
func (o *Object) CloseList() { o.B = append(o.B, ']') }

// Key writes a field's name and its colon, after a comma unless it is
// the object's first; name is a literal the caller knows needs no escape.
func (o *Object) Key(name string) {
	if n := len(o.B); n > 0 && o.B[n-1] != '{' {
		o.B = append(o.B, ',')
	}
	o.B = append(append(append(o.B, '"'), name...), '"', ':')
}

func (o *Object) String(name, v string)      { o.Key(name); o.B = String(o.B, v) }
func (o *Object) Uint(name string, v uint64) { o.Key(name); o.B = strconv.AppendUint(o.B, v, 10) }
func (o *Object) Int(name string, v int)     { o.Key(name); o.B = strconv.AppendInt(o.B, int64(v), 10) }
func (o *Object) Bool(name string, v bool)   { o.Key(name); o.B = strconv.AppendBool(o.B, v) }

// Time writes a time field; a time encoding/json refuses is kept as Err.
func (o *Object) Time(name string, t time.Time) {
	o.Key(name)
	var err error
	o.B, err = Time(o.B, t)
	o.keep(err)
}

// Text writes a field by its AppendText, as encoding/json writes an
// encoding.TextMarshaler: its text as a string, escaped where it needs it.
func (o *Object) Text(name string, v interface {
	AppendText([]byte) ([]byte, error)
}) {
	o.Key(name)
	start := len(o.B)
	b, err := v.AppendText(append(o.B, '"'))
	o.keep(err)
	for _, c := range b[start+1:] {
		if !safeASCII(c) {
			// Escaped, or not ASCII: written as String writes it.
			o.B = String(b[:start], string(b[start+1:]))
			return
		}
	}
	o.B = append(b, '"')
}

func (o *Object) keep(err error) {
	if err != nil && o.Err == nil {
		o.Err = err
	}
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

// BytesOmitEmpty writes b as encoding/json writes a []byte: standard
// base64, padded.
func (o *Object) BytesOmitEmpty(name string, b []byte) {
	if len(b) > 0 {
		o.Key(name)
		o.B = append(o.B, '"')
		o.B = base64.StdEncoding.AppendEncode(o.B, b)
		o.B = append(o.B, '"')
	}
}

func (o *Object) TimeOmitZero(name string, t time.Time) {
	if !t.IsZero() {
		o.Time(name, t)
	}
}
