package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// loadConn is one closed-loop client's keep-alive connection. It writes
// each request whole in one write and reads the answer with net/http's
// own parser, but without http.Transport, whose two goroutines per
// connection (a read loop and a write loop, three hand-offs a request)
// made the load generator the largest user of the two cores it shares
// with the server it measures: the bench then measured its own client as
// much as the paths. What a request says is the same either way.
type loadConn struct {
	host, path string
	c          net.Conn
	r          *bufio.Reader
	buf        []byte
}

// loadTimeout bounds one request, as the net/http client's Timeout does.
const loadTimeout = 10 * time.Second

func newLoadConn(rawURL string) (*loadConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("load: %s: only http is spoken", rawURL)
	}
	return &loadConn{host: u.Host, path: u.RequestURI()}, nil
}

// post sends one request and reads its whole answer: its status, or an
// error after which the connection is dialled again.
func (lc *loadConn) post(token, body string, headers []string) (int, error) {
	if lc.c == nil {
		c, err := net.DialTimeout("tcp", lc.host, loadTimeout)
		if err != nil {
			return 0, err
		}
		lc.c, lc.r = c, bufio.NewReaderSize(c, 4096)
	}
	st, keep, err := lc.roundTrip(token, body, headers)
	if err != nil || !keep {
		lc.c.Close()
		lc.c = nil
	}
	return st, err
}

func (lc *loadConn) roundTrip(token, body string, headers []string) (status int, keep bool, _ error) {
	b := append(lc.buf[:0], "POST "...)
	b = append(b, lc.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, lc.host...)
	b = append(b, "\r\nContent-Type: application/json\r\n"...)
	if token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, token...)
		b = append(b, "\r\n"...)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		b = append(b, headers[i]...)
		b = append(b, ": "...)
		b = append(b, headers[i+1]...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	lc.buf = b
	if err := lc.c.SetDeadline(time.Now().Add(loadTimeout)); err != nil {
		return 0, false, err
	}
	if _, err := lc.c.Write(b); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(lc.r, nil)
	if err != nil {
		return 0, false, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err == nil && !resp.Close, err
}

func (lc *loadConn) close() {
	if lc.c != nil {
		lc.c.Close()
	}
}
