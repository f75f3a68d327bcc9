package trust

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A scoped callback credential speaks for one marquee, one generation,
// until an expiry:
//
//	wcb1.<key id>.<marquee id>.<generation>.<expiry unix seconds>.<mac>
//
// mac is HMAC-SHA256 under the signing key named by the id, over every field
// before it, base64url without padding. It is derived, not stored: any key
// of the keyring can verify it, so nothing per dispatch is written down.
// Marquee ids are [a-z0-9-], so the dots are unambiguous.
const scopedPrefix = "wcb1"

// maxScoped bounds a credential: prefix, a 32-byte id, a 63-byte marquee id,
// two 20-digit numbers, a 43-byte mac and the dots.
const maxScoped = 200

// Scoped is what a verified scoped credential says.
type Scoped struct {
	MarqueeID  string
	Generation uint64
	Expires    time.Time
}

// Errors of Verify; every one is a 401 to the caller.
var (
	ErrNotScoped     = errors.New("not a scoped callback credential")
	ErrBadScoped     = errors.New("scoped callback credential does not verify")
	ErrScopedRetired = errors.New("scoped callback credential was signed with a retired key past its overlap")
)

// ExpiredError is a credential that verified but whose time is over.
type ExpiredError struct{ At time.Time }

func (e *ExpiredError) Error() string {
	return "scoped callback credential expired at " + e.At.UTC().Format(time.RFC3339)
}

func scopedMAC(key Key, marqueeID string, generation uint64, expires int64) string {
	m := hmac.New(sha256.New, key.Secret[:])
	fmt.Fprintf(m, "%s.%s.%s.%d.%d", scopedPrefix, key.ID, marqueeID, generation, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// MintScoped derives the credential of one dispatch under the keyring's
// active key.
func MintScoped(k *Keyring, marqueeID string, generation uint64, expires time.Time) string {
	key := k.Active()
	exp := expires.Unix()
	return fmt.Sprintf("%s.%s.%s.%d.%d.%s", scopedPrefix, key.ID, marqueeID, generation, exp, scopedMAC(key, marqueeID, generation, exp))
}

// VerifyScoped checks a credential's MAC in constant time, then its expiry
// against now, then the overlap of a retired key (a retired key verifies
// only for overlap after its retirement: no credential signed before then
// lives longer than its lifetime anyway).
func VerifyScoped(k *Keyring, token string, now time.Time, overlap time.Duration) (Scoped, error) {
	if len(token) > maxScoped || !IsScoped(token) {
		return Scoped{}, ErrNotScoped
	}
	f := strings.Split(token, ".")
	if len(f) != 6 {
		return Scoped{}, ErrNotScoped
	}
	gen, err1 := strconv.ParseUint(f[3], 10, 64)
	exp, err2 := strconv.ParseInt(f[4], 10, 64)
	// Numbers in their one canonical spelling: "+5" or "05" would be a
	// second token with the same MAC.
	if err1 != nil || err2 != nil || f[2] == "" || strconv.FormatUint(gen, 10) != f[3] || strconv.FormatInt(exp, 10) != f[4] {
		return Scoped{}, ErrNotScoped
	}
	key, ok := k.Find(f[1])
	if !ok {
		return Scoped{}, ErrBadScoped
	}
	want := scopedMAC(key, f[2], gen, exp)
	if !hmac.Equal([]byte(want), []byte(f[5])) {
		return Scoped{}, ErrBadScoped
	}
	s := Scoped{MarqueeID: f[2], Generation: gen, Expires: time.Unix(exp, 0).UTC()}
	if !now.Before(s.Expires) {
		return Scoped{}, &ExpiredError{At: s.Expires}
	}
	if !key.Retired.IsZero() && now.After(key.Retired.Add(overlap)) {
		return Scoped{}, ErrScopedRetired
	}
	return s, nil
}
