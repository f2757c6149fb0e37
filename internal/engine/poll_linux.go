package engine

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// poller watches the connections of detached streams with epoll, from one
// goroutine per engine: an SSE client sends nothing once its request is
// sent, so that its connection becomes readable (or hung up) when it
// leaves. It also reports when the connection of a stream whose write
// was left unfinished (see Stream.send) can take more. Each connection is
// registered under its stream's id, never its descriptor, which the
// system reuses.
type poller struct {
	e *Engine
	// mu guards the descriptors' life: once the poller failed, dead is
	// set and they are closed, and no call uses them again.
	mu   sync.RWMutex
	dead bool
	epfd int
	evfd int // an eventfd that stops the poller (id 0)
}

// newPoller starts a poller. The caller holds e.conns.mu.
func newPoller(e *Engine) (*poller, error) {
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
	p := &poller{e: e, epfd: epfd, evfd: evfd}
	e.conns.wg.Add(1)
	go p.run()
	return p, nil
}

// errPollerDead is what a poller that failed answers.
var errPollerDead = errors.New("the connection poller failed")

// run reports the streams whose client left, or whose connection can
// take more, until stop, or until epoll fails: the poller then closes
// its descriptors and leaves the engine, which starts another for the
// streams that come next; those it watched notice gone clients when a
// write fails, and retry unfinished writes on a timer.
func (p *poller) run() {
	cs := &p.e.conns
	defer cs.wg.Done()
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			p.fail(err)
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				p.close()
				return // stop
			}
			if ev.Events&^unix.EPOLLOUT == 0 {
				cs.signalID(id, flagWritable) // room to write, and nothing else
				continue
			}
			cs.signalID(id, flagGone)
		}
	}
}

// fail retires p after epoll failed with err: the engine starts another
// poller for the streams that come next, and p's descriptors are closed
// once no call uses them, never used after (the system reuses their
// numbers for the next files opened).
func (p *poller) fail(err error) {
	cs := &p.e.conns
	p.e.log.Error("mercure: watching connections failed; a new watcher serves the next streams", "error", err)
	cs.mu.Lock()
	if cs.poller == p {
		cs.poller = nil
	}
	cs.mu.Unlock()
	p.close()
}

// close closes the descriptors, once no call can use them.
func (p *poller) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dead {
		p.dead = true
		unix.Close(p.epfd)
		unix.Close(p.evfd)
	}
}

// add watches the connection of c, once: EPOLLONESHOT, since the stream
// ends at the first event, or runs at once when it can write (see watch).
func (p *poller) add(c *connState) error {
	return p.ctl(c, unix.EPOLL_CTL_ADD, false)
}

// watch re-arms the watch on the connection of c, and makes it report
// too when the connection can take more bytes, if out. The writer
// running the stream calls it, whenever the stream waits for room, and
// once it no longer does; every report disarms the watch until then
// (EPOLLONESHOT).
func (p *poller) watch(c *connState, out bool) error {
	return p.ctl(c, unix.EPOLL_CTL_MOD, out)
}

func (p *poller) ctl(c *connState, op int, out bool) error {
	ev := unix.EpollEvent{
		Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
		Fd:     int32(uint32(c.id)),
		Pad:    int32(uint32(c.id >> 32)),
	}
	if out {
		ev.Events |= unix.EPOLLOUT
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.dead {
		return errPollerDead
	}
	if c.conn == nil {
		return unix.EpollCtl(p.epfd, op, c.fd, &ev)
	}
	rc, err := rawConn(c.conn)
	if err != nil {
		return err
	}
	var ctlErr error
	if err := rc.Control(func(fd uintptr) {
		ctlErr = unix.EpollCtl(p.epfd, op, int(fd), &ev)
	}); err != nil {
		return err
	}
	return ctlErr
}

// remove stops watching the connection of c; the caller closes it after.
func (p *poller) remove(c *connState) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.dead {
		return
	}
	if c.conn == nil {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
		return
	}
	rc, err := rawConn(c.conn)
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
}

// stop makes the poller exit, once no connection is registered.
func (p *poller) stop() {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.dead {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(p.evfd, one[:])
}

// dupSocket returns a duplicate of the descriptor of rc, close-on-exec
// and, as it shares the open file, non-blocking like rc's.
func dupSocket(rc syscall.RawConn) (int, error) {
	fd := -1
	var dupErr error
	if err := rc.Control(func(s uintptr) {
		fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	return fd, dupErr
}

// connOf returns a net.Conn on a duplicate of fd of its own: the caller
// still closes fd.
func connOf(fd int) (net.Conn, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close() // FileConn duplicates it again
	return net.FileConn(f)
}

// closeFD closes a descriptor the engine owns.
func closeFD(fd int) { _ = unix.Close(fd) }
