package natsstore

// FeedRead returns how many messages the feed's consumers delivered.
func (s *Store) FeedRead() uint64 { return s.read.Load() }

// FeedFilter returns the subjects the feed's consumer reads (or is being
// created to read), nil for every one.
func (s *Store) FeedFilter() []string {
	s.imu.Lock()
	defer s.imu.Unlock()
	if s.interest.changed && s.interest.wide {
		return nil
	}
	return s.interest.current
}
