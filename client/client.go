package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mercurekit/mercure/internal/uritemplate"
)

// Earliest is the cursor that asks for the hub's whole retained history.
const Earliest = "earliest"

// Defaults of [Client]'s zero fields.
const (
	DefaultReconnectDelay    = time.Second
	DefaultMaxReconnectDelay = 30 * time.Second
	DefaultMinReconnectDelay = 250 * time.Millisecond
	DefaultMaxHubDelay       = 5 * time.Minute
	DefaultHeaderTimeout     = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxEventBytes     = 16 << 20
)

// maxURLBytes is the longest subscribe URL sent with GET; longer matcher
// lists go in the body of a QUERY request. 8 KiB is the request-line limit
// of common servers and proxies.
const maxURLBytes = 8000

// Client talks to Mercure hubs: it subscribes, publishes and discovers.
// The zero value is ready to use; a Client is safe for concurrent use as
// long as its fields are not changed.
type Client struct {
	// HTTPClient sends the requests; nil means http.DefaultClient. Set
	// its Jar for hubs that take the token from a cookie (subscriptions
	// say Sec-Fetch-Site: none, as a browser does for a page the user
	// opened: no site started them). Its
	// CheckRedirect runs after the client's own redirect policy (see
	// [Client.Token]). Leave its Timeout zero: it would cut streams;
	// HeaderTimeout and IdleTimeout bound them instead.
	HTTPClient *http.Client

	// Token, when not nil, is called before every connection and every
	// publication, reconnections included, for the bearer token to send:
	// a long-lived subscriber thus renews a short-lived token. Return ""
	// to send none. An error is retried like a network error by
	// subscriptions, and returned by Publish.
	//
	// The token goes in the Authorization header of the request to the
	// URL given, and of the redirects it follows within that URL's
	// origin (scheme, host and port); from the first hop to another
	// origin on, the header is dropped, and a redirect from https to
	// http is refused with [ErrInsecureRedirect]. A token that an
	// HTTPClient's Transport adds itself (golang.org/x/oauth2's, say) is
	// beyond this policy: it goes wherever the Transport sends requests.
	Token func(ctx context.Context) (string, error)

	// ReconnectDelay is the delay before the first reconnection after a
	// stream that delivered events; it doubles after each attempt that
	// delivered none, up to MaxReconnectDelay, and random jitter adds up
	// to half of it. The hub's retry field replaces it, as EventSource
	// does. Zero means DefaultReconnectDelay.
	ReconnectDelay time.Duration
	// MaxReconnectDelay caps the doubling; zero means
	// DefaultMaxReconnectDelay. A longer retry field or Retry-After is
	// honoured, up to MaxHubDelay.
	MaxReconnectDelay time.Duration
	// MinReconnectDelay is the shortest wait before a reconnection,
	// whatever the hub's retry field says (retry: 0 included); zero
	// means DefaultMinReconnectDelay, and less than a millisecond is
	// taken as one. With the doubling, a hub that keeps ending streams
	// at once gets fewer and fewer connections, and one that sends an
	// event per stream at most one per MinReconnectDelay.
	MinReconnectDelay time.Duration
	// MaxHubDelay caps the delays the hub asks for, with its retry field
	// or Retry-After, jitter included (it then spreads the clients below
	// the cap, down to three quarters of it): a hub cannot park a
	// subscriber for days. Zero means DefaultMaxHubDelay. A hub still
	// answering 503 when it has passed is asked again.
	MaxHubDelay time.Duration

	// HeaderTimeout bounds the wait for the response headers of every
	// request: a server that accepts and never answers. Zero means
	// DefaultHeaderTimeout; negative means none.
	HeaderTimeout time.Duration
	// IdleTimeout is how long a response may stay silent before the
	// client drops it, with [ErrTimeout]: a subscription then reconnects
	// and resumes after its last event. Hubs write a keep-alive comment
	// on a stream that nothing else was written to for a while (this
	// module's hub every 15 s, the reference hub every 40 s by default),
	// so a silent stream is one whose peer or path is gone; keep
	// IdleTimeout above a few of the hub's intervals. Zero means
	// DefaultIdleTimeout; negative means none, for hubs that send no
	// keep-alives.
	IdleTimeout time.Duration

	// MaxEventBytes bounds the size of one event; zero means
	// DefaultMaxEventBytes. A larger event ends the subscription with
	// [ErrEventTooLarge].
	MaxEventBytes int

	// OnConnect, when not nil, is called each time a stream opens.
	OnConnect func(Connection)
	// OnRetry, when not nil, is called with the reason before each
	// reconnection delay.
	OnRetry func(err error, delay time.Duration)
}

