package redisstore

// ReplayPage is how many entries Replay reads at once, past the one it
// starts from.
const ReplayPage = replayPage
