//go:build !linux

package engine

// poller is Linux's only: elsewhere a goroutine reads each detached
// stream's connection (see lowMem.read).
type poller struct{}

func newPoller(*lowMem, *Engine) (*poller, error) { return nil, errNoPoller }

func (*poller) add(*detached) error         { return errNoPoller }
func (*poller) watch(*detached, bool) error { return errNoPoller }
func (*poller) remove(*detached)            {}
func (*poller) stop()                       {}
