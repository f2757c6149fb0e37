package mercure

import (
	"fmt"
	"net/http"
)

// Live reports whether the hub can serve: nil until [Hub.Shutdown]
// begins, [ErrHubClosed] after. A failing store does not make a hub
// dead (restarting it would not help): see [Hub.Ready].
func (h *Hub) Live() error {
	if h.shutting.Load() || h.isClosed() {
		return ErrHubClosed
	}
	return nil
}

// Ready reports whether the hub should get traffic: nil unless
// [Hub.Shutdown] has begun ([ErrHubClosed]) or the store's live feed
// is failing (an error wrapping the feed's, see [Stats.FeedError]):
// meanwhile its subscribers get no update.
func (h *Hub) Ready() error {
	if err := h.Live(); err != nil {
		return err
	}
	if err := h.feedErr.Load(); err != nil {
		return fmt.Errorf("mercure: the store's feed is failing: %w", *err)
	}
	return nil
}

// LiveHandler returns a handler for liveness probes (e.g. /healthz): 200
// "ok" while [Hub.Live] reports nil, else 503 with the reason, in plain
// text. Mount it on an address clients of the hub cannot reach.
func (h *Hub) LiveHandler() http.Handler { return healthHandler(h.Live) }

// ReadyHandler returns a handler for readiness probes (e.g. /readyz): 200
// "ok" while [Hub.Ready] reports nil, else 503 with the reason, in plain
// text. The reason may name the store's error: mount it on an address
// clients of the hub cannot reach.
func (h *Hub) ReadyHandler() http.Handler { return healthHandler(h.Ready) }

func healthHandler(check func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("X-Content-Type-Options", "nosniff")
		if err := check(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}
