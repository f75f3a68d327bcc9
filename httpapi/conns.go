package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// ConnLimit bounds the connections served at once, so that the process's
// file descriptors are never all taken by clients and the store always
// has the ones it needs (S13). Beyond Serve connections, up to Shed more
// are accepted only to be answered 503 overloaded with Retry-After and
// closed; beyond those, new connections wait in the kernel's backlog
// until one closes.
type ConnLimit struct {
	Serve, Shed int
}

// LimitConns wraps ln with l's bounds (Listener wraps the result); the
// connections served now and those refused so far are counted in the
// returned stats.
func LimitConns(ln net.Listener, l ConnLimit) (net.Listener, *ConnStats) {
	st := &ConnStats{}
	return &limitListener{Listener: ln, serve: make(chan struct{}, l.Serve), shed: make(chan struct{}, l.Shed), stats: st}, st
}

// ConnStats counts what the limit did.
type ConnStats struct {
	Open, Shed atomic.Int64
}

type limitListener struct {
	net.Listener
	serve, shed chan struct{}
	stats       *ConnStats
}

// Accept takes a serving slot if one is free, else a shedding one; with
// neither it waits for either before it accepts (and so takes a
// descriptor).
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.serve <- struct{}{}:
			return l.accept()
		default:
		}
		select {
		case l.serve <- struct{}{}:
			return l.accept()
		case l.shed <- struct{}{}:
			c, err := l.Listener.Accept()
			if err != nil {
				<-l.shed
				return nil, err
			}
			l.stats.Shed.Add(1)
			go func() {
				defer func() { <-l.shed }()
				refuseConn(c)
			}()
		}
	}
}

func (l *limitListener) accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.serve
		return nil, err
	}
	l.stats.Open.Add(1)
	return &limitedConn{Conn: c, release: func() { l.stats.Open.Add(-1); <-l.serve }}, nil
}

type limitedConn struct {
	net.Conn
	released atomic.Bool
	release  func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.released.CompareAndSwap(false, true) {
		c.release()
	}
	return err
}

// shedWait bounds how long a refused connection's request head is read:
// the answer follows what was sent, so the client reads it, not a reset.
const shedWait = time.Second

// refuseConn answers one connection 503 overloaded with Retry-After and
// closes it, after reading its request head (at most MaxHeaderBytes).
func refuseConn(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(shedWait))
	r := bufio.NewReaderSize(c, 4096)
	var head bytes.Buffer
	for head.Len() < 16<<10 {
		line, err := r.ReadSlice('\n')
		head.Write(line)
		if err != nil || len(bytes.TrimRight(line, "\r\n")) == 0 {
			break
		}
	}
	a := answers[overloaded]
	var b errorBody
	b.Error.Code, b.Error.Message = a.code, "warden serves as many connections as its file descriptors allow; try again"
	body, _ := json.Marshal(b)
	body = append(body, '\n')
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(a.status) + " " + http.StatusText(a.status) + "\r\n")
	out.WriteString("Retry-After: " + a.retryAfter + "\r\nContent-Type: application/json\r\nConnection: close\r\n")
	out.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	out.Write(body)
	_, _ = c.Write(out.Bytes())
}
