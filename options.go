package mercure

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"go.opentelemetry.io/otel/trace"

	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/store"
)

// An Option configures a [Hub]. Options validate their arguments: a bad
// value makes [New] return an error, never panic.
type Option func(*config) error

// DefaultHubPath is the path of a hub URL given to [New] without one.
const DefaultHubPath = "/.well-known/mercure"

type config struct {
	url              *url.URL
	logger           *slog.Logger
	store            store.Store
	limits           Limits
	clientKey        func(*http.Request) string
	clientKeySet     bool // WithClientKey: the hub tells clients apart
	insecurePublish  bool
	issuers          []Issuer
	anonymous        bool
	cookieName       string
	corsOrigins      []string
	proxyPaths       []string // see WithProxyPath, escaped
	tokenPolicy      TokenPolicy
	httpClient       *http.Client
	privateFetches   bool
	keyRefreshLimit  time.Duration // tests only; see authserver.DefaultRefreshLimit
	interestLinger   time.Duration // tests only; 0 means engine.DefaultInterestLinger
	subscriptions    bool
	goroutineStreams bool // see WithGoroutineStreams
	noPoller         bool // tests: see WithoutPoller
	// stallGrace, for tests, is how long a stream's connection may take
	// nothing before the stream counts as stalled (see WithStallGrace); 0
	// for a quarter of Limits.WriteTimeout.
	stallGrace     time.Duration
	tracerProvider trace.TracerProvider
	authorizer     Authorizer     // see WithAuthorizer
	recheck        time.Duration  // with authorizer: the re-check interval
	debugger       bool           // see WithDebugger
	playground     *Signer        // see WithInsecurePlayground; nil without
	legacy         *LegacyClients // see WithLegacyClients
}

func defaultConfig() config {
	return config{
		logger:           slog.Default(),
		clientKey:        remoteIP,
		cookieName:       DefaultCookieName,
		goroutineStreams: goroutineStreamsByDefault,
	}
}

// DefaultCookieName is the cookie that may carry a subscriber's access
// token (spec §Authorization: Cookie), unless [WithCookieName] says
// otherwise.
const DefaultCookieName = "__Secure-mercure_access_token"

// Issuer is a trusted token issuer: an authorization server or the
// application itself (a self-issuer; spec §Authorization). Its id must equal
// the tokens' iss. Publisher tokens are verified with PublisherKeys only,
// subscriber tokens with SubscriberKeys only (spec §Authorization: Token
// Validation); either may be nil when the issuer mints no token of that
// kind. [Keys] builds a set from PEM, crypto public keys or an HMAC
// secret; a set holding a private key is refused (see [Keys] for why).
type Issuer struct {
	ID             string
	PublisherKeys  jwk.Set
	SubscriberKeys jwk.Set
	// AuthorizationServer says that the issuer is an OAuth 2.0
	// authorization server (spec §Authorization: Token Validation): its
	// keys come from the JWK Set of its RFC 8414 metadata, fetched over
	// HTTPS in the background and kept fresh (until they arrive, its
	// tokens are refused); its tokens serve publishers and subscribers;
	// the hub names it in its own metadata. ID must be an https URL
	// without query or fragment, and the keys nil. See [WithHTTPClient],
	// [WithPrivateNetworkFetches] and docs/auth.md.
	AuthorizationServer bool
}

// WithIssuer trusts an issuer of access tokens; repeat it for several. With
// at least one issuer the hub validates tokens, and subscribers need one
// (or, with [WithAuthorizer], a session) unless [WithAnonymousSubscribers]
// is given.
func WithIssuer(iss Issuer) Option {
	return func(c *config) error {
		if iss.ID == "" {
			return fmt.Errorf("%w: issuer without an id", ErrInvalidOption)
		}
		if iss.AuthorizationServer {
			if iss.PublisherKeys != nil || iss.SubscriberKeys != nil {
				return fmt.Errorf("%w: authorization server %q has static keys", ErrInvalidOption, iss.ID)
			}
			if _, err := asMetadataURL(iss.ID); err != nil {
				return fmt.Errorf("%w: authorization server %q: %v", ErrInvalidOption, iss.ID, err)
			}
			c.issuers = append(c.issuers, iss)
			return nil
		}
		if iss.PublisherKeys == nil && iss.SubscriberKeys == nil {
			return fmt.Errorf("%w: issuer %q has no keys", ErrInvalidOption, iss.ID)
		}
		for _, set := range []jwk.Set{iss.PublisherKeys, iss.SubscriberKeys} {
			if err := checkIssuerKeys(set); err != nil {
				return fmt.Errorf("%w: issuer %q: %w", ErrInvalidOption, iss.ID, err)
			}
		}
		c.issuers = append(c.issuers, iss)
		return nil
	}
}

