package mercure

import "fmt"

// Live reports whether the hub can serve: nil until [Hub.Shutdown]
// begins, [ErrHubClosed] after. A failing store does not make a hub
// dead (restarting it would not help): see [Hub.Ready].
func (h *Hub) Live() error {
	if h.ops.shutting.Load() || h.isClosed() {
		return ErrHubClosed
	}
	return nil
}

// Ready reports whether the hub should get traffic: nil unless
// [Hub.Shutdown] has begun ([ErrHubClosed]) or the store's live feed
// is failing (an error wrapping the feed's, see [Metrics].FeedError):
// meanwhile its subscribers get no update.
func (h *Hub) Ready() error {
	if err := h.Live(); err != nil {
		return err
	}
	if err := h.ops.feedErr.Load(); err != nil {
		return fmt.Errorf("mercure: the store's feed is failing: %w", *err)
	}
	return nil
}
