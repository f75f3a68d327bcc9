// Package httpapi is warden's wire surface on httprouter: the Terraform
// webhook, the operator API over marquees, pools and actors, health,
// readiness and metrics (docs/rules/http-api.md). A handler that changes
// an entity turns its request into one message to that entity's actor and
// maps the answer to the contract's status codes; reads go to the store
// (the last committed records), and the console and maintenance routes
// send no message. Nothing here decides a rule.
package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/trust"
)

// MaxBody is the largest request body accepted (413 beyond it). A deployed
// callback with an SSH key and acme-dns credentials is a few KiB.
const MaxBody = 64 << 10

// Options configure the API.
type Options struct {
	// CallbackToken is the shared callback token (mode shared); empty:
	// none.
	CallbackToken string
	// OperatorToken is one operator named "operator", beside
	// Operators.
	OperatorToken string
	Operators     []Operator
	// CallbackModes are the accepted callback modes; nil means every
	// mode whose secret is configured below.
	CallbackModes []string
	// CallbackKeys verify scoped credentials; CallbackTokenTTL is the
	// overlap a retired key keeps verifying.
	CallbackKeys     *trust.Keyring
	CallbackTokenTTL time.Duration
	// Webhooks verify Standard Webhooks signatures.
	Webhooks *trust.Webhooks
	// OIDC verifies GitHub Actions tokens.
	OIDC *trust.OIDC
	// ProtectMetrics requires the operator token on GET /metrics.
	ProtectMetrics bool
	// Cluster is this node's place in a cluster; nil is a single node.
	// ClusterToken authenticates the nodes' messages to each other;
	// PeerTransport carries requests forwarded to another node (nil:
	// http.DefaultTransport).
	Cluster       ClusterNode
	ClusterToken  string
	PeerTransport http.RoundTripper
	Logger        *slog.Logger
	// PublicURL is where clients reach this server; an https one makes
	// the console's cookies Secure behind a TLS-terminating proxy.
	PublicURL string
	// DevTokenHint, if set, is shown on the sign-in page: where the
	// development operator token is (make run's, which is public anyway).
	DevTokenHint string
	// Maintenance takes backups and verifies the store; nil: none.
	Maintenance Maintenance
}

// Server is the API's http.Handler.
type Server struct {
	sys      *actors.System
	opts     Options
	router   *httprouter.Router
	routes   *routeTable
	console  *console
	callback [32]byte
	// clusterToken is the SHA-256 of the nodes' shared token.
	clusterToken [32]byte
	// peers forwards requests to their entity's owner.
	peers     *http.Client
	operators []Operator
	modes     []string
	log       *slog.Logger
	now       func() time.Time
	// limiter bounds failed sign-ins and operator tokens per address.
	limiter *authLimiter
}

// New builds the router.
func New(sys *actors.System, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CallbackTokenTTL == 0 {
		o.CallbackTokenTTL = 24 * time.Hour
	}
	s := &Server{sys: sys, opts: o, router: httprouter.New(), log: o.Logger, now: sys.Now,
		callback: sha256.Sum256([]byte(o.CallbackToken)), clusterToken: sha256.Sum256([]byte(o.ClusterToken)),
		peers: &http.Client{Timeout: peerTimeout, Transport: o.PeerTransport}, operators: append([]Operator(nil), o.Operators...), modes: o.CallbackModes}
	if o.OperatorToken != "" {
		s.operators = append(s.operators, Operator{Name: "operator", Role: RoleOperator, TokenSHA256: sha256.Sum256([]byte(o.OperatorToken))})
	}
	if s.modes == nil {
		for mode, on := range map[string]bool{ModeScoped: o.CallbackKeys != nil, ModeShared: o.CallbackToken != "",
			ModeStandardWebhooks: o.Webhooks.Configured(), ModeGitHubOIDC: o.OIDC != nil} {
			if on {
				s.modes = append(s.modes, mode)
			}
		}
	}
	s.limiter = newAuthLimiter(sys.Now, sys.Metrics().Registry)
	s.routes = &routeTable{s: s}
	s.console = newConsole(s)
	r := s.routes
	s.router.HandleMethodNotAllowed = true
	s.router.NotFound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		refuse(w, notFound, "no such endpoint")
	})
	s.router.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		refuse(w, methodNotAllowed, "method not allowed on this endpoint")
	})
	s.router.PanicHandler = func(w http.ResponseWriter, _ *http.Request, v any) {
		s.log.Error("handler panic", "panic", fmt.Sprint(v))
		refuse(w, internal, "internal error")
	}
	s.routeWebhooks(r)
	s.routeMarquees(r)
	s.routeEnvironments()
	s.routeSeeds()
	s.routeOperations(r)
	return s
}

