package httpapi

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The callbacks' callback path. A workflow's callback is a small POST on a
// kept-alive connection, and net/http spends about as much CPU on its
// connection as warden spends deciding and storing the callback: a
// goroutine per request to notice a client gone (a second read a
// request), four deadline timers, a cancelable context, pooled writers.
// Measured through the whole server, answering callbacks here cut the
// floor's CPU a request by a tenth to a third in every alternated pair,
// and the durable path's median by about a tenth (docs/decisions, "The
// callbacks' callback path").
//
// The callback path parses only the one form callback senders use: "POST
// /v1/webhooks/<name> HTTP/1.1", CRLF lines, token header names, printable
// values, one Host, one Content-Length within MaxBody, no
// Transfer-Encoding, Expect, Upgrade or Connection other than keep-alive,
// and the head within one read buffer. A connection whose next request is
// anything else is handed to net/http as it stands, the bytes read so far
// first, and stays with net/http: every other route, every malformed or
// ambiguous request and every refusal of framing is net/http's and
// framing's, as before. So the callback parser never has to refuse anything;
// it only has to be right about what it accepts (FuzzCallbackHead).
//
// A request on the callback path goes to the same handler as any other, with
// an *http.Request built from its head, so authentication, limits,
// routing, metrics and every answer are the handler's own. What differs:
// the request's context is not canceled when the client goes (the step it
// asked for is taken either way), and the answer is written in one write
// once the handler returns.

// callbackBuffer is a callback connection's read buffer: a callback's head and
// body fit (about half a kilobyte); a head that does not fit goes to
// net/http, whose limit is MaxHeaderBytes.
const callbackBuffer = 4 << 10

// callbackMaxHeaders bounds the header lines the callback path reads; a request
// with more goes to net/http.
const callbackMaxHeaders = 32

// deadlineSlack is how stale a deadline may be before it is set again: a
// timer reset per request was a measurable part of net/http's cost, and a
// deadline of 89 s instead of 90 changes nothing a client can rely on.
const deadlineSlack = time.Second

var callbackPrefix = []byte("POST /v1/webhooks/")

// callbackAnswers counts the answers the callback path writes: the tests' and
// the benchmark's proof that a request took it.
var callbackAnswers atomic.Int64

// Serve serves srv on ln until srv is closed, callbacks in their simple
// form on the callback path and everything else through net/http.
func Serve(srv *http.Server, ln net.Listener) error {
	l := newCallbackPath(ln, srv)
	go l.acceptLoop()
	return srv.Serve(Listener(l))
}

// callbackPath is the listener net/http is given: it accepts every connection
// itself, serves its callbacks, and passes on those it hands over.
type callbackPath struct {
	net.Listener
	srv     *http.Server
	handoff chan net.Conn
	done    chan struct{}
	err     error // the accept loop's, once done is closed

	mu      sync.Mutex
	conns   map[*callbackConn]struct{}
	closing atomic.Bool // set under mu; read without it on every answer
}

func newCallbackPath(ln net.Listener, srv *http.Server) *callbackPath {
	return &callbackPath{Listener: ln, srv: srv, handoff: make(chan net.Conn), done: make(chan struct{}), conns: map[*callbackConn]struct{}{}}
}

// Accept returns the next connection handed over to net/http.
func (l *callbackPath) Accept() (net.Conn, error) {
	select {
	case c := <-l.handoff:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *callbackPath) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		switch {
		case errors.Is(err, net.ErrClosed):
			l.err = err
			close(l.done)
			return
		case err != nil:
			// Out of descriptors, say: net/http's own wait, then again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		lc := &callbackConn{l: l, c: c, br: bufio.NewReaderSize(c, callbackBuffer), remote: c.RemoteAddr().String()}
		if !l.track(lc) {
			c.Close()
			continue
		}
		go lc.serve()
	}
}

// Close stops accepting (net/http's Shutdown and Close call it) and
// closes the callback connections that wait for a request; one answering a
// request closes once its answer is written.
func (l *callbackPath) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closing.Store(true)
	idle := make([]*callbackConn, 0, len(l.conns))
	for c := range l.conns {
		idle = append(idle, c)
	}
	l.mu.Unlock()
	for _, c := range idle {
		if c.state.CompareAndSwap(connIdle, connClosed) {
			c.c.Close()
		}
	}
	return err
}

