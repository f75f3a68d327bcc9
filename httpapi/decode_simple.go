package httpapi

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
