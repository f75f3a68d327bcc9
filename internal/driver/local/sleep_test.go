package local

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/driver"
)

// waker stands in for warden's waker: it answers 503 and keeps what each
// request it was sent named.
type waker struct {
	mu   sync.Mutex
	seen []string // "<env> <method> <path>"
	addr string
}

func newWaker(t *testing.T) *waker {
	w := &waker{}
	s := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.seen = append(w.seen, r.Header.Get(driver.HeaderWake)+" "+r.Method+" "+r.URL.Path+" "+r.Header.Get(driver.HeaderWakePath))
		w.mu.Unlock()
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(rw, "waking")
	}))
	t.Cleanup(s.Close)
	w.addr = strings.TrimPrefix(s.URL, "http://")
	return w
}

func (w *waker) requests() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

// through asks path under host through Caddy's preview listener.
func through(t *testing.T, c *caddy, method, host, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+c.proxy+path, nil)
	require.NoError(t, err)
	req.Host = host
	req.Header.Set(driver.HeaderWake, "forged-by-the-client")
	// A connection per request: Caddy replaces its server at each config
	// change, and a kept-alive connection may be answered by the old one.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestP21ARouteSleepsToTheWakerAndWakesByItsActivation: a sleep switches
// the branch's route, at its own generation, to the waker, rewriting
// every request to the waker's path and naming the environment over
// anything the client sent; it is observed at the waker; sleeping again
// changes nothing; the activation a wake runs points it at the
// application again under the same generation (E8, E19, E20).
func TestP21ARouteSleepsToTheWakerAndWakesByItsActivation(t *testing.T) {
	c := startCaddy(t)
	w := newWaker(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	d.Waker = w.addr
	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	status, _, body := through(t, c, http.MethodGet, "feature-x.localhost", "/")
	require.Equal(t, http.StatusOK, status, body)

	o := route(t, d, "sleep", "env-1", 1, 0).Observation
	require.True(t, o.Exists && o.AtWaker && o.Matches, "%+v", o)
	require.Equal(t, uint64(1), o.RouteTarget)
	require.Equal(t, "env-1", o.Owner)
	require.True(t, route(t, d, "observe", "env-1", 1, 0).Observation.AtWaker)

	status, hdr, _ := through(t, c, http.MethodGet, "feature-x.localhost", "/some/page")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "env-1", hdr.Get(HeaderEnvironment), "the answer names the preview as any through its route does")
	require.Equal(t, []string{"env-1 GET " + driver.WakerPath + " /some/page"}, w.requests(), "the route's header, not the client's")

	require.True(t, route(t, d, "sleep", "env-1", 1, 0).Observation.AtWaker, "asleep already: as it is")
	o = route(t, d, "apply", "env-1", 1, 0).Observation
	require.True(t, o.Exists && o.Matches && !o.AtWaker, "%+v", o)
	status, _, body = through(t, c, http.MethodGet, "feature-x.localhost", "/")
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, w.requests(), 1)
}

// TestP21ASleepNeverTakesAnotherGenerationsRoute: a sleep of an older
// preview finds the route held by a newer one and leaves it (E8, I14);
// without a waker a sleep is a configuration failure, never a route
// pointed nowhere.
func TestP21ASleepNeverTakesAnotherGenerationsRoute(t *testing.T) {
	c := startCaddy(t)
	w := newWaker(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1"), "env-2": app(t, "env-2", "rev-env-2")})
	require.Equal(t, "configuration", route(t, d, "sleep", "env-1", 1, 0).Category)
	d.Waker = w.addr
	require.True(t, route(t, d, "apply", "env-2", 2, 1).OK)
	o := route(t, d, "sleep", "env-1", 1, 0).Observation
	require.Equal(t, uint64(2), o.RouteTarget)
	require.False(t, o.AtWaker)
	status, _, _ := through(t, c, http.MethodGet, "feature-x.localhost", "/")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, w.requests())
}

