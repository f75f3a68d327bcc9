package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/httpapi"
)

// What an attacker got through, each as a test that fails
// without its fix.

// TestSignInReadsAtMost8KiB: a 24 MiB sign-in form is refused
// after 8 KiB, not read whole.
func TestSignInReadsAtMost8KiB(t *testing.T) {
	w := newWorld(t, defaultPools)
	var sent atomic.Int64
	pr, pw := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		_, _ = pw.Write([]byte("next=%2Fui%2Fmarquees&token="))
		for i := 0; i < 24*16; i++ {
			n, err := pw.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", w.url+"/ui/login", pr)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	pr.CloseWithError(io.ErrClosedPipe)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Less(t, sent.Load(), int64(8<<20), "answered long before 24 MiB were sent")
}

// TestLoginCSRFIsRefused: a cross-site page that posts the sign-in
// form with the attacker's own token has neither the form's cookie nor
// its token (SameSite=Strict), and an Origin of another site: refused,
// no session made.
func TestLoginCSRFIsRefused(t *testing.T) {
	w := newWorld(t, defaultPools)
	noRedirect := browserLike()
	resp, err := noRedirect.PostForm(w.url+"/ui/login", url.Values{"token": {operatorToken}, "next": {"/ui/marquees"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Header.Values("Set-Cookie"), "no session")

	// With the form's cookie and token, but sent from another origin.
	c := browserLike()
	page := get(t, c, w.url+"/ui/login")
	csrf := strings.Split(strings.Split(page, `name="csrf" value="`)[1], `"`)[0]
	req, _ := http.NewRequest("POST", w.url+"/ui/login", strings.NewReader(url.Values{"token": {operatorToken}, "csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// TestNoOpenRedirectAfterSignIn: next is judged on the path a
// browser will follow, decoded and cleaned.
func TestNoOpenRedirectAfterSignIn(t *testing.T) {
	for raw, want := range map[string]string{
		"/ui/../\\evil.example/x":    "/ui/marquees",
		"/ui/%2e%2e/%5cevil.example": "/ui/marquees",
		"//evil.example/ui/":         "/ui/marquees",
		"https://evil.example/ui/":   "/ui/marquees",
		"/ui/marquees/m-1?x=1":       "/ui/marquees/m-1?x=1",
		"/ui/environments":           "/ui/environments",
		"/ui/./marquees":             "/ui/marquees",
		"/uix":                       "/ui/marquees",
		"":                           "/ui/marquees",
	} {
		require.Equal(t, want, httpapi.SafeNext(raw), "next %q", raw)
	}
	w := newWorld(t, defaultPools)
	c := browserLike()
	page := get(t, c, w.url+"/ui/login?next="+url.QueryEscape("/ui/../\\evil.example/x"))
	csrf := strings.Split(strings.Split(page, `name="csrf" value="`)[1], `"`)[0]
	resp, err := c.PostForm(w.url+"/ui/login", url.Values{"token": {operatorToken}, "csrf": {csrf}, "next": {"/ui/..%2F%5Cevil.example%2Fx"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/ui/marquees", resp.Header.Get("Location"))
}

// TestCookiesAreSecureBehindAnHTTPSProxy: with an https public URL
// every console cookie is Secure, although the request reached warden in
// plain HTTP.
func TestCookiesAreSecureBehindAnHTTPSProxy(t *testing.T) {
	w := newWorldWith(t, defaultPools, func(_ *actors.Config, o *httpapi.Options) { o.PublicURL = "https://warden.example.org" })
	c := browserLike()
	resp, err := c.Get(w.url + "/ui/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Contains(t, resp.Header.Get("Set-Cookie"), "Secure")
	resp = signIn(t, c, w.url, operatorToken)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	for _, ck := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(ck, "warden_session=") {
			require.Contains(t, ck, "Secure")
		}
	}
}

// TestInvalidStaticPathIsNotFound: a path no file can have is 404,
// not 500.
func TestInvalidStaticPathIsNotFound(t *testing.T) {
	w := newWorld(t, defaultPools)
	for _, p := range []string{"/ui/static/a%ffb", "/ui/static/../x", "/ui/static/"} {
		resp, err := http.Get(w.url + p)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
	}
}

// TestRequestFramedTwoWaysIsRefusedAndTheConnectionClosed: a
// request with both Content-Length and Transfer-Encoding gets 400 and the
// connection closes: the request hidden in its body is never answered.
func TestRequestFramedTwoWaysIsRefusedAndTheConnectionClosed(t *testing.T) {
	w := newWorld(t, defaultPools)
	conn, err := net.Dial("tcp", strings.TrimPrefix(w.url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	smuggled := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	body := fmt.Sprintf("0\r\n\r\n%s", smuggled)
	_, err = fmt.Fprintf(conn, "POST /v1/webhooks/terraform HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%s", body)
	require.NoError(t, err)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.True(t, resp.Close, "Connection: close")
	_, err = http.ReadResponse(rd, nil)
	require.Error(t, err, "the smuggled request is never answered: the connection is closed")
}

// TestFailedAuthenticationIsLimitedPerAddress: ten wrong tokens,
// then 429 with Retry-After, on the operator API and on sign-in, counted.
func TestFailedAuthenticationIsLimitedPerAddress(t *testing.T) {
	w := newWorld(t, defaultPools)
	for i := 0; i < 10; i++ {
		st, _, _ := w.do("GET", "/v1/marquees", fmt.Sprintf("wrong-%d", i), nil)
		require.Equal(t, http.StatusUnauthorized, st)
	}
	req, _ := http.NewRequest("GET", w.url+"/v1/marquees", nil)
	req.Header.Set("Authorization", "Bearer wrong-again")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))

	c := browserLike()
	resp = signIn(t, c, w.url, "also-wrong")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the address is limited on every surface")
	metrics := get(t, http.DefaultClient, w.url+"/metrics")
	require.Contains(t, metrics, `warden_auth_rate_limited_total{surface="api"} 1`)
	require.Contains(t, metrics, `warden_auth_rate_limited_total{surface="console"} 1`)
}

// TestAnonymousRequestsAreNotForwarded: a non-owner authenticates
// before it forwards; an anonymous caller learns nothing of placement and
// has nothing relayed.
func TestAnonymousRequestsAreNotForwarded(t *testing.T) {
	owner := newWorld(t, defaultPools)
	node := &fakeNode{url: owner.url}
	entry := newWorldWith(t, defaultPools, func(_ *actors.Config, o *httpapi.Options) {
		o.Cluster, o.ClusterToken = node, "cluster-secret"
	})
	big := map[string]any{"id": "m-1", "kind": "tutorial", "pad": strings.Repeat("x", 60<<10)}
	for _, hdr := range [][]string{nil, {"X-Warden-Forwarded-By", "n2"}} {
		st, v, raw := entry.do("POST", "/v1/marquees", "", big, hdr...)
		require.Equal(t, http.StatusUnauthorized, st, string(raw))
		require.NotContains(t, string(raw), "shard")
		require.NotContains(t, string(raw), "n2")
		_ = v
	}
	st, _ := entry.callback(map[string]any{"marquee_id": "m-1", "verb": "step", "generation": 1, "step": "vm_starting"}, "Authorization", "Bearer nope")
	require.Equal(t, http.StatusUnauthorized, st)
	metrics := get(t, http.DefaultClient, entry.url+"/metrics")
	require.NotContains(t, metrics, "warden_cluster_forwarded_total{", "nothing was forwarded")
}
