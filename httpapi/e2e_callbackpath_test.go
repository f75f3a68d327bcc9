package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/httpapi"
)

// TestT13TheCallbackPathAnswersAsNetHTTP sends each request once to warden's
// server, where a callback in the simple form takes the callback path, and
// once to the same handler served by net/http alone: the same status,
// headers (but Date) and body. A callback applied on the callback path is
// then a duplicate delivery through net/http, answered with the first
// answer byte for byte (M20), so the answers compare too.
func TestT13TheCallbackPathAnswersAsNetHTTP(t *testing.T) {
	w := newWorld(t, defaultPools)
	w.create("m-1")
	w.waitFor("m-1", "first dispatch", func(v map[string]any) bool { return gen(v) == 1 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	plain := httpapi.NewHTTPServer("", w.api)
	go func() { _ = plain.Serve(httpapi.Listener(ln)) }()
	t.Cleanup(func() { _ = plain.Close() })

	step := `{"marquee_id":"m-1","verb":"step","generation":1,"step":"vm_starting"}`
	post := func(path, headers, body string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: warden\r\n%sContent-Length: %d\r\n\r\n%s", path, headers, len(body), body)
	}
	auth := "Authorization: Bearer " + callbackToken + "\r\nContent-Type: application/json\r\n"
	// chunked sends body with no declared length: read up to the limit.
	chunked := func(body string) string {
		return fmt.Sprintf("POST /v1/webhooks/terraform HTTP/1.1\r\nHost: warden\r\n%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", auth, len(body), body)
	}
	cases := []struct {
		name, req string
		onPath    bool // the first server answers it on the callback path
		status    int
	}{
		{"applied, then a duplicate", post("/v1/webhooks/terraform", auth+"Webhook-Id: lean-1\r\n", step), true, 200},
		{"a stale generation", post("/v1/webhooks/terraform", auth, strings.Replace(step, `"generation":1`, `"generation":0`, 1)), true, 200},
		{"no credential", post("/v1/webhooks/terraform", "Content-Type: application/json\r\n", step), true, 401},
		{"not JSON", post("/v1/webhooks/terraform", auth, "{"), true, 400},
		{"another media type", post("/v1/webhooks/terraform", "Authorization: Bearer "+callbackToken+"\r\nContent-Type: text/plain\r\n", step), true, 415},
		{"a webhook that does not exist", post("/v1/webhooks/nope", auth, step), true, 404},
		{"an unknown marquee", post("/v1/webhooks/terraform", auth, strings.Replace(step, "m-1", "m-2", 1)), true, 404},
		{"a bad delivery id", post("/v1/webhooks/terraform", auth+"Webhook-Id: \x01\r\n", step), false, 400},
		{"a body over the limit", post("/v1/webhooks/terraform", auth, strings.Repeat(" ", httpapi.MaxBody+1)), false, 413},
		{"a chunked body", chunked(step), false, 200},
		{"a chunked body over the limit", chunked(strings.Repeat(" ", httpapi.MaxBody+1)), false, 413},
		{"HTTP/1.0", strings.Replace(post("/v1/webhooks/terraform", auth, step), "HTTP/1.1", "HTTP/1.0", 1), false, 200},
		{"a query", post("/v1/webhooks/terraform?x=1", auth, step), false, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := httpapi.CallbackAnswers()
			onPath := roundTrip(t, strings.TrimPrefix(w.url, "http://"), c.req)
			if c.onPath {
				require.Equal(t, before+1, httpapi.CallbackAnswers(), "answered on the callback path")
			} else {
				require.Equal(t, before, httpapi.CallbackAnswers(), "handed to net/http")
			}
			std := roundTrip(t, ln.Addr().String(), c.req)
			require.Equal(t, c.status, onPath.status, onPath.body)
			require.Equal(t, std.status, onPath.status)
			require.Equal(t, std.header, onPath.header)
			require.Equal(t, std.body, onPath.body)
		})
	}
}

type answered struct {
	status int
	header http.Header
	body   string
}

// roundTrip sends raw on a connection of its own and reads the answer.
func roundTrip(t *testing.T, addr, raw string) answered {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, raw)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Header.Del("Date")
	return answered{resp.StatusCode, resp.Header, string(b)}
}
