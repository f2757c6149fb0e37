package redisstore

// ReplayPage is how many entries Replay reads at once, past the one it
// starts from.
const ReplayPage = replayPage

// MaxLen returns the retention the store was opened with.
func (s *Store) MaxLen() int64 { return s.cfg.maxLen }
