// Package authserver is the hub's client of OAuth 2.0 authorization
// servers (RFC 8414): it discovers an issuer's metadata, keeps its JWK Set
// fresh in a jwk.Cache, and fetches both through an HTTP client that
// refuses non-public addresses unless told otherwise.
//
// A Servers holds every authorization server of one hub: New, then Add
// each issuer, Start with the hub's context, Shutdown after canceling it.
// The *Keys that Add returns is the issuer's token.KeySource.
package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/httprc/v3/errsink"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// Limits of the fetches of authorization server metadata and JWK Sets.
const (
	// fetchTimeout bounds one fetch (metadata or JWK Set), connection
	// included.
	fetchTimeout = 10 * time.Second
	// maxFetchBytes caps a fetched document.
	maxFetchBytes = 1 << 20
	// jwksMinInterval is the shortest interval between the scheduled
	// refreshes of a JWK Set, whatever its Cache-Control says.
	jwksMinInterval = 5 * time.Minute
	// jwksMaxInterval is the longest one.
	jwksMaxInterval = 24 * time.Hour
	// DefaultRefreshLimit is the shortest interval between two
	// on-demand fetches of an issuer's keys: after a failure, or when a
	// token names an unknown kid.
	DefaultRefreshLimit = time.Minute
)

// MetadataURL returns where the RFC 8414 metadata of the authorization
// server iss lies: /.well-known/oauth-authorization-server inserted
// between its host and its path, a terminating "/" removed (§3.1).
func MetadataURL(iss string) (string, error) {
	u, err := url.Parse(iss)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return "", errors.New("not an https URL")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(iss, "#") || u.User != nil:
		return "", errors.New("has a query, fragment or user info")
	}
	m := *u
	m.Path = "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.Path, "/")
	m.RawPath = ""
	if u.RawPath != "" {
		m.RawPath = "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.RawPath, "/")
	}
	return m.String(), nil
}

// Config is what New needs.
type Config struct {
	// Client is the base of the fetching client (nil for a default one);
	// see New.
	Client *http.Client
	// AllowPrivate lets the fetches reach non-public addresses.
	AllowPrivate bool
	// RefreshLimit is the shortest interval between two on-demand fetches
	// of one issuer's keys; DefaultRefreshLimit when not positive.
	RefreshLimit time.Duration
	// Logger receives the fetch failures.
	Logger *slog.Logger
}

// Servers fetches and keeps fresh the keys of the hub's authorization
// server issuers. Its goroutines (those of the jwk.Cache and the initial
// fetches) end with the context given to Start.
type Servers struct {
	ctx       context.Context
	client    *http.Client
	transport *http.Transport // owned: its idle connections close at shutdown; nil with a foreign RoundTripper
	every     time.Duration   // see DefaultRefreshLimit
	log       *slog.Logger
	issuers   []*Keys

	cache *jwk.Cache // started by Start
	wg    sync.WaitGroup
}

// New returns the Servers of the given configuration. It fails when
// cfg.Client's Transport is not an *http.Transport and private addresses
// are to be refused: such a transport cannot be guarded.
func New(cfg Config) (*Servers, error) {
	as := &Servers{every: cfg.RefreshLimit, log: cfg.Logger}
	if as.every <= 0 {
		as.every = DefaultRefreshLimit
	}
	if as.log == nil {
		as.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if as.client, as.transport, err = fetchClient(cfg.Client, cfg.AllowPrivate); err != nil {
		return nil, err
	}
	return as, nil
}

// Add returns the key source of the authorization server iss. Call it
// before Start.
func (as *Servers) Add(iss string) (*Keys, error) {
	meta, err := MetadataURL(iss)
	if err != nil {
		return nil, fmt.Errorf("authorization server %q: %v", iss, err)
	}
	r := &Keys{as: as, id: iss, metaURL: meta}
	as.issuers = append(as.issuers, r)
	return r, nil
}

// Start starts the cache and, in the background, the first fetch of
// every issuer's keys, so that the hub's constructor never waits for the
// network. The goroutines end with ctx.
func (as *Servers) Start(ctx context.Context) error {
	as.ctx = ctx
	c, err := jwk.NewCache(ctx, httprc.NewClient(
		httprc.WithWorkers(2),
		httprc.WithErrorSink(errsink.NewFunc(func(_ context.Context, err error) {
			as.log.Warn("mercure: cannot refresh the keys of an authorization server", "error", err)
		}))))
	if err != nil {
		return err
	}
	as.cache = c
	for _, r := range as.issuers {
		as.wg.Go(func() { _, _ = r.fetch(ctx) })
	}
	return nil
}

// Shutdown waits for the goroutines, whose context (given to Start) the
// caller has canceled, then closes the idle connections.
func (as *Servers) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		as.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := as.cache.Shutdown(ctx); err != nil {
		return err
	}
	if as.transport != nil {
		as.transport.CloseIdleConnections()
	}
	return nil
}