// routeWebhooks serves the callbacks.
func (s *Server) routeWebhooks(r *routeTable) {
	noQuery := []queryRule{}
	r.POST("/v1/webhooks/terraform", s.query(noQuery, s.owned(bodyEntity("marquee", func(b []byte) (string, error) {
		id, _, err := DecodeCallback(b)
		return id, err
	}), s.admitCallback, s.ready(s.webhook))))
}

// routeMarquees serves the marquees' operator API.
func (s *Server) routeMarquees(r *routeTable) {
	noQuery := []queryRule{}
	marqueeInPath := pathEntity("marquee", "id")
	r.POST("/v1/marquees", s.query(noQuery, s.owned(bodyEntity("marquee", func(b []byte) (string, error) {
		c, err := DecodeCreate(b)
		return c.ID, err
	}), s.admitOperator, s.write(s.readyOp(s.createMarquee)))))
	r.GET("/v1/marquees", s.query(marqueeListRules(), s.read(s.readableOp(s.listMarquees))))
	r.GET("/v1/marquees/:id", s.query(noQuery, s.read(s.readableOp(s.getMarquee))))
	r.GET("/v1/marquees/:id/history", s.query([]queryRule{{name: "limit"}}, s.read(s.readableOp(s.history))))
	r.GET("/v1/marquees/:id/explain", s.query(noQuery, s.read(s.readableOp(s.explainMarquee))))
	r.POST("/v1/marquees/:id/dry-run", s.query(noQuery, s.owned(marqueeInPath, s.admitOperator, s.write(s.readyOp(s.dryRunMarquee)))))
	r.POST("/v1/marquees/:id/redeploy", s.query(noQuery, s.owned(marqueeInPath, s.admitOperator, s.write(s.readyOp(s.command(http.StatusAccepted, func(b []byte, by string) (marquee.Event, error) {
		return marquee.Redeploy{By: by}, decodeEmpty(b)
	}))))))
	r.POST("/v1/marquees/:id/destroy", s.query(noQuery, s.owned(marqueeInPath, s.admitOperator, s.write(s.readyOp(s.command(http.StatusAccepted, decodeDestroy))))))
	r.POST("/v1/marquees/:id/disable", s.query(noQuery, s.owned(marqueeInPath, s.admitOperator, s.write(s.readyOp(s.command(http.StatusOK, func(b []byte, by string) (marquee.Event, error) {
		return marquee.Disable{By: by}, decodeEmpty(b)
	}))))))
	r.POST("/v1/marquees/:id/actions/run-now", s.query(noQuery, s.owned(marqueeInPath, s.admitOperator, s.write(s.readyOp(s.command(http.StatusAccepted, func(b []byte, by string) (marquee.Event, error) {
		return marquee.RunNow{By: by}, decodeEmpty(b)
	}))))))
	r.POST("/v1/marquees/:id/enable", s.query(noQuery, s.owned(marqueeInPath, s.admitOperator, s.write(s.readyOp(s.command(http.StatusOK, func(b []byte, by string) (marquee.Event, error) {
		return marquee.Enable{By: by}, decodeEmpty(b)
	}))))))
}

