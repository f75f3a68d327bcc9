package driver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"time"
)

// HTTPSProbe verifies a bootstrap by fetching https://{free domain}/ with
// the certificate verified: a TLS handshake that verifies and an HTTP
// answer below 500 mean Traefik is up and the certificate is warm.
type HTTPSProbe struct {
	Timeout time.Duration
	// RootCAs replaces the system roots (tests use their own CA).
	RootCAs *x509.CertPool
	// Port overrides 443 (tests).
	Port string
	// Dial opens the probe's connection (S13: within the drivers'
	// descriptors); nil dials directly.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (p *HTTPSProbe) Bootstrap(ctx context.Context, r BootstrapRequest) error {
	if r.FreeDomain == "" {
		return errorf(Scoped, "no free domain to probe")
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: p.RootCAs, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
			DialContext:       p.Dial,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	host := r.FreeDomain
	if p.Port != "" {
		host += ":" + p.Port
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		return errorf(Scoped, "bad free domain %q", r.FreeDomain)
	}
	resp, err := client.Do(req)
	if err != nil {
		return errorf(Transient, "https probe of %s: %s", r.FreeDomain, redactURLError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 500 {
		return errorf(Transient, "https probe of %s answered %d", r.FreeDomain, resp.StatusCode)
	}
	return nil
}
