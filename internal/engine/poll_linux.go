package engine

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// poller watches the connections of detached streams with epoll, from one
// goroutine per hub: an SSE client sends nothing once its request is
// sent, so that its connection becomes readable (or hung up) when it
// leaves. It also reports when the connection of a stream whose write
// was left unfinished (see detached.send) can take more. Each connection is registered under its stream's id, never its
// descriptor, which the system reuses.
type poller struct {
	lm   *lowMem
	e    *Engine
	epfd int
	evfd int // an eventfd that stops the poller (id 0)
}

// newPoller starts a poller. The caller holds lm.mu.
func newPoller(lm *lowMem, e *Engine) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, err
	}
	p := &poller{lm: lm, e: e, epfd: epfd, evfd: evfd}
	lm.wg.Add(1)
	go p.run()
	return p, nil
}

// run reports the streams whose client left, until stop.
func (p *poller) run() {
	defer p.lm.wg.Done()
	defer unix.Close(p.epfd)
	defer unix.Close(p.evfd)
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// Streams then notice gone clients when writes to them fail.
			p.e.log.Error("mercure: low-memory mode: watching connections failed", "error", err)
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				return // stop
			}
			if ev.Events&^unix.EPOLLOUT == 0 {
				p.lm.writable(id) // room to write, and nothing else
				continue
			}
			p.lm.gone(id)
		}
	}
}

// add watches the connection of d, once: EPOLLONESHOT, since the stream
// ends at the first event, or runs at once when it can write (see watch).
func (p *poller) add(d *detached) error {
	return p.ctl(d, unix.EPOLL_CTL_ADD, false)
}

// watch re-arms the watch on the connection of d, and makes it report
// too when the connection can take more bytes, if out. The writer
// running d calls it, whenever d waits for room, and once it no longer
// does; every report disarms the watch until then (EPOLLONESHOT).
func (p *poller) watch(d *detached, out bool) error {
	return p.ctl(d, unix.EPOLL_CTL_MOD, out)
}

func (p *poller) ctl(d *detached, op int, out bool) error {
	rc, err := rawConn(d.conn)
	if err != nil {
		return err
	}
	ev := unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
		Fd:     int32(uint32(d.id)),
		Pad:    int32(uint32(d.id >> 32)),
	}
	if out {
		ev.Events |= unix.EPOLLOUT
	}
	var ctlErr error
	if err := rc.Control(func(fd uintptr) {
		ctlErr = unix.EpollCtl(p.epfd, op, int(fd), &ev)
	}); err != nil {
		return err
	}
	return ctlErr
}

// remove stops watching the connection of d; the caller closes it after.
func (p *poller) remove(d *detached) {
	rc, err := rawConn(d.conn)
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
}

// stop makes the poller exit, once no connection is registered.
func (p *poller) stop() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(p.evfd, one[:])
}