// WithHTTPClient sets the client that fetches the metadata and JWK Sets of
// authorization servers (see [Issuer].AuthorizationServer); by default
// the hub uses its own. The hub uses a copy: it keeps the client's
// transport settings (TLS configuration included) but sets its own
// timeouts (10 s at most), caps bodies at 1 MiB, follows only https
// redirects and, unless [WithPrivateNetworkFetches] is given, replaces the
// dialer with one that refuses non-public addresses and ignores any proxy.
// That needs a Transport of type *http.Transport (or nil).
func WithHTTPClient(client *http.Client) Option {
	return func(c *config) error {
		if client == nil {
			return fmt.Errorf("%w: nil HTTP client", ErrInvalidOption)
		}
		c.httpClient = client
		return nil
	}
}

// WithPrivateNetworkFetches lets the hub fetch authorization server
// metadata and JWK Sets from loopback, private, link-local and other
// non-public addresses. By default it refuses to connect to them, so that
// a hostile or misconfigured metadata document cannot make it probe the
// internal network (spec §Security Considerations: Protected Resource
// Metadata and Authorization Server Selection).
func WithPrivateNetworkFetches() Option {
	return func(c *config) error {
		c.privateFetches = true
		return nil
	}
}

// TokenPolicy tunes access-token validation. Zero fields keep the
// defaults given in their comments.
type TokenPolicy struct {
	// Algorithms is the allowlist of JWS algorithms (spec §Authorization:
	// Token Validation). Default: EdDSA, ES256, ES384, ES512, RS256, PS256,
	// and HS256/384/512 for issuers whose keys are HMAC secrets. "none" is
	// never accepted.
	Algorithms []string
	// Leeway is the clock skew allowed on exp, nbf and iat. Default 5 s.
	Leeway time.Duration
	// MaxTokenBytes, MaxDetails, MaxTopics and MaxMatchBytes cap a token,
	// its Mercure authorization details, the topics of one detail and the
	// length of one matcher; a token over a cap is invalid (spec
	// §Authorization: Authorization Details). Defaults 8 KiB, 32, 64 and
	// 2 KiB.
	MaxTokenBytes, MaxDetails, MaxTopics, MaxMatchBytes int
	// CacheSize bounds how many verified tokens the hub remembers, so that
	// a publisher sending the same token again and again, or a crowd of
	// subscribers reconnecting, has its signature checked once. A token
	// remembered is checked again for exp, nbf and iat, and verified anew
	// when its issuer's fetched key set changed. Default 4096; negative
	// remembers none.
	CacheSize int
}

// WithTokenPolicy sets how access tokens are validated.
func WithTokenPolicy(p TokenPolicy) Option {
	return func(c *config) error {
		for _, a := range p.Algorithms {
			if _, ok := jwa.LookupSignatureAlgorithm(a); !ok || strings.EqualFold(a, "none") {
				return fmt.Errorf("%w: signature algorithm %q", ErrInvalidOption, a)
			}
		}
		if p.Leeway < 0 || p.MaxTokenBytes < 0 || p.MaxDetails < 0 || p.MaxTopics < 0 || p.MaxMatchBytes < 0 {
			return fmt.Errorf("%w: negative value in TokenPolicy", ErrInvalidOption)
		}
		c.tokenPolicy = p
		return nil
	}
}

// WithAnonymousSubscribers lets clients without a token (or, with
// [WithAuthorizer], without a session) subscribe; they receive public
// updates only (spec §Authorization). A hub without any [WithIssuer] or
// [WithAuthorizer] always accepts them, since it has no way to tell
// clients apart.
func WithAnonymousSubscribers() Option {
	return func(c *config) error {
		c.anonymous = true
		return nil
	}
}

