package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wardenhq/warden/actors/environment"
)

// AccessLog follows the access log Caddy writes for the preview server
// (JSON lines, one per request, in a file) for the last visit under each
// host: how warden knows a preview is in use (E19, P21). A request that is
// no visit (a HEAD, a health check, warden's own smoke check) is not
// counted. What the log no longer holds (rolled away, or written before
// warden first read it, beyond its last maxLogTail bytes) is not known:
// a preview whose last visit is not known is idle since it became ready.
type AccessLog struct {
	// Path is the file Caddy writes (EnsureAccessLog points it there).
	Path string

	mu     sync.Mutex
	inode  uint64
	offset int64
	opened bool
	rest   []byte // a line not yet ended
	last   map[string]time.Time
}

// Limits on what is read and kept.
const (
	// maxLogTail: a log first read, or grown past this since the last
	// read, is read from its last maxLogTail bytes.
	maxLogTail = 8 << 20
	// maxLogLine: a longer line is no request of ours (skipped).
	maxLogLine = 64 << 10
	// maxLogHosts bounds the hosts remembered; the one seen longest ago
	// goes first.
	maxLogHosts = 10000
)

// logger is the Caddy logger the preview server's access log goes to.
const logger = "warden-previews"

// Last is the last visit under host that the log shows (zero: none). The
// log is read up to its end first.
func (l *AccessLog) Last(host string) time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.catchUp()
	return l.last[strings.ToLower(host)]
}

// catchUp reads what the log gained since the last read: from the start
// of a new file (rolled or truncated), from where it stopped otherwise.
func (l *AccessLog) catchUp() {
	f, err := os.Open(l.Path)
	if err != nil {
		return // none yet: nothing was served, or it is not configured
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return
	}
	var inode uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		inode = sys.Ino
	}
	size := st.Size()
	switch {
	case !l.opened:
		l.offset = max(0, size-maxLogTail)
	case inode != l.inode || size < l.offset:
		l.offset, l.rest = 0, nil
	}
	l.opened, l.inode = true, inode
	if size-l.offset > maxLogTail {
		l.offset, l.rest = size-maxLogTail, nil
	}
	if size == l.offset {
		return
	}
	buf := make([]byte, size-l.offset)
	n, _ := f.ReadAt(buf, l.offset)
	l.offset += int64(n)
	l.take(buf[:n])
}

// take counts the visits in b, keeping an unended last line for the next
// read.
func (l *AccessLog) take(b []byte) {
	if len(l.rest) > 0 {
		b = append(l.rest, b...)
		l.rest = nil
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(b) <= maxLogLine {
				l.rest = append([]byte(nil), b...)
			}
			return
		}
		if i <= maxLogLine {
			l.line(b[:i])
		}
		b = b[i+1:]
	}
}

// logLine is what is read of one access log line.
type logLine struct {
	Logger  string  `json:"logger"`
	TS      float64 `json:"ts"`
	Request struct {
		Method string `json:"method"`
		Host   string `json:"host"`
		URI    string `json:"uri"`
	} `json:"request"`
}

func (l *AccessLog) line(b []byte) {
	var ln logLine
	if json.Unmarshal(b, &ln) != nil || ln.Logger != "http.log.access."+logger || ln.TS <= 0 || math.IsInf(ln.TS, 0) {
		return
	}
	path, _, _ := strings.Cut(ln.Request.URI, "?")
	if !environment.IsVisit(ln.Request.Method, path) {
		return
	}
	host := strings.ToLower(ln.Request.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	sec, frac := math.Modf(ln.TS)
	at := time.Unix(int64(sec), int64(frac*1e9)).UTC()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if at.After(l.last[host]) {
		if _, known := l.last[host]; !known && len(l.last) >= maxLogHosts {
			l.forgetOldest()
		}
		l.last[host] = at
	}
}

func (l *AccessLog) forgetOldest() {
	var oldest string
	var at time.Time
	for h, t := range l.last {
		if oldest == "" || t.Before(at) || t.Equal(at) && h < oldest {
			oldest, at = h, t
		}
	}
	delete(l.last, oldest)
}

// EnsureAccessLog has Caddy write the preview server's access log to the
// AccessLog's file, JSON lines, and keep it out of its own log (not when
// it does so already): Caddy started, or restarted, without it knows no
// visit.
func (d *Routes) EnsureAccessLog(ctx context.Context) error {
	if d.Traffic == nil {
		return nil
	}
	var body []byte
	status, _, err := d.callBody(ctx, http.MethodGet, "/config/apps/http/servers/"+d.Server+"/logs/default_logger_name", "", nil, &body)
	if err != nil {
		return err
	}
	if status == http.StatusOK && strings.TrimSpace(string(body)) == `"`+logger+`"` {
		return nil
	}
	ours := map[string]any{"writer": map[string]any{"output": "file", "filename": d.Traffic.Path},
		"encoder": map[string]any{"format": "json"}, "include": []string{"http.log.access." + logger}}
	// Caddy's logging as it is configured is kept: the log is added to
	// it; only a Caddy with none gets one, its default log told to leave
	// the access lines to ours.
	logPath, logBody := "/config/logging/logs/"+logger, ours
	status, _, err = d.callBody(ctx, http.MethodGet, "/config/logging", "", nil, &body)
	if err != nil {
		return err
	}
	if status == http.StatusOK && strings.TrimSpace(string(body)) == "null" {
		logPath, logBody = "/config/logging", map[string]any{"logs": map[string]any{logger: ours,
			"default": map[string]any{"exclude": []string{"http.log.access." + logger}}}}
	}
	logging, _ := json.Marshal(logBody)
	for _, c := range []struct {
		path string
		body []byte
	}{{logPath, logging}, {"/config/apps/http/servers/" + d.Server + "/logs", []byte(`{"default_logger_name":"` + logger + `"}`)}} {
		var answer []byte
		status, _, err := d.callBody(ctx, http.MethodPost, c.path, "", c.body, &answer)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("caddy: configure the access log (%s): %d %s", c.path, status, bytes.TrimSpace(answer[:min(len(answer), 200)]))
		}
	}
	return nil
}