// TestP21TheAccessLogTellsTheLastVisit: Caddy is configured to write the
// preview server's access log where the driver reads it; a visit under a
// host is its last request; a HEAD and a health check are not visits.
func TestP21TheAccessLogTellsTheLastVisit(t *testing.T) {
	c := startCaddy(t)
	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	d.Traffic = &AccessLog{Path: filepath.Join(t.TempDir(), "access.log")}
	require.NoError(t, d.EnsureAccessLog(context.Background()))
	require.NoError(t, d.EnsureAccessLog(context.Background()), "configured already: nothing to do")
	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	require.True(t, route(t, d, "observe", "env-1", 1, 0).Observation.LastRequest.IsZero(), "no visit yet")

	through(t, c, http.MethodHead, "feature-x.localhost", "/")
	through(t, c, http.MethodGet, "feature-x.localhost", "/healthz")
	require.Eventually(t, func() bool { return lines(d.Traffic.Path) >= 2 }, 10*time.Second, 20*time.Millisecond)
	require.True(t, route(t, d, "observe", "env-1", 1, 0).Observation.LastRequest.IsZero(), "a HEAD and a health check are no visits")

	before := time.Now().Add(-time.Second)
	through(t, c, http.MethodGet, "feature-x.localhost:8088", "/page")
	require.Eventually(t, func() bool { return lines(d.Traffic.Path) >= 3 }, 10*time.Second, 20*time.Millisecond)
	last := route(t, d, "observe", "env-1", 1, 0).Observation.LastRequest
	require.True(t, last.After(before), "the visit's time: %v", last)
	require.True(t, d.Traffic.Last("other.localhost").IsZero())
}

func lines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// TestP21AnApplicationSleepsStoppedAndWakesStarted: a sleep stops the
// container, observed stopped; the wake's apply starts the application
// again as provisioning does, on the port it had, answering as itself
// (E19, E20).
func TestP21AnApplicationSleepsStoppedAndWakesStarted(t *testing.T) {
	p := podmanHere(t)
	cleanupPodman(t, p, "env-p3")
	example, err := LoadMigrations("../../../examples/previewapp/migrations")
	require.NoError(t, err)
	data := &Data{Admin: adminDSN, Migrations: example}
	require.True(t, do(t, data, "database", "apply", "env-p3").OK)
	require.True(t, do(t, data, "migrations", "apply", "env-p3").Observation.Matches)
	require.True(t, pod(t, p, "artifact", "apply", "env-p3").Observation.Exists)
	running := func() bool { return pod(t, p, "app", "observe", "env-p3").Observation.Matches }
	require.True(t, pod(t, p, "app", "apply", "env-p3").OK)
	require.Eventually(t, running, 20*time.Second, 100*time.Millisecond)
	id := pod(t, p, "app", "observe", "env-p3").Observation.ProviderID

	o := pod(t, p, "app", "sleep", "env-p3").Observation
	require.True(t, o.Exists && o.Stopped, "%+v", o)
	require.Equal(t, id, o.ProviderID, "stopped, not removed")
	require.True(t, pod(t, p, "app", "sleep", "env-p3").Observation.Stopped, "stopped already: as it is")
	up, err := p.Upstream(context.Background(), "env-p3")
	require.NoError(t, err)

	require.True(t, pod(t, p, "app", "apply", "env-p3").OK)
	require.Eventually(t, running, 20*time.Second, 100*time.Millisecond, "started again, answering as itself")
	again, err := p.Upstream(context.Background(), "env-p3")
	require.NoError(t, err)
	require.Equal(t, up, again, "on the port it had: its route stays as written")
}

