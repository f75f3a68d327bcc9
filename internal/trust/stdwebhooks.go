package trust

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks: a sender signs "{id}.{timestamp}.{body}" and sends
// the headers webhook-id, webhook-timestamp and webhook-signature, the last
// a space-separated list of "v1,<base64 HMAC-SHA256>" (a shared whsec_
// secret) and "v1a,<base64 ed25519 signature>" (a sender's key pair, whose
// whpk_ public key the receiver pins). Several signatures and several
// secrets are accepted at once, so either side can rotate.

// Tolerance is how far a webhook-timestamp may be from now, either way.
const Tolerance = 5 * time.Minute

// Limits on the headers: a few signatures during a rotation, never a
// thousand to verify.
const (
	maxSignatures     = 8
	maxSignatureField = 2048
)

// Webhooks holds the accepted secrets and public keys.
type Webhooks struct {
	Secrets    [][]byte
	PublicKeys []ed25519.PublicKey
}

// Configured reports whether anything can be verified.
func (w *Webhooks) Configured() bool {
	return w != nil && (len(w.Secrets) > 0 || len(w.PublicKeys) > 0)
}

// ParseSecret reads a whsec_ secret (the prefix is optional, as senders'
// consoles vary).
func ParseSecret(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "whsec_"))
	if err != nil || len(raw) < 16 || len(raw) > 64 {
		return nil, errors.New("a whsec_ secret is base64 of 16 to 64 bytes")
	}
	return raw, nil
}

// ParsePublicKey reads a whpk_ ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "whpk_"))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("a whpk_ key is base64 of a 32-byte ed25519 public key")
	}
	return raw, nil
}

// ParseLines reads one secret or key a line (blank lines and # comments
// ignored) with parse; errors name the line only.
func ParseLines[T any](b []byte, parse func(string) (T, error)) ([]T, error) {
	var out []T
	err := EachLine(b, func(line int, text string) error {
		v, err := parse(text)
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, v)
		if len(out) > maxKeys {
			return fmt.Errorf("more than %d entries", maxKeys)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WebhookError says which check a Standard Webhooks request failed (401).
type WebhookError struct{ Check string }

func (e *WebhookError) Error() string { return "standard webhooks: " + e.Check }

func webhookErr(format string, args ...any) error {
	return &WebhookError{Check: fmt.Sprintf(format, args...)}
}

// Signature is one entry of a webhook-signature header.
type Signature struct {
	Version string // v1 or v1a
	Value   []byte
}

// ParseSignatures reads a webhook-signature header, bounded.
func ParseSignatures(header string) ([]Signature, error) {
	if header == "" {
		return nil, webhookErr("webhook-signature is missing")
	}
	if len(header) > maxSignatureField {
		return nil, webhookErr("webhook-signature is over %d bytes", maxSignatureField)
	}
	var out []Signature
	for _, part := range strings.Fields(header) {
		v, sig, ok := strings.Cut(part, ",")
		if !ok || (v != "v1" && v != "v1a") {
			continue // a version this receiver does not know; others may still match
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			return nil, webhookErr("a %s signature is not base64", v)
		}
		out = append(out, Signature{Version: v, Value: raw})
		if len(out) > maxSignatures {
			return nil, webhookErr("more than %d signatures", maxSignatures)
		}
	}
	if len(out) == 0 {
		return nil, webhookErr("webhook-signature holds no v1 or v1a signature")
	}
	return out, nil
}

// ParseTimestamp reads webhook-timestamp (Unix seconds).
func ParseTimestamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, webhookErr("webhook-timestamp is missing")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || len(s) > 12 {
		return time.Time{}, webhookErr("webhook-timestamp is not Unix seconds")
	}
	return time.Unix(n, 0), nil
}

func signedContent(id, timestamp string, body []byte) []byte {
	b := make([]byte, 0, len(id)+len(timestamp)+len(body)+2)
	b = append(b, id...)
	b = append(b, '.')
	b = append(b, timestamp...)
	b = append(b, '.')
	return append(b, body...)
}

// Verify checks one request: the timestamp within Tolerance of now, then
// any signature under any secret or key (constant-time for HMAC).
func (w *Webhooks) Verify(id, timestamp, signature string, body []byte, now time.Time) error {
	if id == "" {
		return webhookErr("webhook-id is missing")
	}
	ts, err := ParseTimestamp(timestamp)
	if err != nil {
		return err
	}
	if d := now.Sub(ts); d > Tolerance || d < -Tolerance {
		return webhookErr("webhook-timestamp %s is more than %s from now", ts.UTC().Format(time.RFC3339), Tolerance)
	}
	sigs, err := ParseSignatures(signature)
	if err != nil {
		return err
	}
	content := signedContent(id, timestamp, body)
	for _, s := range sigs {
		switch s.Version {
		case "v1":
			for _, secret := range w.Secrets {
				m := hmac.New(sha256.New, secret)
				m.Write(content)
				if hmac.Equal(m.Sum(nil), s.Value) {
					return nil
				}
			}
		case "v1a":
			for _, pk := range w.PublicKeys {
				if len(s.Value) == ed25519.SignatureSize && ed25519.Verify(pk, content, s.Value) {
					return nil
				}
			}
		}
	}
	return webhookErr("no signature matches a configured secret or key")
}

// SignV1 makes a v1 signature entry (a sender's side: tests, the bench and
// `warden callback`).
func SignV1(secret []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(signedContent(id, timestamp, body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignV1a makes a v1a signature entry.
func SignV1a(key ed25519.PrivateKey, id, timestamp string, body []byte) string {
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(key, signedContent(id, timestamp, body)))
}
