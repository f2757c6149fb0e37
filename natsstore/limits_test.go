package natsstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsstore"
	"github.com/mercurekit/mercure/store"
	"github.com/mercurekit/mercure/storetest"
)

// streamInfo returns the configuration and state of the stream name.
func streamInfo(t *testing.T, url, name string) *jetstream.StreamInfo {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// New sets the stream's limits from the options, and a store opened
// later on the same stream with other options applies them.
func TestStreamConfig(t *testing.T) {
	t.Parallel()
	url, name := server(t).URL, streamName()
	open(t, url, name, natsstore.WithMaxLen(10), natsstore.WithMaxBytes(1<<20), natsstore.WithMaxAge(time.Hour),
		natsstore.WithRetryWindow(5*time.Minute)).Close()
	c := streamInfo(t, url, name).Config
	if c.MaxMsgs != 10 || c.MaxBytes != 1<<20 || c.MaxAge != time.Hour || c.Duplicates != 5*time.Minute ||
		c.Replicas != 1 || c.Storage != jetstream.FileStorage || !c.AllowDirect || c.Discard != jetstream.DiscardOld {
		t.Fatalf("stream config %+v", c)
	}
	if len(c.Subjects) != 1 || c.Subjects[0] != name+".>" {
		t.Fatalf("subjects %q, want %s.>", c.Subjects, name)
	}
	// No limit is -1 for JetStream; the duplicate window is at least
	// two minutes, and no longer than the age limit.
	open(t, url, name, natsstore.WithMaxLen(0), natsstore.WithMaxAge(time.Minute), natsstore.WithRetryWindow(0)).Close()
	c = streamInfo(t, url, name).Config
	if c.MaxMsgs != -1 || c.MaxBytes != -1 || c.MaxAge != time.Minute || c.Duplicates != time.Minute {
		t.Fatalf("stream config %+v", c)
	}
}

// WithMaxBytes and WithMaxAge drop the oldest events: a replay from
// earliest holds the newest only, contiguous, and a cursor naming a
// dropped event is unknown.
func TestRetentionByBytesAndAge(t *testing.T) {
	t.Parallel()
	t.Run("bytes", func(t *testing.T) {
		t.Parallel()
		s := open(t, server(t).URL, streamName(), natsstore.WithMaxLen(0), natsstore.WithMaxBytes(16<<10))
		defer s.Close()
		var evs []*store.Event
		for i := range 64 {
			e := storetest.NewEvent("b" + string(rune('A'+i%26)) + string(rune('a'+i/26)))
			e.Data = strings.Repeat("x", 1024)
			storetest.MustAppend(t, s, e)
			evs = append(evs, e)
		}
		b, ids := storetest.ReplayIDs(t, s, store.Earliest)
		if len(ids) == 0 || len(ids) > 16 {
			t.Fatalf("%d events kept in 16 KiB of 1 KiB events", len(ids))
		}
		if ids[len(ids)-1] != evs[63].ID || b.Head != evs[63].Seq {
			t.Fatalf("replay ends at %s (head %d), want the last event %s (%d)", ids[len(ids)-1], b.Head, evs[63].ID, evs[63].Seq)
		}
		if b, _ := storetest.ReplayIDs(t, s, evs[0].ID); b.Cursor != store.Earliest {
			t.Fatalf("a dropped event's id resolved to cursor %q", b.Cursor)
		}
	})
	t.Run("age", func(t *testing.T) {
		t.Parallel()
		url, name := server(t).URL, streamName()
		s := open(t, url, name, natsstore.WithMaxAge(time.Second))
		defer s.Close()
		old := storetest.NewEvent("old")
		storetest.MustAppend(t, s, old)
		// A replay under way when the event ages out ends with a gap:
		// the next one holds nothing.
		var ids []string
		if !storetest.Within(storetest.Deadline, func() bool {
			ids = nil
			b, err := s.Replay(context.Background(), store.Earliest)
			if err != nil {
				t.Fatal(err)
			}
			for e, err := range b.Events {
				if errors.Is(err, store.ErrHistoryGap) {
					return false
				}
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, e.ID)
			}
			return len(ids) == 0
		}) {
			i := streamInfo(t, url, name)
			t.Fatalf("the event did not age out in %v: replay %q; stream state %+v, max age %v", storetest.Deadline, ids, i.State, i.Config.MaxAge)
		}
		fresh := storetest.NewEvent("fresh")
		storetest.MustAppend(t, s, fresh)
		if _, ids := storetest.ReplayIDs(t, s, store.Earliest); len(ids) != 1 || ids[0] != "fresh" {
			t.Fatalf("replay %q, want the fresh event alone", ids)
		}
	})
}