// StaticToken returns a [Client.Token] function that always returns tok.
func StaticToken(tok string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return tok, nil }
}

// Connection describes a stream the hub opened.
type Connection struct {
	// LastEventID is the cursor the client sent, empty when it sent none.
	LastEventID string
	// HubLastEventID is the hub's Mercure-Last-Event-ID header: the id of
	// the event before the replayed ones, or "earliest". Empty when the
	// client sent no cursor.
	HubLastEventID string
}

// CursorLost reports whether the hub did not know the cursor: it no longer
// retains that event (or never had it), so events may have been missed,
// and, if the hub replays its whole history then, some may come again.
func (c Connection) CursorLost() bool {
	return c.LastEventID != "" && c.LastEventID != Earliest && c.HubLastEventID == Earliest
}

// Matcher selects topics (the spec's topic matchers): build one with
// [Exact], [URLPattern] or [Wildcard].
type Matcher struct {
	// Type is the matcher type: "exact", "urlpattern", or another the
	// hub supports.
	Type string
	// Value is the topic, pattern or "*".
	Value string
}

// Exact matches the topic byte for byte.
func Exact(topic string) Matcher { return Matcher{Type: "exact", Value: topic} }

// URLPattern matches topics with a WHATWG URL pattern; a relative pattern
// is resolved against the hub's URL.
func URLPattern(pattern string) Matcher { return Matcher{Type: "urlpattern", Value: pattern} }

// Wildcard matches every topic.
func Wildcard() Matcher { return Matcher{Type: "exact", Value: "*"} }

// param is the subscribe parameter name of m's type.
func (m Matcher) param() string {
	if m.Type == "" || m.Type == "exact" {
		return "match"
	}
	return "match_" + m.Type
}

// Subscription is what to subscribe to.
type Subscription struct {
	// Matchers select the topics; at least one is needed.
	Matchers []Matcher
	// LastEventID is the cursor to start after: an event id (from an
	// earlier stream, or the last-event-id of a discovery link),
	// [Earliest], or empty to receive only updates published from now on.
	// Pass one to miss nothing before the first event arrives.
	LastEventID string
	// Method forces "GET" or "QUERY"; empty means GET, or QUERY with the
	// matchers in a form body when they would make the URL too long.
	Method string

	// resource is the URL of the resource that named the hub, when
	// Discovery.Subscription made the subscription.
	resource *url.URL
}

// errNoMatcher is returned for a subscription without matchers.
var errNoMatcher = errors.New("mercure: a subscription needs at least one matcher")