func (l *callbackPath) track(c *callbackConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing.Load() {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *callbackPath) untrack(c *callbackConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// A callback connection is idle between requests, active while it answers
// one, closed once Close took it.
const (
	connIdle int32 = iota
	connActive
	connClosed
)

type callbackConn struct {
	l      *callbackPath
	c      net.Conn
	br     *bufio.Reader
	state  atomic.Int32
	remote string
	out    []byte
	// readBy and writeBy are the deadlines last set, refreshed when they
	// are more than deadlineSlack stale.
	readBy, writeBy time.Time
	// answered is when the last answer was written: its Date, its write
	// deadline and the idle wait after it are measured from it.
	answered time.Time
	// reqHeader and respHeader are the header maps of the request being
	// answered, emptied for the next: the requests of one connection are
	// answered one after another, and no webhook handler keeps either
	// past its return: a new map for each shows in a durable callback's
	// profile.
	reqHeader, respHeader http.Header
	date                  dateCache
}

// dateCache is a connection's Date value: a date has whole seconds, so it
// is formatted once a second, not with every answer.
type dateCache struct {
	sec int64
	b   []byte
}

func (d *dateCache) at(now time.Time) []byte {
	if sec := now.Unix(); sec != d.sec || d.b == nil {
		d.sec, d.b = sec, now.UTC().AppendFormat(d.b[:0], http.TimeFormat)
	}
	return d.b
}

// emptied returns h emptied, or a new map if there is none yet.
func emptied(h *http.Header, size int) http.Header {
	if *h == nil {
		*h = make(http.Header, size)
	}
	clear(*h)
	return *h
}

// serve answers requests until the connection closes, fails, or has a
// request that is not a simple callback, which goes to net/http with it.
func (lc *callbackConn) serve() {
	defer lc.l.untrack(lc)
	first := true
	for {
		if !lc.waitRequest(first) {
			lc.c.Close()
			return
		}
		first = false
		req, n, ok := lc.readHead()
		if !ok {
			lc.handOver()
			return
		}
		if !lc.answer(req, n) {
			lc.c.Close()
			return
		}
		lc.state.Store(connIdle)
		if lc.l.closing.Load() && lc.state.CompareAndSwap(connIdle, connClosed) {
			lc.c.Close()
			return
		}
	}
}

// waitRequest waits for a request's first byte: within ReadHeaderTimeout
// on a new connection, IdleTimeout after an answer. False: the connection
// is done (closed by the client, timed out, or taken by Close).
func (lc *callbackConn) waitRequest(first bool) bool {
	if first {
		lc.readDeadline(time.Now(), lc.headerTimeout(), true)
	} else {
		lc.readDeadline(lc.answered, cmp.Or(lc.l.srv.IdleTimeout, lc.l.srv.ReadTimeout), false)
	}
	if _, err := lc.br.Peek(1); err != nil {
		return false
	}
	return lc.state.CompareAndSwap(connIdle, connActive)
}

// headerTimeout is net/http's: ReadHeaderTimeout, or ReadTimeout if it
// is zero.
func (lc *callbackConn) headerTimeout() time.Duration {
	return cmp.Or(lc.l.srv.ReadHeaderTimeout, lc.l.srv.ReadTimeout)
}

// readHead reads a request's head and parses it if it is a simple
// callback: the request, its body's length, true. Whatever it read stays
// buffered for net/http otherwise.
func (lc *callbackConn) readHead() (*http.Request, int, bool) {
	headerWait := false
	for {
		buf, _ := lc.br.Peek(lc.br.Buffered())
		if !bytes.HasPrefix(buf, callbackPrefix[:min(len(buf), len(callbackPrefix))]) {
			return nil, 0, false
		}
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			req, n, ok := parseCallbackHead(buf[:i+4], emptied(&lc.reqHeader, 8))
			if ok {
				_, _ = lc.br.Discard(i + 4)
			}
			return req, n, ok
		}
		if lc.br.Buffered() == lc.br.Size() {
			return nil, 0, false // longer than a callback's: net/http's limits
		}
		if !headerWait {
			lc.readDeadline(time.Now(), lc.headerTimeout(), true)
			headerWait = true
		}
		if _, err := lc.br.Peek(lc.br.Buffered() + 1); err != nil {
			return nil, 0, false // net/http sees the same end
		}
	}
}

// answer reads the body, runs the handler and writes its answer; false
// when the connection is not to be used again.
func (lc *callbackConn) answer(req *http.Request, n int) bool {
	if n > lc.br.Buffered() {
		lc.readDeadline(time.Now(), lc.l.srv.ReadTimeout, true)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(lc.br, body); err != nil {
		return false
	}
	req.Body = &callbackBody{b: body}
	req.RemoteAddr = lc.remote
	w := &callbackWriter{h: emptied(&lc.respHeader, 4)}
	if !lc.run(w, req) {
		return false
	}
	keep := w.h.Get("Connection") != "close" && !lc.l.closing.Load()
	if !keep {
		w.h.Set("Connection", "close")
	}
	lc.answered = time.Now()
	lc.out = w.appendResponse(lc.out[:0], lc.date.at(lc.answered))
	if d := lc.l.srv.WriteTimeout; d > 0 {
		refresh(&lc.writeBy, lc.answered.Add(d), false, lc.c.SetWriteDeadline)
	}
	callbackAnswers.Add(1) // before the write: the client may read it first
	if _, err := lc.c.Write(lc.out); err != nil {
		return false
	}
	if cap(lc.out) > callbackBuffer {
		lc.out = nil // one large answer does not stay with the connection
	}
	return keep
}

// run calls the handler as net/http would, a panic included: logged,
// and the connection closed without an answer.
func (lc *callbackConn) run(w *callbackWriter, req *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
			if p != http.ErrAbortHandler {
				lc.logf("http: panic serving %v: %v\n%s", req.RemoteAddr, p, debug.Stack())
			}
		}
	}()
	lc.l.srv.Handler.ServeHTTP(w, req)
	return true
}

