package engine

// DirectConn is a connection that the engine writes without a descriptor,
// a poller or a goroutine of its own: a hijacked connection that
// implements it is run like a socket watched by the poller, through these
// two methods instead. An in-memory connection implements it to simulate
// many subscribers without sockets (internal/simconn); real sockets do
// not, and go through the descriptor and the poller.
type DirectConn interface {
	// WriteNow writes the first n bytes of iov, all that the connection
	// takes without blocking (all of iov, or less, or none), or fails:
	// the connection is closed, or its client left. After it took less
	// than iov, the engine calls it next with the rest of iov, from the
	// first byte not taken, once the connection says it can take more.
	WriteNow(iov [][]byte) (n int, err error)
	// Watch makes the connection call notify when its client left (gone)
	// and, after a WriteNow that took less than it was given, once it can
	// take more (writable), even at once. notify never blocks and may be
	// called from any goroutine, but not from within WriteNow; once the
	// engine closes the connection, it is not called again. The engine
	// calls Watch once, before its first WriteNow.
	Watch(notify func(gone, writable bool))
}

// watchDirect makes the direct connection of s, which detach just took
// over, wake s when its client leaves or it can take more: what the
// poller does for a socket.
func (s *Stream) watchDirect(d DirectConn) {
	d.Watch(func(gone, writable bool) {
		switch {
		case gone:
			s.signal(flagGone)
		case writable:
			s.signal(flagWritable)
		}
	})
}