// routeOperations serves pools, the cluster, the process's health,
// metrics and its API's description.
func (s *Server) routeOperations(r *routeTable) {
	o, sys, noQuery := s.opts, s.sys, []queryRule{}
	r.GET("/v1/pools", s.query(noQuery, s.read(s.readableOp(s.pools))))
	r.GET("/v1/pools/:name", s.query(noQuery, s.read(s.readableOp(s.pool))))
	r.GET("/v1/pools/:name/explain", s.query(noQuery, s.read(s.readableOp(s.explainPool))))
	r.GET("/v1/cluster", s.query(noQuery, s.read(s.clusterView)))
	r.POST("/v1/cluster/drain", s.query(noQuery, s.write(s.drain)))
	r.POST("/v1/internal/messages", s.query(noQuery, s.internalMessage))
	r.GET("/v1/actors", s.query(noQuery, s.read(s.actors)))
	s.routeMaintenance(r)
	r.GET("/v1/openapi.json", s.query(noQuery, s.openAPI))
	r.GET("/healthz", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.GET("/readyz", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		// Not ready: recovering, stopping, or a store that refuses writes,
		// with its cause.
		if err := sys.Readiness(); err != nil {
			s.writeErr(w, err)
			return
		}
		if o.Cluster != nil && !placed(o.Cluster.View()) {
			refuse(w, unavailable, "this cluster node is up; its shards are still being placed")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	metrics := promhttp.HandlerFor(sys.Metrics().Registry, promhttp.HandlerOpts{})
	metricsHandle := func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { metrics.ServeHTTP(w, r) }
	if o.ProtectMetrics {
		r.GET("/metrics", s.read(func(w http.ResponseWriter, r *http.Request, p httprouter.Params, _ Operator) { metricsHandle(w, r, p) }))
	} else {
		r.GET("/metrics", metricsHandle)
	}
}

// ServeHTTP sends console pages to the console and everything else to the
// API router.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isConsolePath(r.URL.Path) {
		s.console.ServeHTTP(w, r)
		return
	}
	s.router.ServeHTTP(w, r)
}

// isConsolePath says which requests are the console's.
func isConsolePath(p string) bool { return p == "/" || p == "/ui" || strings.HasPrefix(p, "/ui/") }

// Route is one registered endpoint: its method and path pattern.
type Route struct{ Method, Path string }

// Routes lists every endpoint the router serves, in registration order
// (the OpenAPI document must cover each).
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes.list...) }

// routeTable registers endpoints, remembering each and timing its
// requests by pattern.
type routeTable struct {
	s    *Server
	list []Route
}

// GET serves HEAD as well (RFC 9110 section 9.1): the same handler,
// whose body the server discards.
func (t *routeTable) GET(path string, h httprouter.Handle)  { t.handle(http.MethodGet, path, h) }
func (t *routeTable) POST(path string, h httprouter.Handle) { t.handle(http.MethodPost, path, h) }

func (t *routeTable) handle(method, path string, h httprouter.Handle) {
	t.list = append(t.list, Route{Method: method, Path: path})
	m := t.s.sys.Metrics()
	label := method + " " + path
	seconds := m.HTTPSeconds.WithLabelValues(label)
	// Most requests answer 200: its counter is looked up once, not per
	// request.
	ok := m.HTTPRequests.WithLabelValues(label, strconv.Itoa(http.StatusOK))
	clk := t.s.sys.Clock()
	timed := func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		start := clk.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h(rec, r, p)
		seconds.Observe(clk.Since(start).Seconds())
		if rec.code == http.StatusOK {
			ok.Inc()
		} else {
			m.HTTPRequests.WithLabelValues(label, strconv.Itoa(rec.code)).Inc()
		}
	}
	t.s.router.Handle(method, path, timed)
	if method == http.MethodGet {
		t.s.router.Handle(http.MethodHead, path, timed)
	}
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets live updates (server-sent events) through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// NewHTTPServer wraps a handler with timeouts against slow clients.
//
// Serve it on Listener(ln), so that a request framed two ways is
// refused (framing, below).
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           framing(h),
		ConnContext:       withRawConn,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}

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

// ready admits a request that may write only while the system takes
// writes; otherwise it is answered at once with why.
func (s *Server) ready(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		if err := s.sys.Readiness(); err != nil {
			s.writeErr(w, err)
			return
		}
		h(w, r, p)
	}
}

// opHandle is an operator endpoint: it knows who asked.
type opHandle = func(http.ResponseWriter, *http.Request, httprouter.Params, Operator)

func (s *Server) readyOp(h opHandle) opHandle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
		if err := s.sys.Readiness(); err != nil {
			s.writeErr(w, err)
			return
		}
		h(w, r, p, op)
	}
}

