// Command drainbench measures what a rolling deploy looks like from the
// hub instance that stays: it opens n streams on instance A, sends A a
// SIGTERM once they are all open, and, like browsers, reconnects each
// stream that ends to instance B after the last retry it was told (else
// a browser's default of 3 s). It prints the arrivals at B per second
// and the busiest 100 ms, from the signal on.
//
//	standalone -addr 127.0.0.1:8081 -anonymous -max-connections 20000 -drain 10s & A=$!
//	standalone -addr 127.0.0.1:8082 -anonymous -max-connections 20000 &
//	go run ./internal/cmd/drainbench -n 10000 -a 127.0.0.1:8081 -b 127.0.0.1:8082 -pid $A
//
// Each process may hold 20 000 descriptors here: the streams' client ends
// live in this process, their server ends in A's.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", 10000, "streams")
	a := flag.String("a", "127.0.0.1:8081", "address of instance A, which shuts down")
	b := flag.String("b", "127.0.0.1:8082", "address of instance B, which stays")
	pid := flag.Int("pid", 0, "process id of instance A, sent SIGTERM once every stream is open")
	path := flag.String("path", "/.well-known/mercure", "hub path")
	flag.Parse()
	if *pid == 0 {
		log.Fatal("-pid is required")
	}
	procA, err := os.FindProcess(*pid)
	if err != nil {
		log.Fatal(err)
	}

	var (
		mu       sync.Mutex
		arrivals []time.Duration
		start    time.Time
		open     atomic.Int64
		wg       sync.WaitGroup
	)
	dial := func(addr string) (net.Conn, *bufio.Reader, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(c, "GET %s?match=urn%%3Aa HTTP/1.1\r\nHost: %s\r\n\r\n", *path, addr)
		br := bufio.NewReaderSize(c, 512)
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			c.Close()
			return nil, nil, fmt.Errorf("%s answered %q: %v", addr, line, err)
		}
		return c, br, nil
	}
	signalled := make(chan struct{})
	for range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, br, err := dial(*a)
			if err != nil {
				log.Fatal(err)
			}
			open.Add(1)
			retry := 3 * time.Second // a browser's default
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "0\r\n" {
					break // the end of the stream: the connection's, or the last chunk
				}
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "retry: "); ok {
					if ms, err := strconv.Atoi(v); err == nil {
						retry = time.Duration(ms) * time.Millisecond
					}
				}
			}
			c.Close()
			<-signalled
			time.Sleep(retry)
			c, _, err = dial(*b)
			if err != nil {
				log.Fatal(err)
			}
			mu.Lock()
			arrivals = append(arrivals, time.Since(start))
			mu.Unlock()
			c.Close()
		}()
	}
	for open.Load() < int64(*n) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // every stream past its headers
	start = time.Now()
	// Windows sends no SIGTERM to another process: this fails there.
	if err := procA.Signal(syscall.SIGTERM); err != nil {
		log.Fatalf("SIGTERM to instance A (-pid %d): %v", *pid, err)
	}
	close(signalled)
	wg.Wait()

	perSecond := map[int]int{}
	per100ms := map[int]int{}
	last := 0
	for _, t := range arrivals {
		perSecond[int(t/time.Second)]++
		per100ms[int(t/(100*time.Millisecond))]++
		last = max(last, int(t/time.Second))
	}
	peak100 := 0
	for _, c := range per100ms {
		peak100 = max(peak100, c)
	}
	peakSec := 0
	fmt.Fprintf(os.Stdout, "%d reconnections at B; per second since A's SIGTERM:\n", len(arrivals))
	for s := 0; s <= last; s++ {
		fmt.Printf("  %3d s  %d\n", s, perSecond[s])
		peakSec = max(peakSec, perSecond[s])
	}
	fmt.Printf("peak: %d in one second, %d in one 100 ms; all within %d s\n", peakSec, peak100, last+1)
}
