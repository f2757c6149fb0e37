// Command broadcaster is the plain baseline that the hub's delivery cost
// is measured against (see docs/performance.md): a server that takes
// the launch flags of examples/standalone (and ignores all but -addr),
// subscribes with GET ?match=T (exact topics only, no authorization, no
// history), publishes with POST topic=T&data=D, and gives each
// subscriber one goroutine that writes what is pending for it. It is the
// obvious ~100-line Go broadcaster, written to be fast, not to be a hub.
//
//	go build -o /tmp/broadcaster ./internal/cmd/broadcaster
//	loadgen -reader epoll -subs 1000 -scenarios fanout -- /tmp/broadcaster
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

type sub struct {
	mu      sync.Mutex
	pending []byte
	ready   chan struct{}
}

type server struct {
	mu     sync.RWMutex
	topics map[string]map[*sub]struct{}
	seq    atomic.Uint64
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.subscribe(w, r)
	case http.MethodPost:
		s.publish(w, r)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *server) subscribe(w http.ResponseWriter, r *http.Request) {
	topics := r.URL.Query()["match"]
	if len(topics) == 0 {
		http.Error(w, "no match", http.StatusBadRequest)
		return
	}
	c := &sub{ready: make(chan struct{}, 1)}
	s.mu.Lock()
	for _, t := range topics {
		if s.topics[t] == nil {
			s.topics[t] = make(map[*sub]struct{})
		}
		s.topics[t][c] = struct{}{}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, t := range topics {
			delete(s.topics[t], c)
		}
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	var buf []byte
	for {
		select {
		case <-c.ready:
		case <-r.Context().Done():
			return
		}
		c.mu.Lock()
		buf, c.pending = c.pending, buf[:0]
		c.mu.Unlock()
		if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
			return
		}
	}
}

func (s *server) publish(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := strconv.FormatUint(s.seq.Add(1), 10)
	ev := []byte("id: " + id + "\ndata: " + strings.ReplaceAll(r.PostForm.Get("data"), "\n", "\ndata: ") + "\n\n")
	s.mu.RLock()
	for _, t := range r.PostForm["topic"] {
		for c := range s.topics[t] {
			c.mu.Lock()
			c.pending = append(c.pending, ev...)
			c.mu.Unlock()
			select {
			case c.ready <- struct{}{}:
			default:
			}
		}
	}
	s.mu.RUnlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(id))
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	for _, name := range []string{"hub-url", "issuer", "publisher-jwks", "subscriber-jwks", "cookie", "cors-origins", "history", "store", "metrics-addr", "drain", "log-level", "max-connections"} {
		flag.String(name, "", "ignored")
	}
	for _, name := range []string{"anonymous", "subscriptions", "insecure-publish", "low-memory", "legacy-clients", "debugger", "playground"} {
		flag.Bool(name, false, "ignored")
	}
	flag.Parse()
	srv := &http.Server{Addr: *addr, Handler: &server{topics: make(map[string]map[*sub]struct{})}}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
		<-stop
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
