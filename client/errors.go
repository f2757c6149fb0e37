package client

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors; errors.Is matches a [*StatusError] against the first
// three by its status code.
var (
	// ErrBadRequest matches a 400 answer: a malformed request, such as an
	// unsupported matcher type or an invalid topic.
	ErrBadRequest = errors.New("mercure: bad request")
	// ErrUnauthorized matches a 401 answer: no token where the hub needs
	// one, or a token it refuses (see [StatusError.Challenge]).
	ErrUnauthorized = errors.New("mercure: unauthorized")
	// ErrForbidden matches a 403 answer: a valid token without the grant.
	ErrForbidden = errors.New("mercure: forbidden")
	// ErrNotEventStream is wrapped by the error a subscription ends with
	// when the hub answers 200 with another media type than
	// text/event-stream: the URL is not a hub's.
	ErrNotEventStream = errors.New("mercure: the response is not an event stream")
	// ErrEventTooLarge is wrapped by the error a subscription ends with
	// when an event exceeds [Client.MaxEventBytes].
	ErrEventTooLarge = errEventTooLarge
)

// StatusError is the error for a hub's answer other than success. Test it
// with errors.As, or errors.Is against [ErrBadRequest], [ErrUnauthorized]
// and [ErrForbidden].
type StatusError struct {
	// Method and URL are the request's.
	Method, URL string
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// Challenge is the parsed Bearer challenge of WWW-Authenticate
	// (RFC 6750 section 3), nil when the answer had none.
	Challenge *Challenge
	// Detail is the problem's detail or title for an RFC 9457 body, or the
	// start of a text body; informative only.
	Detail string
	// RetryAfter is the delay the Retry-After header asked for, if any;
	// one too long for a Duration is the longest Duration. A subscription
	// waits at most [Client.MaxHubDelay].
	RetryAfter time.Duration
}

// Error describes the answer, with the OAuth error code of the challenge.
func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mercure: %s %s: %d %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Challenge != nil && e.Challenge.Error != "" {
		fmt.Fprintf(&b, " (%s)", e.Challenge.Error)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	return b.String()
}

// Is reports whether target is the sentinel of e's status code.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.StatusCode == http.StatusBadRequest
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	}
	return false
}

// temporary reports whether the request may succeed if retried later.
func (e *StatusError) temporary() bool {
	return e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusRequestTimeout
}

// newStatusError reads res (its body at most 4 KiB) into a StatusError.
func newStatusError(req *http.Request, res *http.Response) *StatusError {
	e := &StatusError{Method: req.Method, URL: redact(req.URL.String()), StatusCode: res.StatusCode}
	for _, c := range ParseChallenges(res.Header.Values("WWW-Authenticate")) {
		if strings.EqualFold(c.Scheme, "Bearer") {
			e.Challenge = &c
			break
		}
	}
	if d, ok := parseRetryAfter(res.Header.Get("Retry-After"), time.Now()); ok {
		e.RetryAfter = d
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	switch {
	case mt == "application/problem+json":
		e.Detail = problemDetail(body)
	case strings.HasPrefix(mt, "text/plain"):
		e.Detail = strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
		if len(e.Detail) > 200 {
			e.Detail = e.Detail[:200] + "…"
		}
	}
	return e
}

// redact drops the query of u: it is the hub's business, and it may be
// long.
func redact(u string) string {
	u, _, _ = strings.Cut(u, "?")
	return u
}
