package jsonappend

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzStringAsEncodingJSON: any string is written byte for byte as
// encoding/json writes it.
func FuzzStringAsEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x1f\b\f\n\r\t\x7f", "<>&", "\xff\xc3(", "\u2028\u2029", "é✓\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := String(nil, s); string(got) != string(want) {
			t.Fatalf("%q: wrote %s, encoding/json %s", s, got, want)
		}
	})
}

// TestTimeAsEncodingJSON: a time is written as time.Time.MarshalJSON
// writes it, zones and nanoseconds included, and refused where it is.
func TestTimeAsEncodingJSON(t *testing.T) {
	for _, at := range []time.Time{
		{},
		time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 3, 14, 0, 0, 123_456_789, time.FixedZone("x", -7*3600-30*60)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600)),
	} {
		want, werr := at.MarshalJSON()
		got, err := Time(nil, at)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%v: error %v, MarshalJSON's %v", at, err, werr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("%v: wrote %s, MarshalJSON %s", at, got, want)
		}
	}
}

// awkwardText is a text that needs escaping, as a TextMarshaler.
type awkwardText string

func (t awkwardText) AppendText(b []byte) ([]byte, error) { return append(b, t...), nil }
func (t awkwardText) MarshalText() ([]byte, error)        { return t.AppendText(nil) }

// TestTextAsEncodingJSON: a field written by its AppendText is what
// encoding/json writes for a TextMarshaler, escaped where the text needs
// it, and an object's fields are separated as encoding/json separates
// them.
func TestTextAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"vm_starting", "", "a\"b<c>\n", "é\xff\u2028"} {
		want, err := json.Marshal(struct {
			N int         `json:"n"`
			T awkwardText `json:"t"`
		}{1, awkwardText(s)})
		if err != nil {
			t.Fatal(err)
		}
		o := Object{}
		o.Begin()
		o.Int("n", 1)
		o.Text("t", awkwardText(s))
		o.End()
		if o.Err != nil || string(o.B) != string(want) {
			t.Fatalf("%q: wrote %s (%v), encoding/json %s", s, o.B, o.Err, want)
		}
	}
}