// Keys is the key source (token.KeySource) of one authorization
// server: the JWK Set named by the jwks_uri of its metadata, held in the
// hub's jwk.Cache.
//
// The cache alone would get stuck after a failed first fetch (it retries
// only at the next scheduled refresh) and refetches on every Refresh call;
// Keys therefore fetches on demand itself, at most once per
// as.every, one fetch at a time, and keeps the last good set when a fetch
// fails.
type Keys struct {
	as      *Servers
	id      string
	metaURL string

	mu       sync.Mutex
	res      *httprc.ResourceBase[jwk.Set] // nil until discovery succeeded
	last     time.Time                     // start of the last on-demand fetch
	inflight chan struct{}                 // closed when the running fetch ends
	lastErr  error
}

// Keys returns the current set, fetching it when there is none yet.
func (r *Keys) Keys(ctx context.Context) (jwk.Set, error) {
	if set := r.current(); set != nil {
		return set, nil
	}
	return r.fetch(ctx)
}

// Refresh fetches the set anew, unless the last fetch is too recent.
func (r *Keys) Refresh(ctx context.Context) (jwk.Set, error) {
	return r.fetch(ctx)
}

func (r *Keys) current() jwk.Set {
	r.mu.Lock()
	res := r.res
	r.mu.Unlock()
	if res == nil {
		return nil
	}
	return res.Resource()
}

