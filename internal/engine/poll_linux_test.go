package engine

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// A poller whose epoll failed leaves the engine, which starts another for
// the next streams, and never touches its descriptors again: their
// numbers go to the next files the process opens (issue 23: after an
// EpollWait error the descriptor was closed but still used).
func TestFailedPollerNeverUsesItsDescriptors(t *testing.T) {
	e := newEngine(t, nil)
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	p := &poller{e: e, epfd: epfd, evfd: evfd}
	e.conns.mu.Lock()
	e.conns.poller = p
	e.conns.mu.Unlock()

	p.fail(errors.New("injected epoll failure"))
	e.conns.mu.Lock()
	still := e.conns.poller == p
	e.conns.mu.Unlock()
	if still {
		t.Fatal("the failed poller still serves the engine")
	}
	// The next files opened take the freed numbers.
	var reused []int
	for range 2 {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		reused = append(reused, fd)
	}
	if !(reused[0] == epfd || reused[0] == evfd || reused[1] == epfd || reused[1] == evfd) {
		t.Skipf("the process did not reuse the poller's descriptors (%d, %d got %v): nothing to check", epfd, evfd, reused)
	}
	p.stop()
	var buf [8]byte
	for _, fd := range reused {
		if _, err := unix.Read(fd, buf[:]); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("the failed poller wrote to descriptor %d, now another file's (read: %v)", fd, err)
		}
	}
}
