package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrTimeout is wrapped by the error of a request whose response headers
// did not come within [Client.HeaderTimeout], or whose body stayed silent
// longer than [Client.IdleTimeout]. A subscription reconnects after it
// (see [Client.OnRetry]); Publish, Discover and Metadata return it.
var ErrTimeout = errors.New("mercure: timeout")

// do sends req with the client's redirect policy and deadlines: the
// response headers must come within HeaderTimeout, and then the body may
// not stay silent longer than IdleTimeout. A deadline that passes cancels
// the request, and the error of Do or of a body read then wraps
// ErrTimeout. Closing the body releases the timer.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	stop := func() bool { return true }
	if d := c.headerTimeout(); d > 0 {
		t := time.AfterFunc(d, func() {
			cancel(fmt.Errorf("%w: no response headers within %v", ErrTimeout, d))
		})
		stop = t.Stop
	}
	res, err := c.httpClient().Do(req.WithContext(ctx))
	stop() // if it fired as the headers came, the body reads fail with its cause
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrTimeout) {
			err = fmt.Errorf("%s %s: %w", req.Method, redact(req.URL.String()), cause)
		}
		cancel(nil)
		return nil, err
	}
	b := &watchedBody{ReadCloser: res.Body, ctx: ctx, cancel: cancel, idle: c.idleTimeout()}
	if b.idle > 0 {
		b.timer = time.AfterFunc(b.idle, func() {
			cancel(fmt.Errorf("%w: the stream was silent for %v", ErrTimeout, b.idle))
		})
	}
	res.Body = b
	return res, nil
}

// watchedBody is a response body whose every read that returns bytes, a
// keep-alive comment included, pushes the idle deadline back.
type watchedBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration
	timer  *time.Timer // nil without an idle deadline
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && b.timer != nil {
		b.timer.Reset(b.idle) // if it fired meanwhile, the request is cancelled already
	}
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); errors.Is(cause, ErrTimeout) {
			err = cause
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

func (c *Client) headerTimeout() time.Duration {
	if c.HeaderTimeout == 0 {
		return DefaultHeaderTimeout
	}
	return c.HeaderTimeout
}

func (c *Client) idleTimeout() time.Duration {
	if c.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return c.IdleTimeout
}
