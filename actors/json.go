package actors

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// strictJSON decodes one message from another node: unknown fields and
// trailing data refused.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}