// WithCORS lets browser pages on these origins (such as
// "https://app.example.com") subscribe and publish with credentials
// (cookies, Authorization): the hub answers their preflights and names
// them in Access-Control-Allow-Origin, never "*" and never an origin not
// listed (spec §Subscription). Link and Mercure-Last-Event-ID are exposed to
// them. Cookie-authenticated publishes are accepted from these origins
// as from the hub's own (spec §Security Considerations).
func WithCORS(origins ...string) Option {
	return func(c *config) error {
		for _, o := range origins {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
				strings.Contains(o, "*") || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return fmt.Errorf("%w: CORS origin %q is not scheme://host[:port]", ErrInvalidOption, o)
			}
			c.corsOrigins = append(c.corsOrigins, origin(u))
		}
		return nil
	}
}

// WithProxyPath declares path, an absolute escaped path, as the one at
// which requests reach the hub, in place of the hub path: the path a
// reverse proxy in front rewrites the hub path into (stripping a prefix,
// or adding one). [Hub.Mount] registers the hub's routes there, and
// [Hub.ServeHTTP] serves them right after it and nowhere else; a proxy
// that adds a prefix is assumed to add it to [Hub.MetadataPath] too.
// Repeat it for several paths (the hub path among them, when requests
// also reach the hub unproxied).
func WithProxyPath(path string) Option {
	return func(c *config) error {
		if _, err := url.ParseRequestURI(path); err != nil || path[0] != '/' || (path != "/" && strings.HasSuffix(path, "/")) || strings.ContainsAny(path, "?#") {
			return fmt.Errorf("%w: proxy path %q is not an absolute path without a trailing slash", ErrInvalidOption, path)
		}
		c.proxyPaths = append(c.proxyPaths, path)
		return nil
	}
}

// WithSubscriptions turns on active subscriptions (spec §Active
// Subscriptions): the hub publishes a private update when each
// subscription starts and ends, serves the subscriptions web API under its
// path, and [Hub.Subscriptions] lists the active ones.
func WithSubscriptions() Option {
	return func(c *config) error {
		c.subscriptions = true
		return nil
	}
}

// WithCookieName sets the cookie that may carry a subscriber's token when
// no Authorization header is sent (spec §Authorization: Cookie); the default
// is [DefaultCookieName].
func WithCookieName(name string) Option {
	return func(c *config) error {
		if name == "" || !validCookieName(name) {
			return fmt.Errorf("%w: cookie name %q", ErrInvalidOption, name)
		}
		c.cookieName = name
		return nil
	}
}

// validCookieName accepts an RFC 6265 token.
func validCookieName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7F || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return false
		}
	}
	return true
}

// WithLogger sets the logger; by default the hub logs to [slog.Default]
// as it is when [New] is called. WithLogger(nil) discards the hub's logs.
// The hub never logs tokens, cookies, Authorization headers (spec §Security
// Considerations) or the data of updates.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.logger = l
		return nil
	}
}

// WithStore sets the store that keeps history and feeds updates to the hub
// (and to every other hub sharing it): memstore's with other settings,
// boltstore's on disk, redisstore's or pgstore's shared by several
// instances. The caller owns the store: [Hub.Shutdown] stops listening to
// it but does not close it. By default each hub has its own in-memory
// store with memstore's defaults (the latest 1 000 updates, 64 MiB at
// most).
func WithStore(s store.Store) Option {
	return func(c *config) error {
		if s == nil {
			return fmt.Errorf("%w: nil store", ErrInvalidOption)
		}
		c.store = s
		return nil
	}
}

// WithLimits sets the limits that l's non-zero fields set (spec §Security
// Considerations: Resource Limits); a negative one is an error. Repeated,
// the later fields win; the fields set by none keep their default.
func WithLimits(l Limits) Option {
	return func(c *config) error { return c.limits.merge(l) }
}

// WithClientKey sets how the hub tells clients apart for
// [Limits.MaxConnectionsPerClient] and
// [Limits.MaxAnonymousConnectionsPerClient]. By default it uses the
// request's remote IP address; behind a reverse proxy, derive the key from
// a header the proxy sets and the client cannot forge. Giving it also says
// the keys tell clients apart: anonymous clients then get a per-client
// share by default (see [Limits.MaxAnonymousConnectionsPerClient]).
func WithClientKey(key func(*http.Request) string) Option {
	return func(c *config) error {
		if key == nil {
			return fmt.Errorf("%w: nil client key function", ErrInvalidOption)
		}
		c.clientKey = key
		c.clientKeySet = true
		return nil
	}
}

