package trust

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Sealed values are strings in the record, so a record's shape does
// not change with sealing:
//
//	sealed:v1:<key id>:<base64 of nonce and AES-256-GCM ciphertext>
//
// The associated data is the record's key and the field's name, so a
// ciphertext copied into another record, or another field, does not open.
const sealedPrefix = "sealed:v1:"

// SealedPrefix begins every sealed value: a scan of stored bytes finds
// the key ids they name after it (actors.SealKeyIDs).
const SealedPrefix = sealedPrefix

// Sealer seals and opens secrets under a keyring. A nil *Sealer leaves
// values in clear (tests and the simulator, whose stores are in memory).
type Sealer struct{ ring *Keyring }

// NewSealer seals under k's active key and opens under any of its keys.
func NewSealer(k *Keyring) *Sealer { return &Sealer{ring: k} }

// IsSealed reports whether v is a sealed value.
func IsSealed(v string) bool { return strings.HasPrefix(v, sealedPrefix) }

// SealedKeyID is the key id a sealed value names ("" if v is not sealed).
func SealedKeyID(v string) string {
	rest, ok := strings.CutPrefix(v, sealedPrefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ":")
	return id
}

// ActiveKeyID is the id new ciphertexts name.
func (s *Sealer) ActiveKeyID() string {
	if s == nil {
		return ""
	}
	return s.ring.Active().ID
}

func aead(key Key) cipher.AEAD {
	block, err := aes.NewCipher(key.Secret[:])
	if err != nil {
		panic("trust: aes: " + err.Error()) // a 32-byte key always makes a cipher
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic("trust: gcm: " + err.Error())
	}
	return g
}

// Seal encrypts plaintext for one field of one record. Empty stays empty:
// whether a secret exists is not itself a secret.
func (s *Sealer) Seal(plaintext, recordKey, field string) string {
	if s == nil || plaintext == "" {
		return plaintext
	}
	key := s.ring.Active()
	g := aead(key)
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plaintext)+g.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("trust: crypto/rand failed: " + err.Error())
	}
	ct := g.Seal(nonce, nonce, []byte(plaintext), aad(recordKey, field))
	return sealedPrefix + key.ID + ":" + base64.RawStdEncoding.EncodeToString(ct)
}

func aad(recordKey, field string) []byte { return []byte(recordKey + "\x00" + field) }

// ErrSealedNoKey is a sealed value whose key is not in the keyring.
var ErrSealedNoKey = errors.New("sealed with a key that is not in the seal keyring")

// Open decrypts a sealed value. A value that is not sealed is returned as
// it is: records written before sealing existed still load, and are sealed
// when next written (or by `warden rekey`).
func (s *Sealer) Open(v, recordKey, field string) (string, error) {
	if !IsSealed(v) {
		return v, nil
	}
	if s == nil {
		return "", fmt.Errorf("field %s is sealed and no seal key is configured", field)
	}
	rest := strings.TrimPrefix(v, sealedPrefix)
	id, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return "", fmt.Errorf("field %s: malformed sealed value", field)
	}
	key, found := s.ring.Find(id)
	if !found {
		return "", fmt.Errorf("field %s: key %s: %w", field, id, ErrSealedNoKey)
	}
	ct, err := base64.RawStdEncoding.DecodeString(b64)
	g := aead(key)
	if err != nil || len(ct) < g.NonceSize()+g.Overhead() {
		return "", fmt.Errorf("field %s: malformed sealed value", field)
	}
	pt, err := g.Open(nil, ct[:g.NonceSize()], ct[g.NonceSize():], aad(recordKey, field))
	if err != nil {
		return "", fmt.Errorf("field %s: sealed value does not open under key %s (moved from another record, or tampered)", field, id)
	}
	return string(pt), nil
}