func (lc *callbackConn) logf(format string, args ...any) {
	if lg := lc.l.srv.ErrorLog; lg != nil {
		lg.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// handOver gives the connection, and what was read of it, to net/http.
func (lc *callbackConn) handOver() {
	_ = lc.c.SetDeadline(time.Time{})
	lc.l.untrack(lc)
	hc := &handedConn{Conn: lc.c, r: lc.br}
	select {
	case lc.l.handoff <- hc:
	case <-lc.l.done:
		lc.c.Close()
	}
}

// readDeadline sets the read deadline d after from (none for a zero d),
// exactly or within deadlineSlack.
func (lc *callbackConn) readDeadline(from time.Time, d time.Duration, exact bool) {
	if d > 0 {
		refresh(&lc.readBy, from.Add(d), exact, lc.c.SetReadDeadline)
	}
}

// refresh sets a deadline to want unless the one last set is at most
// deadlineSlack before it (and the deadline is not to be exact).
func refresh(last *time.Time, want time.Time, exact bool, set func(time.Time) error) {
	if !exact && !want.Before(*last) && want.Sub(*last) < deadlineSlack {
		return
	}
	*last = want
	_ = set(want)
}

// handedConn is a connection net/http takes over: the bytes the callback
// path read first, then the connection's.
type handedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *handedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// callbackBody is a request's body, read whole before the handler runs.
type callbackBody struct{ b []byte }

func (r *callbackBody) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func (r *callbackBody) Close() error { return nil }

// callbackWriter keeps a handler's answer until it returns.
type callbackWriter struct {
	h    http.Header
	code int
	body []byte
}

func (w *callbackWriter) Header() http.Header { return w.h }

func (w *callbackWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // an informational answer is not sent
		w.code = code
	}
}

func (w *callbackWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if !bodyAllowed(w.code) {
		return 0, http.ErrBodyNotAllowed
	}
	w.body = append(w.body, b...)
	return len(b), nil
}

func bodyAllowed(code int) bool {
	return code != http.StatusNoContent && code != http.StatusNotModified
}

// appendResponse lays the answer out as net/http would: the status line,
// the handler's headers in order with line breaks in values made spaces,
// Content-Type sniffed if the handler set none, Date, and Content-Length
// from the body itself.
func (w *callbackWriter) appendResponse(b, date []byte) []byte {
	w.WriteHeader(http.StatusOK)
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(w.code)...)
	b = append(b, "\r\n"...)
	w.h.Del("Content-Length")
	w.h.Del("Transfer-Encoding")
	if len(w.body) > 0 && w.h.Get("Content-Type") == "" {
		w.h.Set("Content-Type", http.DetectContentType(w.body))
	}
	if _, ok := w.h["Date"]; !ok {
		b = append(b, "Date: "...)
		b = append(b, date...)
		b = append(b, "\r\n"...)
	}
	var few [8]string // a handler's headers fit: no allocation a request
	keys := few[:0]
	for k := range w.h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range w.h[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = appendHeaderValue(b, v)
			b = append(b, "\r\n"...)
		}
	}
	if bodyAllowed(w.code) {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(w.body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, w.body...)
}

