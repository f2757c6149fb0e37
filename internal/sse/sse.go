// Package sse encodes the server side of a Server-Sent Events stream, as
// specified by the WHATWG HTML standard ("Server-sent events", section
// "Parsing an event stream" and "Interpreting an event stream").
//
// A Mercure hub encodes every update once, to an immutable byte slice that is
// then written, unchanged, to every subscriber. The functions of this package
// therefore follow the strconv.AppendXxx style: they append to a caller-owned
// buffer, grow it at most once, and allocate nothing when it has enough spare
// capacity.
// EncodedLen reports the exact size in advance so a caller can allocate once.
//
// The encoding is loss-free for the data payload: every line of the payload
// becomes one "data: " field, where CRLF, a lone CR and a lone LF each count
// as one line break, and an empty payload or a trailing line break still
// produces a (final) empty "data: " line. A conforming client (EventSource)
// therefore sees exactly the payload with its line breaks normalized to LF.
//
// This package deliberately does not use the message writer of
// github.com/tmaxmax/go-sse: that writer drops a trailing empty data line (so
// "x\n" arrives as "x") and writes no data line at all for empty data, so a
// browser, which ignores events whose data buffer is empty, never dispatches
// the event.
//
// Only "\n" is ever written as a line terminator; the output never contains a
// CR byte, so it cannot be re-split differently by a client.
package sse

import (
	"slices"
	"strconv"
	"strings"
)

// KeepAlive is the comment written to idle streams to keep intermediaries from
// closing them: a comment line alone, without the empty line that ends a
// block. Every parser ignores a comment line, but some dispatch a message at
// every empty line, data or not (@microsoft/fetch-event-source calls its
// onmessage with empty data), so no empty line goes out without an event.
// It is a constant string rather than a []byte variable so that no package
// can modify it; write it with io.WriteString (http.ResponseWriter
// implements io.StringWriter, so this does not copy).
const KeepAlive = ":\n"

const (
	idPrefix      = "id: "
	eventPrefix   = "event: "
	retryPrefix   = "retry: "
	dataPrefix    = "data: "
	commentPrefix = ": "
)

// AppendEvent appends one SSE event to dst and returns the extended slice.
//
// Fields are written "name: value" with exactly one space, in the order id,
// event, retry, data:
//   - id is always written, even when empty (an empty id resets the client's
//     last event ID, as the standard specifies);
//   - event is omitted when typ == "";
//   - retry is omitted when retryMillis < 0 (0 is sent: reconnect at once);
//   - data is written as one "data: " line per line of data, where CRLF, a
//     lone CR and a lone LF each count as one line break, and an empty data or
//     a trailing break still produce a (final) empty "data: " line.
//
// The event ends with an empty line. Nothing in data can forge another field
// or end the event early: every line of data is prefixed by "data: ".
//
// The caller guarantees that id and typ contain no CR, LF or NUL (they are
// validated when the update is published). Defensively, if id or typ contains
// a CR or LF anyway, it is cut at the first such byte, so the stream stays
// well-formed and no field can be injected through them. A NUL in id is
// written unchanged; clients then ignore the id field, as the standard
// requires, and keep their previous last event ID.
//
// dst is grown at most once, by at least EncodedLen bytes; if it already has
// enough spare capacity, AppendEvent does not allocate.
func AppendEvent(dst []byte, id, typ string, retryMillis int64, data string) []byte {
	id, typ = singleLine(id), singleLine(typ)
	dst = slices.Grow(dst, encodedLen(id, typ, retryMillis, data))

	dst = append(dst, idPrefix...)
	dst = append(dst, id...)
	dst = append(dst, '\n')
	if typ != "" {
		dst = append(dst, eventPrefix...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	if retryMillis >= 0 {
		dst = append(dst, retryPrefix...)
		dst = strconv.AppendInt(dst, retryMillis, 10)
		dst = append(dst, '\n')
	}
	dst = appendLines(dst, dataPrefix, data)

	return append(dst, '\n')
}

// EncodedLen returns the exact number of bytes AppendEvent appends for the
// same arguments, so callers can allocate once.
func EncodedLen(id, typ string, retryMillis int64, data string) int {
	return encodedLen(singleLine(id), singleLine(typ), retryMillis, data)
}

// encodedLen is EncodedLen for id and typ already passed through singleLine.
func encodedLen(id, typ string, retryMillis int64, data string) int {
	n := len(idPrefix) + len(id) + 1
	if typ != "" {
		n += len(eventPrefix) + len(typ) + 1
	}
	if retryMillis >= 0 {
		n += len(retryPrefix) + decimalLen(retryMillis) + 1
	}

	return n + linesLen(len(dataPrefix), data) + 1
}

// AppendComment appends an SSE comment, ": " + text + "\n", to dst and
// returns the extended slice. Clients ignore comments; they are useful to
// keep a connection alive or to pad a stream.
//
// text should not contain CR or LF. If it does, it is split into lines
// exactly like the data of AppendEvent, and each line is written as its own
// comment line prefixed by ": ", so text can never produce a field or
// dispatch an event. No empty line follows: one would end a block, which
// some parsers report as a message with empty data (see [KeepAlive]). Like
// AppendEvent, it grows dst at most once.
func AppendComment(dst []byte, text string) []byte {
	dst = slices.Grow(dst, linesLen(len(commentPrefix), text))
	return appendLines(dst, commentPrefix, text)
}

// singleLine returns s cut at its first CR or LF, if any.
func singleLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '\r'); i >= 0 {
		s = s[:i]
	}

	return s
}

// appendLines appends one line prefix+line+"\n" per line of s, where CRLF, a
// lone CR and a lone LF each end a line, and the text after the last break
// (possibly empty) is always a final line.
func appendLines(dst []byte, prefix, s string) []byte {
	// cr and lf hold the index of the next CR and LF at or after start, or
	// len(s) if there is none; each is searched for again only once the scan
	// has passed it, so the whole scan is linear whatever the mix of breaks.
	start := 0
	cr, lf := indexFrom(s, '\r', 0), indexFrom(s, '\n', 0)
	for {
		i := min(cr, lf)
		if i == len(s) {
			break
		}
		dst = append(dst, prefix...)
		dst = append(dst, s[start:i]...)
		dst = append(dst, '\n')

		start = i + 1
		if i == cr && start < len(s) && s[start] == '\n' {
			start++ // CRLF is a single break.
		}
		if cr < start {
			cr = indexFrom(s, '\r', start)
		}
		if lf < start {
			lf = indexFrom(s, '\n', start)
		}
	}
	dst = append(dst, prefix...)
	dst = append(dst, s[start:]...)

	return append(dst, '\n')
}

// linesLen returns the number of bytes appendLines appends for s with a
// prefix of prefixLen bytes.
func linesLen(prefixLen int, s string) int {
	nLF := strings.Count(s, "\n")
	nCR := strings.Count(s, "\r")
	breaks := nLF + nCR
	if nLF > 0 && nCR > 0 {
		breaks -= strings.Count(s, "\r\n")
	}
	// Each break is replaced by "\n" and starts a new prefixed line.
	return len(s) - nLF - nCR + (breaks+1)*(prefixLen+1)
}

// indexFrom returns the index of the first c in s at or after from, or
// len(s) if there is none.
func indexFrom(s string, c byte, from int) int {
	if i := strings.IndexByte(s[from:], c); i >= 0 {
		return from + i
	}

	return len(s)
}

// decimalLen returns the number of decimal digits of n > 0.
func decimalLen(n int64) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}

	return d
}
