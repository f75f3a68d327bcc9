package trust

import "strings"

// A callback's bearer token says by its shape which check it takes: a
// scoped credential, a JWT for OIDC, else the shared token. The shapes
// are told apart here, before any of the checks, so that a request is
// verified by one check only.

// IsJWT tells a JWT from other bearer tokens by its shape: three base64url
// parts, the header a JSON object.
func IsJWT(token string) bool {
	return strings.HasPrefix(token, "eyJ") && strings.Count(token, ".") == 2
}

// IsScoped tells a scoped credential from other bearer tokens by its shape.
func IsScoped(token string) bool { return strings.HasPrefix(token, scopedPrefix+".") }