// TestP21TheAccessLogReaderKeepsToItsLimits: lines are read as they come
// (a line not yet ended waits for its end); a rolled or truncated log is
// read from its start; a line over the limit, one of another logger, or
// one that does not decode is skipped; hosts are remembered up to the
// limit, the oldest forgotten first.
func TestP21TheAccessLogReaderKeepsToItsLimits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l := &AccessLog{Path: path}
	line := func(host, method, uri string, ts float64) string {
		return `{"logger":"http.log.access.warden-previews","ts":` + strconv.FormatFloat(ts, 'f', -1, 64) +
			`,"request":{"method":"` + method + `","host":"` + host + `","uri":"` + uri + `"}}` + "\n"
	}
	require.True(t, l.Last("a.localhost").IsZero(), "no file yet")
	write := func(s string, appendTo bool) {
		flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if appendTo {
			flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(path, flag, 0o600)
		require.NoError(t, err)
		_, err = f.WriteString(s)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	full := line("a.localhost", "GET", "/x?y=1", 1000)
	write(full[:20], false)
	require.True(t, l.Last("a.localhost").IsZero(), "half a line is not read")
	write(full[20:]+`not json`+"\n"+`{"logger":"other","ts":2000,"request":{"method":"GET","host":"a.localhost","uri":"/"}}`+"\n", true)
	require.Equal(t, int64(1000), l.Last("A.LOCALHOST").Unix())
	write(`{"logger":"http.log.access.warden-previews","ts":3000,"request":{"method":"GET","host":"a.localhost","uri":"/`+strings.Repeat("x", maxLogLine)+`"}}`+"\n", true)
	require.Equal(t, int64(1000), l.Last("a.localhost").Unix(), "an overlong line is skipped")
	write(line("a.localhost", "GET", "/", 500), false) // truncated: read from its start
	require.Equal(t, int64(1000), l.Last("a.localhost").Unix(), "an older visit does not move the last one back")
	require.NoError(t, os.Rename(path, path+".1"))
	write(line("b.localhost:8088", "POST", "/", 4000), false) // rolled: a new file
	require.Equal(t, int64(4000), l.Last("b.localhost").Unix())

	var many strings.Builder
	for i := range maxLogHosts + 5 {
		many.WriteString(line("h"+strconv.Itoa(i)+".localhost", "GET", "/", float64(5000+i)))
	}
	write(many.String(), true)
	require.Equal(t, int64(5000+maxLogHosts+4), l.Last("h"+strconv.Itoa(maxLogHosts+4)+".localhost").Unix())
	require.LessOrEqual(t, len(l.last), maxLogHosts)
	require.True(t, l.Last("a.localhost").IsZero(), "the oldest is forgotten first")
}

// FuzzAccessLogLine: whatever Caddy's log holds, the reader neither panics
// nor remembers a host it was not told, nor one past its limit.
func FuzzAccessLogLine(f *testing.F) {
	f.Add([]byte(`{"logger":"http.log.access.warden-previews","ts":1700000000.5,"request":{"method":"GET","host":"a.localhost:8088","uri":"/x"}}` + "\n"))
	f.Add([]byte(`{"logger":"http.log.access.warden-previews","ts":1e308,"request":{"method":"GET","host":"","uri":""}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l := &AccessLog{}
		l.take(b)
		require.LessOrEqual(t, len(l.rest), maxLogLine)
		require.LessOrEqual(t, len(l.last), maxLogHosts)
		for host := range l.last {
			require.Equal(t, strings.ToLower(host), host)
		}
	})
}

// TestP21TheAccessLogIsAddedToCaddysOwnLogging: a Caddy whose logging is
// configured already keeps its logs; the previews' access log is added
// beside them, and visits are read from it.
func TestP21TheAccessLogIsAddedToCaddysOwnLogging(t *testing.T) {
	c := startCaddy(t)
	theirs := filepath.Join(t.TempDir(), "theirs.log")
	req, err := http.NewRequest(http.MethodPost, "http://"+c.admin+"/config/logging",
		strings.NewReader(`{"logs":{"theirs":{"writer":{"output":"file","filename":"`+theirs+`"},"include":["admin"]}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	d := routesOn(c, map[string]string{"env-1": app(t, "env-1", "rev-env-1")})
	d.Traffic = &AccessLog{Path: filepath.Join(t.TempDir(), "access.log")}
	require.NoError(t, d.EnsureAccessLog(context.Background()))
	resp, err = http.Get("http://" + c.admin + "/config/logging/logs")
	require.NoError(t, err)
	var logs map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&logs))
	resp.Body.Close()
	require.Contains(t, logs, "theirs", "their log is kept")
	require.Contains(t, logs, "warden-previews", "ours is added beside it")

	require.True(t, route(t, d, "apply", "env-1", 1, 0).OK)
	through(t, c, http.MethodGet, "feature-x.localhost", "/page")
	require.Eventually(t, func() bool { return !d.Traffic.Last("feature-x.localhost").IsZero() }, 10*time.Second, 20*time.Millisecond,
		"the visit is read from the log")
}
