package client

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"
)

// Event is one event received from a hub: an update, or an event the hub
// generated itself (type "mercure", for subscription events).
type Event struct {
	// ID is the event's id, the cursor to resume after it. A conforming
	// hub gives every event one.
	ID string
	// Type is the SSE event type; empty means the default, "message".
	Type string
	// Data is the payload, its line breaks normalized to LF.
	Data string
	// Retry, when not nil, is the reconnection delay the hub set with
	// this event; the client honours it within [Client.MinReconnectDelay]
	// and [Client.MaxHubDelay].
	Retry *time.Duration
}

// errEventTooLarge is returned when a line or an event exceeds the size
// limit: a hub that misbehaves cannot make the client buffer without end.
var errEventTooLarge = errors.New("mercure: event larger than the client's limit")

// eventReader parses a text/event-stream body as the WHATWG HTML standard's
// "Interpreting an event stream" does: lines end with CRLF, LF or a lone
// CR; an event is dispatched at a blank line only when it had a data field;
// an id containing NUL is ignored.
type eventReader struct {
	sc          *bufio.Scanner
	lastEventID string // the "last event ID buffer", kept across events
	maxEvent    int
	skipLF      bool // the previous line ended with CR: a following LF belongs to it
	started     bool
	retry       *time.Duration // the last retry field, dispatched or not
}

func newEventReader(r io.Reader, maxEvent int) *eventReader {
	er := &eventReader{sc: bufio.NewScanner(r), maxEvent: maxEvent}
	er.sc.Buffer(make([]byte, 0, 4096), maxEvent+2)
	er.sc.Split(er.splitLines)
	return er
}

// splitLines is a bufio.SplitFunc for the three line endings. A CR at the
// end of the buffered data ends the line at once, without waiting for the
// next read (the stream may pause right there); an LF that then starts the
// next read is skipped.
func (er *eventReader) splitLines(data []byte, atEOF bool) (int, []byte, error) {
	skipped := 0
	if er.skipLF && len(data) > 0 {
		er.skipLF = false
		if data[0] == '\n' {
			data, skipped = data[1:], 1
		}
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return skipped + i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return skipped + i + 2, data[:i], nil
			}
			return skipped + i + 1, data[:i], nil
		}
		er.skipLF = true
		return skipped + i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		// An unterminated last line is never part of a dispatched event.
		return skipped + len(data), nil, io.ErrUnexpectedEOF
	}
	return skipped, nil, nil
}

// next returns the next dispatched event. At the end of the stream it
// returns io.EOF (or io.ErrUnexpectedEOF when a partial event was cut).
func (er *eventReader) next() (Event, error) {
	var (
		ev      Event
		data    strings.Builder
		hasData bool
		size    int
	)
	for er.sc.Scan() {
		line := er.sc.Bytes()
		if !er.started {
			er.started = true
			line = bytes.TrimPrefix(line, []byte("\uFEFF")) // one leading BOM is not content
		}
		if len(line) == 0 {
			if !hasData {
				// No data field: nothing is dispatched, and the type
				// is reset; the id (and retry) still took effect.
				ev, size = Event{}, 0
				continue
			}
			s := data.String()
			ev.Data = s[:len(s)-1]
			ev.ID = er.lastEventID
			return ev, nil
		}
		if size += len(line); size > er.maxEvent {
			return Event{}, errEventTooLarge
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			if i == 0 {
				continue // a comment, keep-alives included
			}
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "data":
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "event":
			ev.Type = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				er.lastEventID = string(value)
			}
		case "retry":
			if n, ok := digits(value); ok {
				retry := time.Duration(n) * time.Millisecond
				ev.Retry = &retry
				er.retry = ev.Retry
			}
		}
	}
	if err := er.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, errEventTooLarge
		}
		return Event{}, err
	}
	return Event{}, io.EOF
}

// digits parses a retry value: ASCII digits only, as the standard says.
func digits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n > int64(time.Duration(1<<62)/time.Millisecond) {
		return 0, false
	}
	return n, true
}
