package mercure

// The request plumbing that the publish and subscribe endpoints share:
// the time a body may take to arrive, reading it as a UTF-8 form, the
// answers to a body that cannot be read, and the status a response
// ended with.

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// Why a body cannot be read as a form (415). The hub never guesses: a
// compressed body parsed as a form, or Latin-1 bytes taken for UTF-8,
// would publish or subscribe to something other than what the client sent.
var (
	errUnsupportedMedia    = errors.New("the body must be application/x-www-form-urlencoded")
	errUnsupportedCharset  = errors.New("the body must be UTF-8")
	errUnsupportedEncoding = errors.New("the body must be sent without a content coding")
)

// errRequestTooLarge marks a publish or QUERY body over
// [Limits.MaxBodyBytes] (413, PUB-16).
var errRequestTooLarge = errors.New("request body too large")

// errBodyTimeout marks a body that did not arrive within
// [Limits.BodyTimeout] (408).
var errBodyTimeout = errors.New("the request body did not arrive in time")

// utf8Labels are the labels of UTF-8 in the WHATWG Encoding Standard,
// which browsers accept in a charset parameter.
var utf8Labels = []string{"utf-8", "utf8", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "x-unicode20utf8"}

// limitBodyTime bounds how long the body of r may take to arrive
// ([Limits.BodyTimeout]). It runs before anything else in the handler,
// not only before the body is read: net/http reads what is left of a
// small body before it writes any response, a 401 included, so a body
// that never ends would hold every path. Over HTTP/1 the deadline is the
// connection's, over HTTP/2 the stream's; readForm clears it once the
// body is in.
func (h *Hub) limitBodyTime(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return // no body
	}
	err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.cfg.limits.BodyTimeout))
	if errors.Is(err, http.ErrNotSupported) && h.ops.warnedReadDeadlines.CompareAndSwap(false, true) {
		h.log.WarnContext(r.Context(), "mercure: the response writer cannot set read deadlines (middleware without Unwrap?): a client that never finishes a request body holds its connection until the server's own timeouts")
	}
}

// readForm reads a form-encoded body (PUB-1, SUB-2) of at most
// [Limits.MaxBodyBytes], by the deadline limitBodyTime set. It does not
// use r.ParseForm, whose parser breaks SUB-5.
func (h *Hub) readForm(w http.ResponseWriter, r *http.Request) (string, error) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return "", errUnsupportedMedia
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return "", fmt.Errorf("%w (Content-Encoding %q)", errUnsupportedEncoding, c)
			}
		}
	}
	if cs, ok := params["charset"]; ok && !slices.ContainsFunc(utf8Labels, func(l string) bool { return strings.EqualFold(l, cs) }) {
		return "", fmt.Errorf("%w, not charset %q", errUnsupportedCharset, cs)
	}
	limit := h.cfg.limits.MaxBodyBytes
	if r.ContentLength > limit {
		return "", fmt.Errorf("%w: larger than %d bytes", errRequestTooLarge, limit)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if r.ProtoMajor == 1 {
			// The rest of the body may still come: what follows on the
			// connection is not a request. (An HTTP/2 stream is reset
			// alone; closing would end the client's other streams.)
			w.Header().Set("Connection", "close")
		}
		return "", errBodyTimeout
	case err != nil:
		return "", fmt.Errorf("reading body: %w", err)
	case int64(len(b)) > limit:
		return "", fmt.Errorf("%w: larger than %d bytes", errRequestTooLarge, limit)
	}
	// The body is in: the deadline must not cut what follows, a QUERY's
	// stream or a publish waiting for its store.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return string(b), nil
}

// writeFormError answers a request whose form could not be read (see
// readForm) or holds a field the endpoint refuses: 415, 413, 408, or 400
// with err's words.
func writeFormError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errUnsupportedEncoding):
		w.Header().Set("Accept-Encoding", "identity") // RFC 9110, section 15.5.16
		writeProblem(w, http.StatusUnsupportedMediaType, err.Error())
	case errors.Is(err, errUnsupportedMedia), errors.Is(err, errUnsupportedCharset):
		writeProblem(w, http.StatusUnsupportedMediaType, err.Error())
	case errors.Is(err, ErrTooLarge), errors.Is(err, errRequestTooLarge):
		writeProblem(w, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, errBodyTimeout):
		writeProblem(w, http.StatusRequestTimeout, err.Error())
	default:
		writeProblem(w, http.StatusBadRequest, err.Error())
	}
}

// refusalWriter remembers the status of a publish or subscribe response,
// for metrics and spans.
type refusalWriter struct {
	http.ResponseWriter
	status int
	// subscribe marks the subscribe endpoint's: a temporary refusal may
	// be answered as a stream that retries (see Hub.unavailable).
	subscribe bool
}

func (w *refusalWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *refusalWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer
// (read deadlines: see limitBodyTime).
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