// WithInsecurePublishing lets anyone who can reach the hub publish over
// HTTP without an access token (spec §Authorization).
//
// DANGER: use it only on a closed network that no untrusted client can
// reach; anyone else can then publish anything, private updates included.
// Publishing from Go code with [Hub.Publish] never needs this option.
func WithInsecurePublishing() Option {
	return func(c *config) error {
		c.insecurePublish = true
		return nil
	}
}

// Limits bounds the resources a client can make the hub spend (spec
// §Security Considerations: Resource Limits). A zero field means the default
// given in its comment.
type Limits struct {
	// MaxBodyBytes caps a publish body and a QUERY subscribe body;
	// larger ones get 413. Default 1 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds how long a publish body or a QUERY subscribe
	// body may take to arrive, counted from when the hub starts handling
	// the request. A body still incomplete then gets 408, and its
	// connection is closed (over HTTP/2, its stream is reset), so that
	// clients that never finish a body cannot pile up connections, even
	// on a server without a ReadTimeout (an [http.Server] has none by
	// default). While the body is read this deadline replaces the
	// server's ReadTimeout; it is lifted once the body is in, so it never
	// cuts the stream that follows. It needs a ResponseWriter that can set
	// read deadlines (see [http.ResponseController]); the hub logs a
	// warning otherwise. Default 10 s.
	BodyTimeout time.Duration
	// MaxTopics caps the topics of one HTTP publish; more get 413. Default 64.
	MaxTopics int
	// MaxFieldBytes caps the length of each published topic, id, type and
	// retry; longer ones get 413. The data field is capped only by
	// MaxBodyBytes. Default 2 KiB; topics are never longer than
	// 2 KiB whatever this says.
	MaxFieldBytes int
	// MaxMatchers caps the matchers of one subscribe request; more get 400
	// (spec §Subscription). Default 64.
	MaxMatchers int
	// MaxMatcherBytes caps the length of each matcher; longer ones get 400.
	// Default 2 KiB.
	MaxMatcherBytes int
	// MaxConnections caps the streams open at once across all clients;
	// more get 429 (spec §Subscription). Default 10 000.
	MaxConnections int
	// MaxConnectionsPerClient caps the streams one client (see
	// [WithClientKey]) holds at once; more get 429. Default: no limit,
	// because behind a proxy every client has the proxy's address.
	MaxConnectionsPerClient int
	// MaxAnonymousConnections caps the anonymous streams (those that
	// present no token and no session) open at once; more get 429. Within
	// the other budgets too, anonymous clients have a share of their own:
	// their new URL patterns must leave half of MaxPatternsPerPrefix,
	// MaxPatternsPerTopic and MaxTotalPatternSize free, and past
	// MaxQueuedBytes their streams that stopped reading go first. So they
	// can never take what token and session holders need. This applies to
	// a hub where a token or a session can authorize subscribers ([Issuer],
	// [WithAuthorizer]); on a hub where none can, every stream is
	// anonymous and has the whole budgets. Default: nine tenths of
	// MaxConnections (all but one of a hub of one), the rest kept for
	// token and session holders; New logs the share at Info.
	MaxAnonymousConnections int
	// MaxAnonymousConnectionsPerClient caps the anonymous streams one
	// client (see [WithClientKey]) holds at once, within
	// MaxAnonymousConnections, so that one address cannot take the whole
	// anonymous share; more get 429. Like MaxAnonymousConnections it
	// applies on a hub where a token or a session can authorize
	// subscribers. Default: a tenth of MaxAnonymousConnections when the
	// hub has [WithClientKey] (it then knows its clients apart), no limit
	// otherwise (behind a proxy every client has the proxy's address).
	MaxAnonymousConnectionsPerClient int
	// MaxPatternsPerPrefix caps the distinct URL patterns that share a
	// literal prefix: the scheme, host and leading path segments written
	// without pattern syntax. The hub indexes patterns by that prefix and
	// evaluates, for each update topic, only those whose prefix the topic
	// has; patterns with a short prefix (*://*/x/:id, https://*.example.com/:id,
	// https://example.com/:a/:b) are evaluated for many topics, so this
	// bounds the cost of every publish. Subscribers sharing a pattern count
	// it once. A stream that would exceed it gets 429. Default 64.
	MaxPatternsPerPrefix int
	// MaxPatternsPerTopic caps the distinct URL patterns that one update
	// topic can be evaluated against: those of every literal prefix the
	// topic has (*://*/…, https://example.com/…,
	// https://example.com/books/…, and so on), however the subscribers
	// spread their patterns over prefixes. With the per-pattern limits of
	// Patterns and AnonymousPatterns, it bounds what every publish costs.
	// A stream that would exceed it gets 429. Default 128.
	MaxPatternsPerTopic int
	// Patterns bounds the URL patterns of streams that present a token,
	// and the URL pattern grants of tokens (a token over them is
	// invalid); AnonymousPatterns bounds those of anonymous streams,
	// which anyone can open. See [PatternLimits].
	Patterns, AnonymousPatterns PatternLimits
	// QueueEvents and QueueBytes bound the updates waiting to be written
	// to one subscriber whose own connection holds them back. A subscriber
	// this far behind is disconnected once its connection has taken
	// nothing of what it was sent for a quarter of WriteTimeout (it
	// stopped reading), or has not taken a queue's worth within
	// WriteTimeout (it reads too slowly for the hub's traffic), so that it
	// never slows the hub or other subscribers for longer; it resumes from
	// history with Last-Event-ID. A subscriber behind only because the
	// hub's writers have not reached it yet (a burst that they spread over
	// many streams), or whose connection takes what it is sent, keeps its
	// updates past the bound: MaxQueuedBytes bounds them all. A stream
	// whose queue fills before its headers are sent is refused for now
	// (503 with Retry-After), and one still replaying history is
	// disconnected at the bound. Defaults 1024 events and 8 MiB, or
	// MaxBodyBytes if more: an empty queue takes any event.
	QueueEvents int
	QueueBytes  int
	// MaxQueuedBytes caps the bytes waiting in all the streams' queues
	// together, counted as the memory they take: an update's bytes once,
	// however many queues hold it, and a few words per queue. Past it,
	// this hub's publishers wait for room (see MaxPendingUpdates), the hub
	// hands no more updates to the streams until their writers have made
	// room, and the streams whose connections took nothing for a quarter
	// of WriteTimeout (or, past their own queue's bound, not a queue's
	// worth within WriteTimeout) are disconnected, anonymous ones first,
	// those that hold the most first; the others are never disconnected
	// for it.
	// Default 128 MiB, or QueueBytes if more.
	MaxQueuedBytes int64
	// MaxTotalPatternSize caps the estimated size (see
	// [PatternLimits].MaxSize) of all the distinct URL patterns of the
	// open streams together, and so the heap that they keep; a stream
	// that would exceed it gets 429. Default 4 Mi instructions (about
	// 200 MB at most; short per-user patterns such as
	// "https://example.com/users/42/{*}" keep about 0.5 KB each).
	MaxTotalPatternSize int
	// MaxReplays caps the replays of history (streams that resume with
	// Last-Event-ID) that run at once. A stream waits up to 5 s for its
	// turn, then gets 503. Default 64.
	MaxReplays int
	// ReplayTimeout bounds how long one replay may take, slow client
	// included: a stream whose replay is not over by then ends, and its
	// client resumes from the last event it received. Default 30 s.
	ReplayTimeout time.Duration
	// MaxPendingUpdates bounds the updates recorded but not yet handed
	// to the streams. Publishing does not wait for the fan-out: it
	// records the update and answers, and the hub delivers it meanwhile.
	// Only a hub that receives updates faster than it can deliver them
	// builds a backlog; past this many updates, or past half of
	// MaxQueuedBytes of them, or while the streams' queues hold more
	// than MaxQueuedBytes, [Hub.Publish] (and so a POST) waits for room,
	// as long as its context allows. Updates from other hubs sharing the store are
	// never held back. Default 1024.
	MaxPendingUpdates int

	// KeepAlive is how long a stream may stay silent before the hub
	// writes an SSE comment to it, so that proxies and clients do not
	// time it out (spec §Subscription). Default 15 s.
	KeepAlive time.Duration
	// WriteTimeout bounds each write to a stream, so that a client that
	// stopped reading cannot hold one: it replaces the server's
	// WriteTimeout, which the hub clears on streams. Default 15 s.
	WriteTimeout time.Duration
	// WriteDelay spaces each stream's writes at least this far apart:
	// updates arriving sooner go out together in one write, trading up to
	// WriteDelay of latency for fewer system calls under heavy fan-out;
	// an update after a quiet period is written at once. At most 1 s.
	// Default 0: every update is written as it comes.
	WriteDelay time.Duration
	// StreamLifetime ends every stream after this long, token or not, so
	// that clients reconnect and present their credentials again (spec
	// §Authorization: Subscribers); they resume with Last-Event-ID and
	// miss nothing. Default 0: a stream lasts until its token expires,
	// its session ends ([WithAuthorizer]), or forever.
	StreamLifetime time.Duration
	// Drain makes [Hub.Shutdown] end the streams gradually over this
	// long rather than at once, so that their clients reconnect
	// elsewhere (in a rolling deploy) spread over it: each stream, at its
	// turn, gets a retry of about a second and a clean end. Meanwhile the
	// hub delivers as usual, a new subscribe request gets a stream that
	// only says to retry, and [Hub.Live] and [Hub.Ready] report
	// [ErrHubClosed]. Shutdown's context compresses it. Default 0: every
	// stream ends at once.
	Drain time.Duration
}

