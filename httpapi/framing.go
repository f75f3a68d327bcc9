package httpapi

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
)

// Request framing (RFC 9112 §6.1): a request with both
// Content-Length and Transfer-Encoding is how a request is smuggled past
// a proxy that frames by the length. Go's server drops the length and
// frames by the chunks, keeping the connection open, so a second request
// hidden in the body would be answered on it. warden refuses such a
// request with 400 and closes the connection; every chunked request
// closes its connection after its answer.
//
// Go removes Content-Length before a handler sees the request, so the
// connection keeps the last bytes it read, and a chunked request's own
// head is looked up there.

// Listener is ln with every connection remembering what it read; serve
// warden's API on it.
func Listener(ln net.Listener) net.Listener { return rawListener{ln} }

type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c}, nil
}

// rawTail is how much of what a connection read it keeps: more than a
// request head (MaxHeaderBytes) and what Go reads past it.
const rawTail = 32 << 10

type rawConn struct {
	net.Conn
	mu   sync.Mutex
	tail []byte
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.tail = append(c.tail, p[:n]...)
		if len(c.tail) > 2*rawTail { // trimmed to the newest half, now and then
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-rawTail:]...)
		}
		c.mu.Unlock()
	}
	return n, err
}

// headHasLength reports whether the head of r, as it was read, had a
// Content-Length line.
func (c *rawConn) headHasLength(r *http.Request) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	line := []byte(r.Method + " " + r.RequestURI + " ")
	at := bytes.LastIndex(c.tail, line)
	if at < 0 {
		return false
	}
	head := c.tail[at:]
	if end := bytes.Index(head, []byte("\r\n\r\n")); end >= 0 {
		head = head[:end]
	}
	for _, l := range bytes.Split(head, []byte("\n")) {
		if len(l) >= 15 && bytes.EqualFold(l[:15], []byte("content-length:")) {
			return true
		}
	}
	return false
}

type rawConnKey struct{}

func withRawConn(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*rawConn); ok {
		return context.WithValue(ctx, rawConnKey{}, rc)
	}
	return ctx
}

// framing refuses a request framed two ways, and closes the connection
// after any chunked one.
func framing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
			if rc, ok := r.Context().Value(rawConnKey{}).(*rawConn); ok && rc.headHasLength(r) {
				refuse(w, invalidRequest, "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 section 6.1)")
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