// readableOp admits a read while the store can be read: also on a
// read-only store, never on a sealed one.
func (s *Server) readableOp(h opHandle) opHandle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
		if err := s.sys.Readable(); err != nil {
			s.writeErr(w, err)
			return
		}
		h(w, r, p, op)
	}
}

// query refuses unknown query parameters and values before anything
// else runs.
func (s *Server) query(rules []queryRule, h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		if r.URL.RawQuery != "" {
			q, err := url.ParseQuery(r.URL.RawQuery)
			if err == nil {
				err = checkQuery(q, rules...)
			} else {
				err = invalidf("query does not parse")
			}
			if err != nil {
				s.badRequest(w, err)
				return
			}
		}
		h(w, r, p)
	}
}

// bearer reads the Authorization header: the scheme is case-insensitive,
// the token is what follows one space.
func bearer(r *http.Request) (token string, present bool, fail *authFail) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return "", false, nil
	}
	if len(h) > 1 {
		return "", true, &authFail{refusal: invalidRequest, msg: "more than one Authorization header"}
	}
	scheme, tok, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
		return "", true, unauthorized("Authorization must be `Bearer <token>`")
	}
	return tok, true, nil
}

// readBody enforces the content type and the size limit.
func readBody(w http.ResponseWriter, r *http.Request, optional bool) ([]byte, bool) {
	if r.ContentLength > MaxBody {
		refuse(w, tooLarge, fmt.Sprintf("body over %d bytes", MaxBody))
		return nil, false
	}
	body, err := bodyOf(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(w, tooLarge, fmt.Sprintf("body over %d bytes", MaxBody))
		} else {
			refuse(w, invalidRequest, "body could not be read")
		}
		return nil, false
	}
	if len(body) == 0 && optional {
		return nil, true
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		refuse(w, unsupportedMediaType, "Content-Type must be application/json")
		return nil, false
	}
	return body, true
}

// bodyOf is the request's body, whole, within MaxBody (the declared
// length was checked): the bytes the callback path read as they are, a
// declared length in one allocation, or, undeclared, up to the limit.
func bodyOf(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if lb, ok := r.Body.(*callbackBody); ok {
		b := lb.b
		lb.b = nil
		return b, nil
	}
	if n := r.ContentLength; n >= 0 {
		b := make([]byte, n)
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
}

func isJSON(ct string) bool {
	return ct == "application/json" || len(ct) > 16 && ct[:16] == "application/json" && (ct[16] == ';' || ct[16] == ' ')
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// refuse answers a refusal in the handler's own words, through the one
// table (answers).
func refuse(w http.ResponseWriter, r refusal, msg string) { respond(w, answers[r], msg) }

// respond writes an answer: its status, Retry-After and the error body.
func respond(w http.ResponseWriter, a answer, msg string) {
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	var b errorBody
	b.Error.Code, b.Error.Message = a.code, msg
	writeJSON(w, a.status, b)
}

// Unavailable answers 503 unavailable with Retry-After: the process's own
// answer before the API is up.
func Unavailable(w http.ResponseWriter, msg string) { refuse(w, unavailable, msg) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = internal.status(), []byte(`{"error":{"code":"internal","message":"encode"}}`)
	}
	writeRaw(w, status, b)
}

// writeRaw answers b, a JSON value, and a newline. Both servers set the
// Content-Length of an answer this small themselves (the callback path always,
// net/http when the handler returns before its chunking buffer fills).
// The type goes in by its canonical key, one shared value, as every
// answer sets it (Header.Set canonicalizes the key and allocates the
// value); nothing appends to it or writes into it. b is written as it is,
// never appended to: a delivery's kept answer is written again for every
// repeat.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write(newline)
}

var jsonContentType, newline = []string{"application/json"}, []byte("\n")

// writeErr answers an error by its kind. An error of no known kind is a
// bug or an I/O failure nobody classified: logged, and answered 500 so it
// is seen rather than retried as if it were load.
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	r := refusalOf(err)
	if r == internal {
		s.log.Error("request failed", "err", err)
		refuse(w, internal, "internal error")
		return
	}
	refuse(w, r, err.Error())
}