// PatternLimits bounds what URL patterns can cost the hub (spec §Matcher
// Types: URL Pattern). The engine compiles each pattern into regular
// expressions: their size bounds the heap a compiled pattern keeps and the
// time an evaluation takes, and their groups multiply that time (each
// evaluation extracts every group). The hub estimates both from a pattern's
// source and refuses a pattern over a limit (400, or an invalid token for a
// grant) before compiling it. A zero field means the default given in its
// comment, for streams with a token and for anonymous streams.
type PatternLimits struct {
	// MaxGroups caps the groups of one pattern: each *, :name and
	// (regexp), counted as written. Default 32; anonymous 8.
	MaxGroups int
	// MaxSize caps the estimated compiled size of one pattern, in regular
	// expression instructions: three per byte of literal text, eight per
	// group, and custom regular expressions with their repetitions
	// expanded (twice when a modifier repeats them). A compiled pattern
	// keeps up to about 50 bytes of heap per instruction, and evaluating
	// it costs up to about a nanosecond per instruction and byte of
	// topic. Default 4096; anonymous 512.
	MaxSize int
	// MaxStreamSize caps the sum of the sizes of the URL patterns of one
	// stream, and so the heap one request can make the hub keep. It does
	// not apply to the grants of a token, which its issuer vouches for.
	// Default 32768; anonymous 4096.
	MaxStreamSize int
	// MaxSizePerTopic caps the sum of the sizes of the distinct URL
	// patterns, every stream's together, that one update topic can be
	// evaluated against: what each topic of every publish may cost (a
	// nanosecond or two per instruction and byte of topic, for a
	// pattern whose literal text the topic passes). The hub offers a
	// topic only the patterns of the literal prefixes it has, and of
	// those whose literal text fixes the last path segment (.../x42, or
	// a URI template's), only the ones of its own: the cap counts them
	// so, along each chain of prefixes. A stream of this class whose new
	// pattern would take a topic past it gets 429; a pattern already
	// registered is shared at no cost. Default 65536; anonymous 8192
	// (about sixty typical patterns for the same topics; 64 patterns
	// ending each with its own literal segment count as one), so that
	// anonymous clients, whoever they are, add a bounded cost to every
	// publish.
	MaxSizePerTopic int
}

