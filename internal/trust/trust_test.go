package trust

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestKeyringRoundTripAndRotation(t *testing.T) {
	k := &Keyring{Keys: []Key{NewKey()}}
	first := k.Active()
	k.Rotate(t0)
	require.NotEqual(t, first.ID, k.Active().ID)
	back, err := ParseKeyring(k.Format("a comment\nover two lines"))
	require.NoError(t, err)
	require.Equal(t, k.Keys, back.Keys)
	require.True(t, back.Keys[1].Retired.Equal(t0))

	back.Prune(t0.Add(2*time.Hour), time.Hour, nil)
	require.Len(t, back.Keys, 1, "a retired key goes once its overlap has passed")

	for _, bad := range []string{"", "# only a comment\n", "k1 notbase64\n", "K1 " + base64.StdEncoding.EncodeToString(make([]byte, 32)),
		"k1 " + base64.StdEncoding.EncodeToString(make([]byte, 16)), "k1 " + base64.StdEncoding.EncodeToString(make([]byte, 32)) + " retired=2026-01-01T00:00:00Z\n"} {
		_, err := ParseKeyring([]byte(bad))
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "AAAA", "errors never quote a key")
	}
}

// T11: a key file others may read is refused, with the fix in the message.
func TestT11KeyFilesMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seal.key")
	k, created, err := LoadOrCreateKeyring(path, "test")
	require.NoError(t, err)
	require.True(t, created)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "T11: created 0600")
	again, created, err := LoadOrCreateKeyring(path, "test")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, k.Active(), again.Active())

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = LoadKeyring(path)
	require.ErrorContains(t, err, "chmod 600 "+path)
	require.NoError(t, os.Chmod(dir, 0o755))
	require.ErrorContains(t, CheckPrivate(dir), "chmod 700 "+dir)
}

// T1: derived credentials bind a marquee, a generation and an expiry.
func TestT1ScopedCredentialVerification(t *testing.T) {
	k := &Keyring{Keys: []Key{NewKey()}}
	tok := MintScoped(k, "m-1", 7, t0.Add(time.Hour))
	s, err := VerifyScoped(k, tok, t0, time.Hour)
	require.NoError(t, err)
	require.Equal(t, Scoped{MarqueeID: "m-1", Generation: 7, Expires: t0.Add(time.Hour)}, s)

	// Any field changed breaks the MAC. The MAC itself is changed in its
	// middle, to a character it did not have: appending "AA" over its last
	// two characters left it unchanged once in 4,096 runs (a flaky CI).
	mid := len(tok) - 20
	other := byte('A')
	if tok[mid] == 'A' {
		other = 'B'
	}
	forgedMAC := tok[:mid] + string(other) + tok[mid+1:]
	for _, forged := range []string{strings.Replace(tok, ".m-1.", ".m-2.", 1), strings.Replace(tok, ".7.", ".8.", 1),
		strings.Replace(tok, ".7."+strings.Split(tok, ".")[4], ".7.9999999999", 1), forgedMAC} {
		_, err := VerifyScoped(k, forged, t0, time.Hour)
		require.ErrorIs(t, err, ErrBadScoped, forged)
	}
	_, err = VerifyScoped(k, tok, t0.Add(time.Hour), time.Hour)
	var exp *ExpiredError
	require.ErrorAs(t, err, &exp, "expired at its expiry")
	require.Contains(t, err.Error(), "expired at")

	// Rotation: the previous key verifies for the overlap, then not.
	k.Rotate(t0)
	_, err = VerifyScoped(k, tok, t0.Add(30*time.Minute), time.Hour)
	require.NoError(t, err, "a retired key verifies during the overlap")
	newer := MintScoped(k, "m-1", 8, t0.Add(3*time.Hour))
	require.NotEqual(t, strings.Split(tok, ".")[1], strings.Split(newer, ".")[1], "new credentials use the new key")
	_, err = VerifyScoped(k, newer, t0.Add(2*time.Hour), time.Hour)
	require.NoError(t, err)
	long := &Keyring{Keys: []Key{k.Keys[1]}}
	longTok := MintScoped(long, "m-1", 7, t0.Add(5*time.Hour))
	_, err = VerifyScoped(k, longTok, t0.Add(2*time.Hour), time.Hour)
	require.ErrorIs(t, err, ErrScopedRetired, "past the overlap a retired key verifies nothing")
	for _, junk := range []string{"", "wcb1", "wcb1.....", "Bearer x", "wcb1.k.m-1.x.1.mac", strings.Repeat("a", 500)} {
		_, err := VerifyScoped(k, junk, t0, time.Hour)
		require.Error(t, err)
	}
}

