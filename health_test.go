package mercure_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Readiness follows the store's feed and shutdown; liveness only shutdown.
func TestHealth_ReadyFollowsFeedAndShutdown(t *testing.T) {
	t.Parallel()
	st := &feedStore{Store: newMemoryStore(t, 10)}
	h, err := mercure.New(testHubURL, mercure.WithStore(st), mercure.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, live bool, ready string) {
		t.Helper()
		if err := h.Live(); (err == nil) != live {
			t.Errorf("%s: Live %v, want live %v", step, err, live)
		}
		if err := h.Ready(); ready == "" && err != nil || ready != "" && (err == nil || !strings.Contains(err.Error(), ready)) {
			t.Errorf("%s: Ready %v, want %q", step, err, ready)
		}
	}
	check("up", true, "")
	if h.Live() != nil || h.Ready() != nil {
		t.Fatal("not live and ready")
	}
	outage := errors.New("redis: connection refused")
	st.status(outage)
	check("feed down", true, "feed is failing")
	if err := h.Ready(); !errors.Is(err, outage) {
		t.Errorf("Ready = %v, want it to wrap %v", err, outage)
	}
	st.status(nil)
	check("feed back", true, "")
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	check("shut down", false, "shutting down")
	if !errors.Is(h.Ready(), mercure.ErrHubClosed) || !errors.Is(h.Live(), mercure.ErrHubClosed) {
		t.Errorf("after Shutdown: Live %v, Ready %v", h.Live(), h.Ready())
	}
}

// The hub logs to slog.Default unless told otherwise; WithLogger(nil)
// discards. No log line carries the token of a refused request.
func TestLogger_DefaultAndNil(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)

	st := &feedStore{Store: newMemoryStore(t, 10)}
	h, err := mercure.New(testHubURL, mercure.WithStore(st), withAuthIssuer(t))
	if err != nil {
		t.Fatal(err)
	}
	th := startHubServer(t, h, h)
	st.status(errors.New("feed outage"))
	if !strings.Contains(buf.String(), "feed outage") {
		t.Errorf("the default logger got nothing: %q", buf.String())
	}
	st.status(nil)
	secret := pubToken(t)
	req, _ := http.NewRequest(http.MethodPost, th.endpoint(), strings.NewReader("topic=urn%3Ax&data=private-payload"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+secret[:len(secret)-4]+"AAAA") // a bad signature
	do(t, req)
	if strings.Contains(buf.String(), secret[:len(secret)-4]) || strings.Contains(buf.String(), "private-payload") {
		t.Errorf("a log line carries the token or the payload: %q", buf.String())
	}

	buf.Reset()
	store2 := &feedStore{Store: newMemoryStore(t, 10)}
	h2, err := mercure.New(testHubURL, mercure.WithStore(store2), mercure.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Shutdown(context.Background())
	store2.status(errors.New("feed outage"))
	if buf.Len() > 0 {
		t.Errorf("WithLogger(nil) logged %q", buf.String())
	}
}
