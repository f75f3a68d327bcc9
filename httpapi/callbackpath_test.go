package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// callbackServer serves h as warden does, with its timeouts shortened to
// those given (zero: warden's), and returns its address.
func callbackServer(t *testing.T, h http.HandlerFunc, header, idle time.Duration) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := NewHTTPServer("", h)
	if header > 0 {
		srv.ReadHeaderTimeout = header
	}
	if idle > 0 {
		srv.IdleTimeout = idle
	}
	go func() { _ = Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, ln.Addr().String()
}

// whoAnswered says which server called the handler.
func whoAnswered(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	who := "net/http"
	if _, ok := w.(*callbackWriter); ok {
		who = "callback"
	}
	_, _ = io.WriteString(w, who+" "+r.Method+" "+r.URL.Path+" "+string(body))
}

func callbackPost(path, body string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: warden\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// lockedBuffer is a log's output, written by the server and read by the
// test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestT13AConnectionGoesToNetHTTPAtItsFirstRequestNotInTheSimpleForm:
// three requests sent at once on one connection; the first is a simple
// callback, the second is not, and from there the connection is
// net/http's, with the bytes the callback path had read.
func TestT13AConnectionGoesToNetHTTPAtItsFirstRequestNotInTheSimpleForm(t *testing.T) {
	_, addr := callbackServer(t, whoAnswered, 0, 0)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, callbackPost("/v1/webhooks/terraform", "one")+
		"GET /healthz HTTP/1.1\r\nHost: warden\r\n\r\n"+
		callbackPost("/v1/webhooks/terraform", "two"))
	require.NoError(t, err)
	rd := bufio.NewReader(c)
	for _, want := range []string{"callback POST /v1/webhooks/terraform one", "net/http GET /healthz ", "net/http POST /v1/webhooks/terraform two"} {
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, want, string(b))
	}
}

// TestT13TheCallbackPathKeepsNetHTTPsTimeouts: a head that stops coming is
// dropped after ReadHeaderTimeout, on a connection's first request and
// on a later one; between requests the wait is IdleTimeout, longer than
// the header's, and it ends too.
func TestT13TheCallbackPathKeepsNetHTTPsTimeouts(t *testing.T) {
	const header, idle = 300 * time.Millisecond, 3 * time.Second
	_, addr := callbackServer(t, whoAnswered, header, idle)
	closedWithin := func(c net.Conn, rd io.Reader, bound time.Duration) {
		t.Helper()
		require.NoError(t, c.SetReadDeadline(time.Now().Add(bound)))
		_, err := rd.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.EOF, "the server closed the connection within %s", bound)
	}
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	send := func(c net.Conn, raw string) {
		_, err := io.WriteString(c, raw)
		require.NoError(t, err)
	}
	answered := func(c net.Conn, rd *bufio.Reader, body string) {
		t.Helper()
		send(c, callbackPost("/v1/webhooks/terraform", body))
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, "callback POST /v1/webhooks/terraform "+body, string(b))
	}
	const partial = "POST /v1/webhooks/terraform HTTP/1.1\r\nHost: warden\r\n"

	first, firstRd := dial()
	send(first, partial)
	closedWithin(first, firstRd, 2*time.Second)

	later, laterRd := dial()
	answered(later, laterRd, "one")
	time.Sleep(2 * header) // past a header deadline, within the idle wait
	answered(later, laterRd, "two")
	send(later, partial)
	closedWithin(later, laterRd, idle-time.Second) // the header's timeout, not the idle one

	kept, keptRd := dial()
	answered(kept, keptRd, "three")
	closedWithin(kept, keptRd, idle+2*time.Second)
}

