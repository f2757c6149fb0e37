package redisstore_test

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mercurekit/mercure/storetest"
)

// proxy forwards TCP connections to Redis, and breaks them on demand:
// Cut closes them all and refuses new ones until Mend (a network
// partition between one instance and Redis); armed drops the reply to
// the next script call and closes that connection (the script ran, but
// its caller never learns it, and retries).
type proxy struct {
	*storetest.Proxy
	armed   atomic.Bool
	scripts atomic.Int64 // script calls seen
	// rate, when not 0, caps the bytes per second from Redis on each
	// connection: a slow link. Set it before the first connection.
	rate int
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{}
	p.Proxy = storetest.StartProxy(t, target, func() (toServer, toClient func([]byte) bool) {
		var scriptPending atomic.Bool
		toServer = func(b []byte) bool {
			if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) {
				p.scripts.Add(1)
				scriptPending.Store(true)
			}
			return true
		}
		start, sent := time.Now(), 0
		toClient = func(b []byte) bool {
			if p.rate > 0 {
				if time.Since(start) > time.Second { // no credit saved while idle
					start, sent = time.Now(), 0
				}
				sent += len(b)
				time.Sleep(time.Until(start.Add(time.Duration(sent) * time.Second / time.Duration(p.rate))))
			}
			return !(scriptPending.Swap(false) && p.armed.CompareAndSwap(true, false))
		}
		return toServer, toClient
	})
	return p
}