// T3: the Standard Webhooks specification's published test vector.
func TestT3StandardWebhooksTestVector(t *testing.T) {
	secret, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	body := []byte(`{"test": 2432232314}`)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SignV1(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body))
	w := &Webhooks{Secrets: [][]byte{secret}}
	at := time.Unix(1614265330, 0)
	require.NoError(t, w.Verify("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, at))
	require.Error(t, w.Verify("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{"test": 2432232315}`), at))
	require.Error(t, w.Verify("msg_other", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, at))
	err = w.Verify("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, at.Add(5*time.Minute+time.Second))
	var we *WebhookError
	require.ErrorAs(t, err, &we)
	require.Contains(t, err.Error(), "webhook-timestamp")
	require.NoError(t, w.Verify("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, at.Add(5*time.Minute)), "exactly 5 minutes is inside")
}

// T3: v1a is ed25519 over the same content, with pinned public keys.
func TestT3V1aAndRotation(t *testing.T) {
	seed := bytes.Repeat([]byte{3}, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seed)
	pk, err := ParsePublicKey("whpk_" + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)))
	require.NoError(t, err)
	old, cur := bytes.Repeat([]byte{1}, 24), bytes.Repeat([]byte{2}, 24)
	w := &Webhooks{Secrets: [][]byte{cur, old}, PublicKeys: []ed25519.PublicKey{pk}}
	body := []byte(`{"a":1}`)
	ts := "1700000000"
	now := time.Unix(1700000000, 0)
	require.NoError(t, w.Verify("id", ts, SignV1a(priv, "id", ts, body), body, now))
	require.NoError(t, w.Verify("id", ts, SignV1(old, "id", ts, body), body, now), "the secret being rotated out still verifies")
	require.NoError(t, w.Verify("id", ts, "v2,xyz "+SignV1(cur, "id", ts, body), body, now), "unknown versions are skipped")
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, 32))
	require.Error(t, w.Verify("id", ts, SignV1a(other, "id", ts, body), body, now))
	require.Error(t, w.Verify("id", ts, strings.Repeat("v1,AAAA ", 20), body, now), "a bounded number of signatures")
	_, err = ParseLines([]byte("whsec_"+base64.StdEncoding.EncodeToString(cur)+"\n\n# note\nwhsec_???\n"), ParseSecret)
	require.ErrorContains(t, err, "line 4")
}

// T10: sealed values open only in their own record and field.
func TestT10SealBindsRecordAndField(t *testing.T) {
	k := &Keyring{Keys: []Key{NewKey()}}
	s := NewSealer(k)
	ct := s.Seal("ssh-key-material", "m/m-1", "ssh_private_key")
	require.True(t, IsSealed(ct))
	require.NotContains(t, ct, "ssh-key-material")
	require.Equal(t, k.Active().ID, SealedKeyID(ct))
	pt, err := s.Open(ct, "m/m-1", "ssh_private_key")
	require.NoError(t, err)
	require.Equal(t, "ssh-key-material", pt)
	_, err = s.Open(ct, "m/m-2", "ssh_private_key")
	require.ErrorContains(t, err, "does not open", "a ciphertext moved to another record")
	_, err = s.Open(ct, "m/m-1", "acme_dns.password")
	require.Error(t, err, "or another field")
	require.NotEqual(t, ct, s.Seal("ssh-key-material", "m/m-1", "ssh_private_key"), "a fresh nonce every time")
	require.Equal(t, "", s.Seal("", "m/m-1", "x"), "whether a secret exists is not itself a secret")
	clear, err := s.Open("legacy clear value", "m/m-1", "x")
	require.NoError(t, err)
	require.Equal(t, "legacy clear value", clear, "records from before sealing still load")

	k.Rotate(t0)
	pt, err = s.Open(ct, "m/m-1", "ssh_private_key")
	require.NoError(t, err, "an old key still opens")
	require.Equal(t, "ssh-key-material", pt)
	gone := NewSealer(&Keyring{Keys: []Key{NewKey()}})
	_, err = gone.Open(ct, "m/m-1", "ssh_private_key")
	require.True(t, errors.Is(err, ErrSealedNoKey))
}

func TestWriteFileAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, WriteFileAtomic(path, []byte("one")))
	require.NoError(t, WriteFileAtomic(path, []byte("two")))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	entries, _ := os.ReadDir(filepath.Dir(path))
	require.Len(t, entries, 1, "no temporary file left behind")
}

// FuzzParseSignatures: any header is a list of bounded signatures or a
// WebhookError, never a panic.
func FuzzParseSignatures(f *testing.F) {
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	f.Add("v1a,AAAA v1,BBBB")
	f.Add("v1,")
	f.Add(strings.Repeat("v1,AAAA ", 10))
	f.Fuzz(func(t *testing.T, h string) {
		sigs, err := ParseSignatures(h)
		if err != nil {
			var we *WebhookError
			require.ErrorAs(t, err, &we)
			return
		}
		require.NotEmpty(t, sigs)
		require.LessOrEqual(t, len(sigs), maxSignatures)
		w := &Webhooks{Secrets: [][]byte{[]byte("0123456789abcdef")}}
		_ = w.Verify("id", "1700000000", h, []byte("{}"), time.Unix(1700000000, 0))
	})
}

// FuzzVerifyScoped: a bearer token from outside verifies only if it was
// minted with the key, and never panics.
func FuzzVerifyScoped(f *testing.F) {
	k := &Keyring{Keys: []Key{{ID: "k1", Secret: [KeySize]byte{1}}}}
	f.Add(MintScoped(k, "m-1", 3, t0.Add(time.Hour)))
	f.Add("wcb1.k1.m-1.3.1.x")
	f.Add("eyJhbGciOiJSUzI1NiJ9.e30.sig")
	f.Fuzz(func(t *testing.T, tok string) {
		s, err := VerifyScoped(k, tok, t0, time.Hour)
		if err == nil {
			require.Equal(t, tok, MintScoped(k, s.MarqueeID, s.Generation, s.Expires), "only what the key minted verifies")
		}
	})
}

// FuzzKeyring: any file parses to a usable keyring or an error naming a
// line, never quoting key material.
func FuzzKeyring(f *testing.F) {
	f.Add([]byte("k1 " + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n"))
	f.Add([]byte("# c\nk1 AAAA retired=x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKeyring(b)
		if err != nil {
			return
		}
		back, err := ParseKeyring(k.Format(""))
		require.NoError(t, err)
		require.Equal(t, len(k.Keys), len(back.Keys))
	})
}