// TestT13ShutdownClosesIdleCallbackConnections: a graceful shutdown closes a
// connection waiting for its next callback, and one answering a callback
// closes after its answer, which says Connection: close.
func TestT13ShutdownClosesIdleCallbackConnections(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv, addr := callbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/webhooks/slow" {
			close(entered)
			<-release
		}
		whoAnswered(w, r)
	}, 0, 0)
	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	idleRd := bufio.NewReader(idle)
	_, err = io.WriteString(idle, callbackPost("/v1/webhooks/terraform", "one"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(idleRd, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.False(t, resp.Close)

	busy, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer busy.Close()
	_, err = io.WriteString(busy, callbackPost("/v1/webhooks/slow", "two"))
	require.NoError(t, err)
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	require.NoError(t, idle.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = idleRd.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the idle connection is closed")

	close(release)
	busyRd := bufio.NewReader(busy)
	require.NoError(t, busy.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err = http.ReadResponse(busyRd, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, "callback POST /v1/webhooks/slow two", string(b))
	require.True(t, resp.Close, "the answer says Connection: close")
	_, err = busyRd.ReadByte()
	require.ErrorIs(t, err, io.EOF)
}

// TestT13APanickingHandlerClosesTheConnection, as net/http does: no
// answer, the connection closed, the server still serving.
func TestT13APanickingHandlerClosesTheConnection(t *testing.T) {
	srv, addr := callbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/webhooks/panic" {
			panic("a bug")
		}
		whoAnswered(w, r)
	}, 0, 0)
	var logged lockedBuffer
	srv.ErrorLog = log.New(&logged, "", 0)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, callbackPost("/v1/webhooks/panic", "x"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = bufio.NewReader(c).ReadByte()
	require.ErrorIs(t, err, io.EOF)
	require.Contains(t, logged.String(), "panic serving")
	c2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c2.Close()
	_, err = io.WriteString(c2, callbackPost("/v1/webhooks/terraform", "ok"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestT13AConnectionsRequestsShareNoHeaders: a connection's header maps
// are reused from one request to the next, emptied: a request sees only
// its own header fields, and an answer carries only the fields its
// handler set.
func TestT13AConnectionsRequestsShareNoHeaders(t *testing.T) {
	_, addr := callbackServer(t, func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(*callbackWriter); !ok {
			t.Errorf("not the callback path")
		}
		if v := r.Header.Get("X-First"); v != "" {
			w.Header().Set("X-Set-For", v)
		}
		_, _ = io.WriteString(w, strconv.Itoa(len(r.Header)))
	}, 0, 0)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	br := bufio.NewReader(c)
	ask := func(head string) (*http.Response, string) {
		_, err := io.WriteString(c, "POST /v1/webhooks/t HTTP/1.1\r\nHost: warden\r\n"+head+"Content-Length: 0\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, fields := ask("X-First: 1\r\nX-Other: 2\r\n")
	require.Equal(t, "1", resp.Header.Get("X-Set-For"))
	require.Equal(t, "3", fields, "X-First, X-Other and Content-Length")
	resp, fields = ask("")
	require.Empty(t, resp.Header.Get("X-Set-For"), "the first answer's field is not sent again")
	require.Equal(t, "1", fields, "the first request's fields are gone: only Content-Length")
}

// FuzzCallbackHead holds the callback parser to net/http's: a head it accepts,
// net/http reads as the same request (method, path, host, length, every
// header), and its body length is what net/http would read. What it does
// not accept goes to net/http, so only acceptance needs an oracle.
func FuzzCallbackHead(f *testing.F) {
	f.Add([]byte(callbackPost("/v1/webhooks/terraform", "{}")))
	f.Add([]byte("POST /v1/webhooks/terraform HTTP/1.1\r\nHost: a:80\r\nAuthorization: Bearer x\r\nWebhook-Id: d-1\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"))
	f.Add([]byte("POST /v1/webhooks/terraform HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Add([]byte("POST /v1/webhooks/terraform HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"))
	f.Add([]byte("POST /v1/webhooks/t HTTP/1.1\r\nHost: a\r\nX:  folded\r\n continued\r\nContent-Length: 0\r\n\r\n"))
	var reused http.Header // as a connection reuses it, from one head to the next
	f.Fuzz(func(t *testing.T, head []byte) {
		if len(head) > callbackBuffer {
			return
		}
		end := bytes.Index(head, []byte("\r\n\r\n"))
		if end < 0 {
			return
		}
		head = head[:end+4]
		got, n, ok := parseCallbackHead(head, emptied(&reused, 8))
		if !ok {
			return
		}
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if err != nil {
			t.Fatalf("the callback path accepted a head net/http refuses (%v): %q", err, head)
		}
		if got.Method != want.Method || got.URL.Path != want.URL.Path || got.URL.RawQuery != "" || got.Host != want.Host ||
			got.ContentLength != want.ContentLength || int64(n) != want.ContentLength || got.RequestURI != want.RequestURI {
			t.Fatalf("read differently: callback path %s %q host %q length %d; net/http %s %q host %q length %d; head %q",
				got.Method, got.RequestURI, got.Host, got.ContentLength, want.Method, want.RequestURI, want.Host, want.ContentLength, head)
		}
		if len(want.TransferEncoding) > 0 || want.Close {
			t.Fatalf("accepted a head net/http frames otherwise: %q", head)
		}
		for k, vs := range want.Header {
			if !slices.Equal(got.Header[k], vs) {
				t.Fatalf("header %s: callback path %q, net/http %q; head %q", k, got.Header[k], vs, head)
			}
		}
		if len(got.Header) != len(want.Header) {
			t.Fatalf("headers: callback path %v, net/http %v", got.Header, want.Header)
		}
	})
}

// TestT13TheCallbackPathDateIsTheAnswersSecond: a connection formats its Date
// once a second and keeps it for the answers of that second; the next
// second gets its own, as net/http would write each.
func TestT13TheCallbackPathDateIsTheAnswersSecond(t *testing.T) {
	var d dateCache
	at := time.Date(2026, 12, 6, 2, 30, 0, 100, time.FixedZone("CET", 3600))
	require.Equal(t, at.UTC().Format(http.TimeFormat), string(d.at(at)))
	d.b[0] = 'x' // a mark that formatting again would overwrite
	require.Equal(t, byte('x'), d.at(at.Add(900 * time.Millisecond))[0], "the same second: not formatted again")
	next := at.Add(time.Second)
	require.Equal(t, next.UTC().Format(http.TimeFormat), string(d.at(next)))
}