// result is the current set, or why there is none.
func (r *Keys) result() (jwk.Set, error) {
	if set := r.current(); set != nil {
		return set, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr != nil {
		return nil, fmt.Errorf("no key set yet: %w", r.lastErr)
	}
	return nil, errors.New("no key set yet")
}

// fetch runs one rate-limited fetch, or waits for the one running, and
// returns the resulting set.
func (r *Keys) fetch(ctx context.Context) (jwk.Set, error) {
	r.mu.Lock()
	if ch := r.inflight; ch != nil {
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return r.result()
	}
	if !r.last.IsZero() && time.Since(r.last) < r.as.every {
		r.mu.Unlock()
		return r.result()
	}
	r.last = time.Now()
	ch := make(chan struct{})
	r.inflight = ch
	r.mu.Unlock()

	// The fetch is shared by every waiting request: it runs under the
	// hub's context, not the caller's.
	fctx, cancel := context.WithTimeout(r.as.ctx, fetchTimeout)
	err := r.sync(fctx)
	cancel()
	if err != nil {
		r.as.log.Warn("mercure: cannot fetch the keys of an authorization server", "issuer", r.id, "error", err)
	}

	r.mu.Lock()
	r.lastErr = err
	r.inflight = nil
	close(ch)
	r.mu.Unlock()
	return r.result()
}

func (r *Keys) sync(ctx context.Context) error {
	r.mu.Lock()
	res := r.res
	r.mu.Unlock()
	if res == nil {
		jwksURL, err := r.discover(ctx)
		if err != nil {
			return err
		}
		registered := time.Now()
		err = r.as.cache.Register(ctx, jwksURL,
			jwk.WithWaitReady(false), // waiting for the first fetch would not end when it fails
			jwk.WithHTTPClient(r.as.client),
			jwk.WithMaxFetchBodySize(maxFetchBytes),
			jwk.WithMinInterval(jwksMinInterval),
			jwk.WithMaxInterval(jwksMaxInterval))
		if err != nil && !errors.Is(err, httprc.ErrResourceAlreadyExists()) { // another issuer shares the set
			return err
		}
		if res, err = r.as.cache.LookupResource(ctx, jwksURL); err != nil {
			return err
		}
		r.mu.Lock()
		r.res = res
		r.mu.Unlock()
		if err == nil {
			// The cache fetches a new resource at once: wait for the end
			// of that attempt instead of asking for a second one.
			return firstFetch(ctx, res, registered)
		}
	}
	// On failure the cache keeps the last good set.
	_, err := r.as.cache.Refresh(ctx, res.URL())
	return err
}

// firstFetch waits for the end of the cache's first fetch of res, which
// was registered at the given time.
func firstFetch(ctx context.Context, res *httprc.ResourceBase[jwk.Set], registered time.Time) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if res.Resource() != nil {
			return nil
		}
		// A finished attempt has scheduled the next one.
		if !res.IsBusy() && res.Next().After(registered) {
			return fmt.Errorf("first fetch of %s failed", res.URL())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// discover fetches the authorization server metadata and returns its
// jwks_uri (RFC 8414).
func (r *Keys) discover(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metaURL, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.as.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("metadata %s: status %d", r.metaURL, resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("metadata %s: %w", r.metaURL, err)
	}
	var md struct {
		Issuer  *string `json:"issuer"`
		JWKSURI *string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &md); err != nil {
		return "", fmt.Errorf("metadata %s: %w", r.metaURL, err)
	}
	// RFC 8414 §3.3: the issuer must be identical to the one the
	// metadata was derived from, else it is not to be used.
	if md.Issuer == nil || *md.Issuer != r.id {
		return "", fmt.Errorf("metadata %s: issuer does not match", r.metaURL)
	}
	if md.JWKSURI == nil {
		return "", fmt.Errorf("metadata %s: no jwks_uri", r.metaURL)
	}
	u, err := url.Parse(*md.JWKSURI)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "" || u.User != nil {
		return "", fmt.Errorf("metadata %s: jwks_uri %q is not an https URL", r.metaURL, *md.JWKSURI)
	}
	return u.String(), nil
}

// fetchClient derives the client of the metadata and JWK Set fetches from
// base (nil for a default one): timeouts, capped bodies, https-only
// redirects and, unless allowPrivate, a dialer that refuses every address
// that is not public (SEC-11). The check runs on the address being
// connected to, after name resolution, so DNS rebinding cannot bypass it;
// for the same reason the guarded client connects directly, never through
// an HTTP proxy.
func fetchClient(base *http.Client, allowPrivate bool) (*http.Client, *http.Transport, error) {
	if base == nil {
		base = &http.Client{}
	}
	var rt http.RoundTripper
	var tr *http.Transport
	switch t := base.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		if !allowPrivate {
			return nil, nil, errors.New("the HTTP client's Transport is not an *http.Transport, so private addresses cannot be refused; add WithPrivateNetworkFetches to use it as it is")
		}
		rt = t
	}
	if tr != nil {
		d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
		if !allowPrivate {
			d.Control = refusePrivate
			tr.Proxy = nil
		}
		tr.DialContext = d.DialContext
		tr.DialTLSContext = nil
		//lint:ignore SA1019 the deprecated hooks must not bypass the guard
		tr.Dial, tr.DialTLS = nil, nil
		tr.TLSHandshakeTimeout = 5 * time.Second
		tr.ResponseHeaderTimeout = fetchTimeout
		tr.MaxResponseHeaderBytes = 64 << 10
		rt = tr
	}
	timeout := base.Timeout
	if timeout <= 0 || timeout > fetchTimeout {
		timeout = fetchTimeout
	}
	c := &http.Client{
		Transport: cappedTransport{rt},
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("too many redirects")
			}
			if req.URL.Scheme != "https" {
				return errors.New("redirect to a non-https URL")
			}
			return nil
		},
	}
	return c, tr, nil
}

// refusePrivate is the dialer's Control function: it refuses addresses
// that are not public.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("mercure: refusing to connect to %q: %v", address, err)
	}
	if !publicAddr(ap.Addr()) {
		return fmt.Errorf("mercure: refusing to connect to non-public address %s (see WithPrivateNetworkFetches)", ap.Addr())
	}
	return nil
}

// nonPublic lists the special-purpose ranges that the netip predicates
// do not cover.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64, may embed any IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"), // 6to4, may embed any IPv4 address
	netip.MustParsePrefix("::/96"),     // IPv4-compatible (deprecated)
	netip.MustParsePrefix("fec0::/10"), // site-local (deprecated)
}

// publicAddr reports whether a is a global unicast address outside every
// private or special-purpose range.
func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// cappedTransport fails the reading of a response body longer than
// maxFetchBytes.
type cappedTransport struct{ rt http.RoundTripper }

func (c cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxFetchBytes + 1}
	return resp, nil
}

type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

var errBodyTooLarge = fmt.Errorf("mercure: fetched document exceeds %d bytes", maxFetchBytes)

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n, errBodyTooLarge
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