// appendHeaderValue appends v with CR and LF made spaces, as net/http
// does, so no value can end the head.
func appendHeaderValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// parseCallbackHead parses a head (through its blank line) if it is a simple
// callback's: the request, with its header fields in h (empty), its
// body's length, true. Anything it does not accept is false, and
// net/http's to answer.
func parseCallbackHead(head []byte, h http.Header) (*http.Request, int, bool) {
	line, rest, ok := bytes.Cut(head, []byte("\r\n"))
	if !ok || !bytes.HasPrefix(line, callbackPrefix) {
		return nil, 0, false
	}
	target, proto, ok := bytes.Cut(line[len("POST "):], []byte(" "))
	name := target[len(callbackPrefix)-len("POST "):]
	if !ok || string(proto) != "HTTP/1.1" || len(name) == 0 || !allBytes(name, isPathByte) {
		return nil, 0, false
	}
	length, host := -1, 0
	for lines := 0; len(rest) > len("\r\n"); lines++ {
		var field []byte
		field, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		k, v, ok := bytes.Cut(field, []byte(":"))
		name := string(k)
		if !ok || lines == callbackMaxHeaders || !httpguts.ValidHeaderFieldName(name) {
			return nil, 0, false
		}
		v = bytes.Trim(v, " \t")
		if !allBytes(v, isValueByte) {
			return nil, 0, false
		}
		key := http.CanonicalHeaderKey(name)
		switch key {
		case "Content-Length":
			n, err := strconv.Atoi(string(v))
			if length >= 0 || err != nil || !allBytes(v, isDigit) || n > MaxBody {
				return nil, 0, false
			}
			length = n
		case "Host":
			if host++; !allBytes(v, isHostByte) {
				return nil, 0, false
			}
		case "Connection":
			if !bytes.EqualFold(v, []byte("keep-alive")) {
				return nil, 0, false
			}
		case "Transfer-Encoding", "Expect", "Upgrade", "Te", "Trailer":
			return nil, 0, false
		}
		h[key] = append(h[key], string(v))
	}
	hostName := h.Get("Host")
	if length < 0 || host != 1 || hostName == "" {
		return nil, 0, false
	}
	delete(h, "Host") // net/http's place for it is Request.Host
	path := string(target)
	return &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: path}, RequestURI: path,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Host: hostName, ContentLength: int64(length),
	}, length, true
}

func allBytes(b []byte, ok func(byte) bool) bool {
	for _, c := range b {
		if !ok(c) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isPathByte: a webhook's name is unreserved characters only (RFC 3986):
// no escapes, no query, no further segments, nothing to normalize.
func isPathByte(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '.' || c == '_' || c == '~'
}

// isHostByte: a host name, an IPv4 or bracketed IPv6 address, a port.
func isHostByte(c byte) bool { return isPathByte(c) || c == ':' || c == '[' || c == ']' }

// isValueByte: visible ASCII, space and tab; nothing else is a callback's.
func isValueByte(c byte) bool { return c == '\t' || ' ' <= c && c <= '~' }
