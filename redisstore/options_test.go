package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/redisstore"
)

// Options refuse values they cannot honour rather than clamp them or keep
// the default silently; New checks them before it reaches Redis, so this
// test needs no server.
func TestNew_RejectsBadOptions(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	cases := map[string]struct {
		client redis.UniversalClient
		stream string
		opts   []redisstore.Option
	}{
		"no client":                 {nil, "mercure", nil},
		"no stream":                 {rdb, "", nil},
		"negative max length":       {rdb, "mercure", []redisstore.Option{redisstore.WithMaxLen(-1)}},
		"zero timeout":              {rdb, "mercure", []redisstore.Option{redisstore.WithTimeout(0)}},
		"negative subscription TTL": {rdb, "mercure", []redisstore.Option{redisstore.WithSubscriptionTTL(-time.Second)}},
		"negative retry window":     {rdb, "mercure", []redisstore.Option{redisstore.WithRetryWindow(-time.Second)}},
		"nil option":                {rdb, "mercure", []redisstore.Option{nil}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := redisstore.New(c.client, c.stream, c.opts...)
			if !errors.Is(err, mercure.ErrInvalidOption) {
				t.Fatalf("New: store %v, err %v; want ErrInvalidOption", s, err)
			}
		})
	}
}
