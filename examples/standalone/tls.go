package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// certificate is the pair of -tls-cert and -tls-key, read at start and
// again on SIGHUP: a renewed certificate (certbot, cert-manager) is
// served from the next handshake on, without a restart that would end
// every stream.
type certificate struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// loadCertificate reads the pair; its errors name the flags.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("-tls-cert and -tls-key go together: a certificate chain and its private key, both PEM files")
	}
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the pair again; on failure the certificate served so far
// stays.
func (c *certificate) reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("-tls-cert %s -tls-key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cur.Store(&pair)
	return nil
}

// logTo says what is served, and warns of a certificate that browsers
// refuse for its dates.
func (c *certificate) logTo(log *slog.Logger) {
	leaf := c.cur.Load().Leaf
	if leaf == nil {
		return
	}
	log.Info("serving TLS (HTTP/2 and HTTP/1.1)", "subject", leaf.Subject.String(), "names", leaf.DNSNames, "ips", leaf.IPAddresses, "not_after", leaf.NotAfter)
	switch now := time.Now(); {
	case now.After(leaf.NotAfter):
		log.Warn("the TLS certificate has expired: clients will refuse it", "not_after", leaf.NotAfter)
	case now.Before(leaf.NotBefore):
		log.Warn("the TLS certificate is not valid yet: clients will refuse it", "not_before", leaf.NotBefore)
	}
}

// config is the listener's TLS configuration: HTTP/2 and HTTP/1.1 by
// ALPN, TLS 1.2 at least, the current certificate at each handshake.
func (c *certificate) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}
