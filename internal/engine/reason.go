package engine

// EndReason is why a stream ended; 0 is unset. The hub names each one in
// its metrics (mercure_streams_closed_total{reason}).
type EndReason uint8

// Reasons a stream ended.
const (
	EndUnset         EndReason = iota
	EndClientGone              // the client left
	EndTokenExpired            // the subscriber's token expired
	EndLifetime                // the maximum lifetime ended
	EndQueueOverflow           // the client fell behind
	EndWriteError              // a write failed or timed out
	EndHistoryGap              // the store's feed or a replay skipped events
	EndReplayError             // history could not be read, or the replay took too long
	EndShutdown                // the hub shut down, or drained the stream
	EndRevoked                 // the session behind the stream ended
	EndGrantsChanged           // the session's subscribe grants or payload changed
	NumEndReasons
)
