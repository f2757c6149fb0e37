//go:build unix

package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mercurekit/mercure/storetest"
)

// syncBuffer is a log destination that a test reads while the server
// writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// SIGHUP reloads the certificate without ending anything; a pair that
// fails to load keeps the one served, and says why.
func TestStandalone_TLSReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	ca1 := filepath.Join(t.TempDir(), "ca1.pem")
	if err := os.Rename(writeTLSFiles(t, dir), ca1); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	s, err := configure([]string{"-addr", "127.0.0.1:0", "-tls-cert", certFile, "-tls-key", keyFile}, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln, log) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	metadata := "https://" + ln.Addr().String() + "/.well-known/oauth-protected-resource/.well-known/mercure"
	// served reports whether a new connection trusting only caFile is
	// served.
	served := func(caFile string) bool {
		res, err := tlsClient(t, caFile, false).Get(metadata)
		if err != nil {
			return false
		}
		res.Body.Close()
		return true
	}
	// waitLog waits for the n-th line holding msg.
	waitLog := func(msg string, n int) {
		t.Helper()
		storetest.WaitFor(t, "the log line "+msg, func() bool { return strings.Count(logs.String(), msg) >= n })
	}
	if !served(ca1) {
		t.Fatal("the first certificate is not served")
	}

	ca2 := writeTLSFiles(t, dir) // a new CA and certificate, same files
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("TLS certificate reloaded", 1)
	if served(ca1) || !served(ca2) {
		t.Fatal("after SIGHUP: want the new certificate served, not the old one")
	}

	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog("was not reloaded", 1)
	if !served(ca2) {
		t.Fatal("a pair that fails to load replaced the one served")
	}
	if !strings.Contains(logs.String(), keyFile) {
		t.Errorf("the failed reload does not name the key file:\n%s", logs.String())
	}
}