// limit is the cost bound of one pattern.
func (l *PatternLimits) limit() index.Limit {
	return index.Limit{Groups: l.MaxGroups, Size: l.MaxSize}
}

var defaultLimits = Limits{
	MaxBodyBytes:            1 << 20,
	BodyTimeout:             10 * time.Second,
	MaxTopics:               64,
	MaxFieldBytes:           2 << 10,
	MaxMatchers:             64,
	MaxMatcherBytes:         2 << 10,
	MaxPatternsPerPrefix:    64,
	MaxPatternsPerTopic:     128,
	Patterns:                PatternLimits{MaxGroups: 32, MaxSize: 4096, MaxStreamSize: 32768, MaxSizePerTopic: 65536},
	AnonymousPatterns:       PatternLimits{MaxGroups: 8, MaxSize: 512, MaxStreamSize: 4096, MaxSizePerTopic: 8192},
	QueueEvents:             1024,
	QueueBytes:              8 << 20,
	MaxConnections:          10_000,
	MaxAnonymousConnections: 9_000,
	MaxQueuedBytes:          128 << 20,
	MaxTotalPatternSize:     4 << 20,
	MaxReplays:              64,
	ReplayTimeout:           30 * time.Second,
	MaxPendingUpdates:       1024,
	KeepAlive:               15 * time.Second,
	WriteTimeout:            15 * time.Second,
}

