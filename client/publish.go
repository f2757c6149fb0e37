package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mercurekit/mercure/internal/uritemplate"
)

// Update is what a publisher sends to a hub (the spec's "Publication"
// section).
type Update struct {
	// Topics name the resource: the first is the canonical topic, the
	// others alternate topics. At least one is required.
	Topics []string
	// Data is the content, opaque to the hub. Subscribers receive CR and
	// CRLF line breaks as LF.
	Data string
	// Private restricts the update to subscribers whose token grants
	// subscribe on one of its topics.
	Private bool
	// ID is the event id; the hub generates one when empty.
	ID string
	// Type is the SSE event type; empty means "message".
	Type string
	// Retry, when not nil, is sent to subscribers as their reconnection
	// delay, in whole milliseconds.
	Retry *time.Duration
}

// encode writes u as the application/x-www-form-urlencoded body of a
// publish request.
func (u *Update) encode() string {
	var b strings.Builder
	field := func(name, value string) {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(uritemplate.Escape(value))
	}
	for _, t := range u.Topics {
		field("topic", t)
	}
	if u.Data != "" {
		field("data", u.Data)
	}
	if u.Private {
		field("private", "on")
	}
	if u.ID != "" {
		field("id", u.ID)
	}
	if u.Type != "" {
		field("type", u.Type)
	}
	if u.Retry != nil {
		field("retry", strconv.FormatInt(u.Retry.Milliseconds(), 10))
	}
	return b.String()
}

// Publish sends u to the hub at hubURL and returns the id the hub gave it.
// A refusal is a [*StatusError] carrying the status and the parsed
// challenge: errors.Is(err, [ErrForbidden]) when the token lacks the
// publish grant on one of the topics, for instance. Publish does not retry:
// a publication whose answer was lost may have been dispatched, and
// resending it without an ID would duplicate it.
func (c *Client) Publish(ctx context.Context, hubURL string, u Update) (string, error) {
	if len(u.Topics) == 0 {
		return "", fmt.Errorf("mercure: publish: an update needs at least one topic")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hubURL, strings.NewReader(u.encode()))
	if err != nil {
		return "", fmt.Errorf("mercure: publish: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if err := c.authorize(ctx, req); err != nil {
		return "", err
	}
	res, err := c.do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", newStatusError(req, res)
	}
	// The whole body is the id (the spec's publication section).
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("mercure: publish: reading the id: %w", err)
	}
	return string(b), nil
}
