package natsstore

// FeedRead returns how many messages the feed's consumers delivered.
func (s *Store) FeedRead() uint64 { return s.read.Load() }

// FeedFilter returns the subjects that the feed's consumer delivering
// now reads, nil for every one; nil too once the interest grew past them.
func (s *Store) FeedFilter() []string {
	s.imu.Lock()
	defer s.imu.Unlock()
	if s.interest.current == nil || s.interest.changed && s.interest.wide {
		return nil // it reads everything, or will before it delivers
	}
	return s.interest.running
}