// Subscribe opens a stream to the hub at hubURL and returns its events in
// order, as an iterator: range over it, and break to close the stream.
// It reconnects on its own after network errors, after the hub ends the
// stream, after a stream silent past [Client.IdleTimeout], and after 5xx
// and 429 answers, with exponential backoff and jitter, honouring the
// hub's retry field and Retry-After within [Client.MinReconnectDelay] and
// [Client.MaxHubDelay]; each reconnection sends Last-Event-ID with the id
// of the last event the iterator yielded, so that no event is missed or
// repeated (the spec's section on reconnection and state reconciliation).
//
// The iteration ends when ctx is done, with no error, or after an error
// that retrying cannot cure, which it yields once: a [*StatusError] for a
// 4xx answer other than 408 and 429 (test it with errors.Is against
// [ErrUnauthorized], [ErrForbidden] and [ErrBadRequest]),
// [ErrNotEventStream], [ErrEventTooLarge], [ErrInsecureRedirect],
// [ErrRedirectBody], [ErrUntrustedHub]. Every event is yielded with a nil
// error.
//
// Reading happens in the caller's goroutine, while it ranges: an event is
// read when the previous one has been handled, so a slow consumer slows
// the stream (the hub may then end it, and the client resumes).
func (c *Client) Subscribe(ctx context.Context, hubURL string, s Subscription) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if len(s.Matchers) == 0 {
			yield(Event{}, errNoMatcher)
			return
		}
		if s.resource != nil {
			hub, err := url.Parse(hubURL)
			if err == nil {
				err = c.checkDiscovered(s.resource, hub)
			}
			if err != nil {
				yield(Event{}, fmt.Errorf("mercure: subscribe: %w", err))
				return
			}
		}
		st := &stream{c: c, hubURL: hubURL, sub: s, cursor: s.LastEventID, yield: yield}
		failures := 0
		for {
			delivered, err, permanent := st.connect(ctx)
			if st.stopped || ctx.Err() != nil {
				return
			}
			if permanent {
				yield(Event{}, err)
				return
			}
			if delivered > 0 {
				failures = 0
			}
			delay := st.delay(failures, err)
			failures++
			if c.OnRetry != nil {
				c.OnRetry(err, delay)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// stream is the state of one subscription across its connections.
type stream struct {
	c       *Client
	hubURL  string
	sub     Subscription
	cursor  string         // the id of the last event yielded, or the initial cursor
	retry   *time.Duration // the hub's last retry field
	yield   func(Event, error) bool
	stopped bool // the consumer broke out of the loop
}

// errStreamEnded is the reason for reconnecting after a clean end of stream.
var errStreamEnded = errors.New("mercure: the hub ended the stream")

// connect runs one connection: it yields the events it reads until the
// stream ends or the consumer stops, and reports how many it yielded and
// why it ended.
func (st *stream) connect(ctx context.Context) (delivered int, err error, permanent bool) {
	req, err := st.request(ctx)
	if err != nil {
		return 0, err, !errors.Is(err, errTokenSource)
	}
	res, err := st.c.do(req)
	if err != nil {
		return 0, err, errors.Is(err, ErrInsecureRedirect) || errors.Is(err, ErrRedirectBody)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		se := newStatusError(req, res)
		return 0, se, !se.temporary()
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		return 0, fmt.Errorf("%w: %s %s: Content-Type %q", ErrNotEventStream, req.Method, redact(req.URL.String()), res.Header.Get("Content-Type")), true
	}
	if st.c.OnConnect != nil {
		st.c.OnConnect(Connection{LastEventID: req.Header.Get("Last-Event-ID"), HubLastEventID: res.Header.Get("Mercure-Last-Event-ID")})
	}
	er := newEventReader(res.Body, st.c.maxEventBytes())
	for {
		ev, err := er.next()
		if er.retry != nil {
			st.retry = er.retry
		}
		if err != nil {
			switch {
			case errors.Is(err, errEventTooLarge):
				return delivered, err, true
			case err == io.EOF:
				err = errStreamEnded
			}
			return delivered, err, false
		}
		if ev.ID != "" {
			st.cursor = ev.ID
		}
		delivered++
		if !st.yield(ev, nil) {
			st.stopped = true
			return delivered, nil, true
		}
	}
}

// errTokenSource wraps the errors of Client.Token.
var errTokenSource = errors.New("mercure: token source")

// request builds the subscribe request of the next connection.
func (st *stream) request(ctx context.Context) (*http.Request, error) {
	var q strings.Builder
	for i, m := range st.sub.Matchers {
		if i > 0 {
			q.WriteByte('&')
		}
		// & = + ; and % are always encoded, as URLSearchParams does.
		q.WriteString(uritemplate.Escape(m.param()))
		q.WriteByte('=')
		q.WriteString(uritemplate.Escape(m.Value))
	}
	method := st.sub.Method
	if method == "" {
		method = http.MethodGet
		if len(st.hubURL)+1+q.Len() > maxURLBytes {
			method = "QUERY"
		}
	}
	target, body := st.hubURL, ""
	if method == http.MethodGet {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + q.String()
	} else {
		body = q.String()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("mercure: subscribe: %w", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
	}
	// A problem document ranked as high as the stream: a hub answers a
	// refusal that passes (429, 503) with its status and Retry-After,
	// which this client honours, rather than with the stream that makes
	// a browser's EventSource retry (which would hide the status).
	req.Header.Set("Accept", "text/event-stream, application/problem+json")
	// No site started this request: a hub that takes the token (or a
	// session) from a cookie refuses streams that other sites start, and
	// reads this header to tell.
	req.Header.Set("Sec-Fetch-Site", "none")
	if st.cursor != "" {
		req.Header.Set("Last-Event-ID", st.cursor)
	}
	if err := st.c.authorize(ctx, req); err != nil {
		return nil, err
	}
	return req, nil
}

// authorize sets the bearer token, if the client has a source.
func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	if c.Token == nil {
		return nil
	}
	tok, err := c.Token(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errTokenSource, err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return nil
}

func (c *Client) maxEventBytes() int {
	if c.MaxEventBytes > 0 {
		return c.MaxEventBytes
	}
	return DefaultMaxEventBytes
}
