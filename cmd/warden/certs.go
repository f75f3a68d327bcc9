package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wardenhq/warden/internal/trust"
)

// The cluster's certificates: etcd's members and warden's
// clients of them authenticate each other with mutual TLS under one
// cluster CA that `warden keygen` makes, one certificate per node.
//
// Lifetimes: the CA ten years (replaced by hand, see the README), a node's
// certificate one year (rotated with `warden keygen DIR --node NAME
// --rotate` and a restart of that node; every node keeps trusting the
// same CA, so the others need nothing).

const (
	caName          = "cluster-ca.crt"
	caKeyName       = "cluster-ca.key"
	caLifetime      = 10 * 365 * 24 * time.Hour
	nodeLifetime    = 365 * 24 * time.Hour
	clockSkewMargin = time.Hour // certificates start an hour early: clocks differ
)

// ensureCA writes the cluster CA into dir if it is absent.
func ensureCA(dir string) (created bool, err error) {
	certPath := filepath.Join(dir, caName)
	if _, err := os.Stat(certPath); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "warden cluster CA", Organization: []string{"warden"}},
		NotBefore:             now.Add(-clockSkewMargin),
		NotAfter:              now.Add(caLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return false, err
	}
	if err := writeKey(filepath.Join(dir, caKeyName), key); err != nil {
		return false, err
	}
	return true, trust.WriteFileAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// nodeCert writes name's certificate and key into dir, signed by the
// cluster CA, for every host given (IP addresses and DNS names the node
// is reached by); it keeps an existing one unless rotate.
// The certificates' uses: a member serves its peers and clients and is a
// client of them; a client (an operator's migrate or rekey) is only that.
var (
	nodeUsage   = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
)

func issueCert(dir, name string, hosts []string, usage []x509.ExtKeyUsage, rotate bool) (written bool, err error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if _, err := os.Stat(certPath); err == nil && !rotate {
		return false, nil
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"warden"}},
		NotBefore:    now.Add(-clockSkewMargin),
		NotAfter:     now.Add(nodeLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return false, err
	}
	if err := writeKey(keyPath, key); err != nil {
		return false, err
	}
	return true, trust.WriteFileAtomic(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, caName))
	if err != nil {
		return nil, nil, fmt.Errorf("the cluster CA: %w (warden keygen %s makes it)", err, dir)
	}
	keyPEM, err := trust.ReadPrivateFile(filepath.Join(dir, caKeyName))
	if err != nil {
		return nil, nil, fmt.Errorf("the cluster CA's key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("the cluster CA's files are not PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return trust.WriteFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// hostsOf splits --host.
func hostsOf(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}
