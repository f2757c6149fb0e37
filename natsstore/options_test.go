package natsstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/natsstore"
)

// Options refuse values they cannot honour rather than clamp them or keep
// the default silently; New checks them, and the stream's name, before it
// reaches a server, so this test needs none.
func TestNew_RejectsBadOptions(t *testing.T) {
	t.Parallel()
	nc, err := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cases := map[string]struct {
		nc   *nats.Conn
		name string
		opts []natsstore.Option
	}{
		"no connection":              {nil, "mercure", nil},
		"no stream":                  {nc, "", nil},
		"a dot in the stream":        {nc, "mer.cure", nil},
		"a wildcard in the name":     {nc, "mer*", nil},
		"negative max length":        {nc, "mercure", []natsstore.Option{natsstore.WithMaxLen(-1)}},
		"negative max bytes":         {nc, "mercure", []natsstore.Option{natsstore.WithMaxBytes(-1)}},
		"negative max age":           {nc, "mercure", []natsstore.Option{natsstore.WithMaxAge(-time.Second)}},
		"no replica":                 {nc, "mercure", []natsstore.Option{natsstore.WithReplicas(0)}},
		"six replicas":               {nc, "mercure", []natsstore.Option{natsstore.WithReplicas(6)}},
		"zero timeout":               {nc, "mercure", []natsstore.Option{natsstore.WithTimeout(0)}},
		"negative retry window":      {nc, "mercure", []natsstore.Option{natsstore.WithRetryWindow(-time.Second)}},
		"subscription TTL too short": {nc, "mercure", []natsstore.Option{natsstore.WithSubscriptionTTL(time.Millisecond)}},
		"nil option":                 {nc, "mercure", []natsstore.Option{nil}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := natsstore.New(c.nc, c.name, c.opts...)
			if !errors.Is(err, mercure.ErrInvalidOption) {
				t.Fatalf("New: store %v, err %v; want ErrInvalidOption", s, err)
			}
		})
	}
}

// New fails, within its timeout, when no server answers: a hub does not
// start without its history.
func TestNew_FailsWithoutServer(t *testing.T) {
	t.Parallel()
	nc, err := nats.Connect("nats://127.0.0.1:1", nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, err := natsstore.New(nc, "mercure", natsstore.WithTimeout(200*time.Millisecond))
	if err == nil || errors.Is(err, mercure.ErrInvalidOption) {
		t.Fatalf("New without a server: store %v, err %v; want the servers' error", s, err)
	}
}
