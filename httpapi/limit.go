package httpapi

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// authLimiter bounds failed sign-ins and unknown operator tokens per
// client address: a token bucket of authBurst failures that
// refills one every authRefill. An address whose bucket is empty is
// refused with 429 before its credential is looked at, until it refills:
// ten guesses a minute at most, against tokens of 256 bits. Successes
// cost nothing, so an operator who mistypes keeps working. The table is
// bounded (maxLimited addresses, the least recently failed forgotten
// first).
type authLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*authBucket
	limited *prometheus.CounterVec
}

type authBucket struct {
	tokens float64
	at     time.Time
}

const (
	authBurst  = 10
	authRefill = 6 * time.Second
	maxLimited = 10_000
)

func newAuthLimiter(now func() time.Time, reg *prometheus.Registry) *authLimiter {
	l := &authLimiter{now: now, buckets: map[string]*authBucket{},
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "warden_auth_rate_limited_total",
			Help: "Requests refused with 429 because their address failed to authenticate too often (console sign-in, operator API)."}, []string{"surface"})}
	for _, surface := range []string{"api", "console"} {
		l.limited.WithLabelValues(surface).Add(0) // at 0 from start-up, for increase()
	}
	var already prometheus.AlreadyRegisteredError
	if err := reg.Register(l.limited); err != nil && !errors.As(err, &already) {
		panic(err)
	}
	return l
}

// level is the bucket of addr now, refilled.
func (l *authLimiter) level(addr string) *authBucket {
	now := l.now()
	b := l.buckets[addr]
	if b == nil {
		if len(l.buckets) >= maxLimited {
			l.forgetOldest()
		}
		b = &authBucket{tokens: authBurst, at: now}
		l.buckets[addr] = b
	}
	b.tokens = min(authBurst, b.tokens+float64(now.Sub(b.at))/float64(authRefill))
	b.at = now
	return b
}

func (l *authLimiter) forgetOldest() {
	var oldest string
	var at time.Time
	for a, b := range l.buckets {
		if oldest == "" || b.at.Before(at) {
			oldest, at = a, b.at
		}
	}
	delete(l.buckets, oldest)
}

// refused is the 429 for an address with no failures left, or nil.
func (l *authLimiter) refused(addr, surface string) *authFail {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, known := l.buckets[addr]; !known {
		return nil
	}
	b := l.level(addr)
	if b.tokens >= 1 {
		return nil
	}
	l.limited.WithLabelValues(surface).Inc()
	wait := time.Duration((1 - b.tokens) * float64(authRefill))
	return &authFail{refusal: rateLimited, msg: "too many failed attempts from this address; wait and try again",
		retryAfter: strconv.Itoa(int(wait/time.Second) + 1)}
}

// failed spends one of addr's failures.
func (l *authLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.level(addr)
	b.tokens = max(0, b.tokens-1)
}

// clientAddr is the address a request came from: the connection's, not a
// header a client could write.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
