// Package trust holds warden's trust-boundary primitives
// (docs/rules/trust.md): keyrings read from private files (T9, T11), scoped callback
// credentials derived per dispatch (T1), Standard Webhooks signatures (T3),
// GitHub Actions OIDC verification (T4) and sealing of secrets at rest
// (T10). Time is always an argument: nothing here reads the clock.
package trust

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KeySize is the size of every symmetric key warden keeps: AES-256 for
// sealing, HMAC-SHA256 for scoped credentials.
const KeySize = 32

// maxKeys bounds a keyring: one active key and a few kept for rotation.
const maxKeys = 16

// Key is one symmetric key with its id. A retired key still verifies (or
// opens) what was made with it but never makes anything new.
type Key struct {
	ID      string
	Secret  [KeySize]byte
	Retired time.Time // zero: not retired
}

// Keyring is an ordered set of keys; the first is the active one.
type Keyring struct{ Keys []Key }

// Active is the key new credentials and ciphertexts use.
func (k *Keyring) Active() Key { return k.Keys[0] }

// Find returns the key with the id.
func (k *Keyring) Find(id string) (Key, bool) {
	for _, key := range k.Keys {
		if key.ID == id {
			return key, true
		}
	}
	return Key{}, false
}

// NewKey makes a key with a random id and secret.
func NewKey() Key {
	var k Key
	if _, err := rand.Read(k.Secret[:]); err != nil {
		panic("trust: crypto/rand failed: " + err.Error()) // the kernel's generator does not fail
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	k.ID = "k" + hex.EncodeToString(id[:])
	return k
}

// Rotate puts a new active key first and retires the others at now.
func (k *Keyring) Rotate(now time.Time) Key {
	for i := range k.Keys {
		if k.Keys[i].Retired.IsZero() {
			k.Keys[i].Retired = now.UTC()
		}
	}
	nk := NewKey()
	k.Keys = append([]Key{nk}, k.Keys...)
	return nk
}

// Prune drops retired keys whose overlap has passed at now, and keys keep
// reports as unused; the active key always stays.
func (k *Keyring) Prune(now time.Time, overlap time.Duration, keep func(Key) bool) {
	out := k.Keys[:1]
	for _, key := range k.Keys[1:] {
		if (overlap > 0 && !key.Retired.IsZero() && now.After(key.Retired.Add(overlap))) || (keep != nil && !keep(key)) {
			continue
		}
		out = append(out, key)
	}
	k.Keys = out
}

// MaxKeyIDLen bounds a key id: it is written into every ciphertext and
// credential, so it stays short and plain.
const MaxKeyIDLen = 32

func validKeyID(s string) bool {
	if len(s) == 0 || len(s) > MaxKeyIDLen {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// EachLine reads a line-oriented secrets file (keyrings, webhook
// secrets, the operators file): f gets each line's trimmed text and its
// number; blank lines and lines starting with # are skipped. It stops at
// f's first error.
func EachLine(b []byte, f func(line int, text string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if err := f(line, text); err != nil {
			return err
		}
	}
	return sc.Err()
}

// ParseKeyring reads the keyring format: one key a line,
//
//	<id> <base64 of 32 bytes> [retired=<RFC 3339 time>]
//
// the first line the active key; blank lines and lines starting with # are
// ignored. Errors name the line, never the key.
func ParseKeyring(b []byte) (*Keyring, error) {
	var k Keyring
	err := EachLine(b, func(line int, text string) error {
		f := strings.Fields(text)
		if len(f) < 2 || len(f) > 3 || !validKeyID(f[0]) {
			return fmt.Errorf("line %d: want <id> <base64 key> [retired=<time>]", line)
		}
		raw, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil || len(raw) != KeySize {
			return fmt.Errorf("line %d: the key is not base64 of %d bytes", line, KeySize)
		}
		key := Key{ID: f[0]}
		copy(key.Secret[:], raw)
		if len(f) == 3 {
			v, ok := strings.CutPrefix(f[2], "retired=")
			t, err := time.Parse(time.RFC3339, v)
			if !ok || err != nil {
				return fmt.Errorf("line %d: want retired=<RFC 3339 time>", line)
			}
			key.Retired = t
		}
		if _, dup := k.Find(key.ID); dup {
			return fmt.Errorf("line %d: key id %s appears twice", line, key.ID)
		}
		k.Keys = append(k.Keys, key)
		if len(k.Keys) > maxKeys {
			return fmt.Errorf("more than %d keys", maxKeys)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(k.Keys) == 0 {
		return nil, errors.New("no key")
	}
	if !k.Keys[0].Retired.IsZero() {
		return nil, errors.New("the first (active) key is retired")
	}
	return &k, nil
}

// Format writes the keyring in the format ParseKeyring reads.
func (k *Keyring) Format(comment string) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(comment), "\n") {
		if line != "" {
			fmt.Fprintf(&b, "# %s\n", line)
		}
	}
	for _, key := range k.Keys {
		fmt.Fprintf(&b, "%s %s", key.ID, base64.StdEncoding.EncodeToString(key.Secret[:]))
		if !key.Retired.IsZero() {
			fmt.Fprintf(&b, " retired=%s", key.Retired.UTC().Format(time.RFC3339))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// maxSecretFile bounds any secret file warden reads.
const maxSecretFile = 64 << 10

// ReadPrivateFile reads a secret file after checking that nobody but its
// owner can read it.
func ReadPrivateFile(path string) ([]byte, error) {
	if err := CheckPrivate(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxSecretFile+1)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n > maxSecretFile {
		return nil, fmt.Errorf("%s is over %d bytes", path, maxSecretFile)
	}
	return b[:n], nil
}

// CheckPrivate refuses a file or directory that group or others may read,
// write or enter, saying how to fix it.
func CheckPrivate(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		want := "600"
		if fi.IsDir() {
			want = "700"
		}
		return fmt.Errorf("%s is open to group or others (mode %04o); warden keeps secrets there: run `chmod %s %s`", path, perm, want, path)
	}
	return nil
}

// LoadKeyring reads a keyring file (T9: secrets only from files or the
// environment) after the mode check.
func LoadKeyring(path string) (*Keyring, error) {
	b, err := ReadPrivateFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParseKeyring(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// LoadOrCreateKeyring reads the keyring at path, or creates one with a
// fresh key (0600) if there is none; created says which.
func LoadOrCreateKeyring(path, comment string) (k *Keyring, created bool, err error) {
	k, err = LoadKeyring(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	k = &Keyring{Keys: []Key{NewKey()}}
	if err := WriteFileAtomic(path, k.Format(comment)); err != nil {
		return nil, false, err
	}
	return k, true, nil
}

// WriteFileAtomic replaces path with b, mode 0600, so that a crash leaves
// either the old file or the new one, never a torn one: write a temporary
// file beside it, sync it, rename it over, sync the directory.
func WriteFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