// limitFields lists the fields of [Limits], for the options' checks and
// merges: a zero field is unset, a negative one an error.
var limitFields = []limitAccess{
	limitField("MaxBodyBytes", func(l *Limits) *int64 { return &l.MaxBodyBytes }),
	limitField("BodyTimeout", func(l *Limits) *time.Duration { return &l.BodyTimeout }),
	limitField("MaxTopics", func(l *Limits) *int { return &l.MaxTopics }),
	limitField("MaxFieldBytes", func(l *Limits) *int { return &l.MaxFieldBytes }),
	limitField("MaxMatchers", func(l *Limits) *int { return &l.MaxMatchers }),
	limitField("MaxMatcherBytes", func(l *Limits) *int { return &l.MaxMatcherBytes }),
	limitField("MaxConnections", func(l *Limits) *int { return &l.MaxConnections }),
	limitField("MaxConnectionsPerClient", func(l *Limits) *int { return &l.MaxConnectionsPerClient }),
	limitField("MaxAnonymousConnections", func(l *Limits) *int { return &l.MaxAnonymousConnections }),
	limitField("MaxAnonymousConnectionsPerClient", func(l *Limits) *int { return &l.MaxAnonymousConnectionsPerClient }),
	limitField("MaxPatternsPerPrefix", func(l *Limits) *int { return &l.MaxPatternsPerPrefix }),
	limitField("MaxPatternsPerTopic", func(l *Limits) *int { return &l.MaxPatternsPerTopic }),
	limitField("Patterns.MaxGroups", func(l *Limits) *int { return &l.Patterns.MaxGroups }),
	limitField("Patterns.MaxSize", func(l *Limits) *int { return &l.Patterns.MaxSize }),
	limitField("Patterns.MaxStreamSize", func(l *Limits) *int { return &l.Patterns.MaxStreamSize }),
	limitField("Patterns.MaxSizePerTopic", func(l *Limits) *int { return &l.Patterns.MaxSizePerTopic }),
	limitField("AnonymousPatterns.MaxGroups", func(l *Limits) *int { return &l.AnonymousPatterns.MaxGroups }),
	limitField("AnonymousPatterns.MaxSize", func(l *Limits) *int { return &l.AnonymousPatterns.MaxSize }),
	limitField("AnonymousPatterns.MaxStreamSize", func(l *Limits) *int { return &l.AnonymousPatterns.MaxStreamSize }),
	limitField("AnonymousPatterns.MaxSizePerTopic", func(l *Limits) *int { return &l.AnonymousPatterns.MaxSizePerTopic }),
	limitField("QueueEvents", func(l *Limits) *int { return &l.QueueEvents }),
	limitField("QueueBytes", func(l *Limits) *int { return &l.QueueBytes }),
	limitField("MaxQueuedBytes", func(l *Limits) *int64 { return &l.MaxQueuedBytes }),
	limitField("MaxTotalPatternSize", func(l *Limits) *int { return &l.MaxTotalPatternSize }),
	limitField("MaxReplays", func(l *Limits) *int { return &l.MaxReplays }),
	limitField("ReplayTimeout", func(l *Limits) *time.Duration { return &l.ReplayTimeout }),
	limitField("MaxPendingUpdates", func(l *Limits) *int { return &l.MaxPendingUpdates }),
	limitField("KeepAlive", func(l *Limits) *time.Duration { return &l.KeepAlive }),
	limitField("WriteTimeout", func(l *Limits) *time.Duration { return &l.WriteTimeout }),
	limitField("WriteDelay", func(l *Limits) *time.Duration { return &l.WriteDelay }),
	limitField("StreamLifetime", func(l *Limits) *time.Duration { return &l.StreamLifetime }),
	limitField("Drain", func(l *Limits) *time.Duration { return &l.Drain }),
}

