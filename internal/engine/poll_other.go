//go:build !linux

package engine

// poller is Linux's only: elsewhere a goroutine reads each detached
// stream's connection (see Engine.read).
type poller struct{}

func newPoller(*Engine) (*poller, error) { return nil, errNoPoller }

func (*poller) add(*connState) error         { return errNoPoller }
func (*poller) watch(*connState, bool) error { return errNoPoller }
func (*poller) remove(*connState)            {}
func (*poller) stop()                        {}