// limitAccess reads and writes one field of [Limits] as an int64.
type limitAccess struct {
	name string
	get  func(*Limits) int64
	set  func(*Limits, int64)
}

func limitField[T int | int64 | time.Duration](name string, field func(*Limits) *T) limitAccess {
	return limitAccess{name,
		func(l *Limits) int64 { return int64(*field(l)) },
		func(l *Limits, v int64) { *field(l) = T(v) }}
}

// merge sets on l the fields that o sets, refusing negative ones.
func (l *Limits) merge(o Limits) error {
	for _, f := range limitFields {
		switch v := f.get(&o); {
		case v < 0:
			return fmt.Errorf("%w: Limits.%s is negative", ErrInvalidOption, f.name)
		case v > 0:
			f.set(l, v)
		}
	}
	return nil
}

// defaultAnonymous is the default of [Limits.MaxAnonymousConnections]
// for a hub of maxConnections: all but a tenth, kept for token and
// session holders. Half, the default until issue 41, refused the 5 001st
// subscriber of a public hub (the live-score case: anonymous readers, a
// token for the publishers) with 10 000 connections to give.
func defaultAnonymous(maxConnections int) int {
	return max(1, maxConnections-max(1, maxConnections/10))
}

// resolve returns the limits in effect: those l sets, the defaults for
// the others, and the defaults that follow others for those left unset.
func (l Limits) resolve() Limits {
	d := defaultLimits
	for _, f := range limitFields {
		if v := f.get(&l); v > 0 {
			f.set(&d, v)
		}
	}
	if l.MaxAnonymousConnections == 0 {
		d.MaxAnonymousConnections = defaultAnonymous(d.MaxConnections)
	}
	if l.QueueBytes == 0 {
		d.QueueBytes = max(d.QueueBytes, int(min(d.MaxBodyBytes, math.MaxInt)))
	}
	if l.MaxQueuedBytes == 0 {
		d.MaxQueuedBytes = max(d.MaxQueuedBytes, int64(d.QueueBytes))
	}
	return d
}

// check validates the limits against each other, once every option is
// applied.
func (l *Limits) check() error {
	switch {
	case l.QueueBytes < int(min(l.MaxBodyBytes, math.MaxInt)):
		return fmt.Errorf("%w: Limits.QueueBytes (%d) is less than MaxBodyBytes (%d): a stream's queue could not hold one update", ErrInvalidOption, l.QueueBytes, l.MaxBodyBytes)
	case l.MaxQueuedBytes < int64(l.QueueBytes):
		return fmt.Errorf("%w: Limits.MaxQueuedBytes (%d) is less than QueueBytes (%d)", ErrInvalidOption, l.MaxQueuedBytes, l.QueueBytes)
	case l.Patterns.MaxSize > l.Patterns.MaxStreamSize:
		return fmt.Errorf("%w: Limits.Patterns.MaxSize (%d) is more than MaxStreamSize (%d)", ErrInvalidOption, l.Patterns.MaxSize, l.Patterns.MaxStreamSize)
	case l.WriteDelay > time.Second:
		return fmt.Errorf("%w: Limits.WriteDelay (%v) is more than 1s", ErrInvalidOption, l.WriteDelay)
	case l.AnonymousPatterns.MaxSize > l.AnonymousPatterns.MaxStreamSize:
		return fmt.Errorf("%w: Limits.AnonymousPatterns.MaxSize (%d) is more than MaxStreamSize (%d)", ErrInvalidOption, l.AnonymousPatterns.MaxSize, l.AnonymousPatterns.MaxStreamSize)
	case l.Patterns.MaxSize > l.Patterns.MaxSizePerTopic:
		return fmt.Errorf("%w: Limits.Patterns.MaxSize (%d) is more than MaxSizePerTopic (%d): no pattern of that size could be registered", ErrInvalidOption, l.Patterns.MaxSize, l.Patterns.MaxSizePerTopic)
	case l.AnonymousPatterns.MaxSize > l.AnonymousPatterns.MaxSizePerTopic:
		return fmt.Errorf("%w: Limits.AnonymousPatterns.MaxSize (%d) is more than MaxSizePerTopic (%d): no pattern of that size could be registered", ErrInvalidOption, l.AnonymousPatterns.MaxSize, l.AnonymousPatterns.MaxSizePerTopic)
	}
	return nil
}

// remoteIP is the default client key: the host part of RemoteAddr.
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
