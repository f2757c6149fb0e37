package main

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// natsStream is the stream of the hubs' store: the standalone's default.
const natsStream = "mercure"

// natsBinary returns the nats-server program: bin, or the one
// MERCURE_TEST_NATS names (as the tests find it), or nats-server on PATH.
func natsBinary(bin string) string {
	if bin == "" {
		bin = os.Getenv("MERCURE_TEST_NATS")
	}
	if bin == "" || bin == "1" {
		bin = "nats-server"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		fatalf("nats-server not found (-nats-server, MERCURE_TEST_NATS): %v", err)
	}
	return p
}

// natsNode is a nats-server of the run's own cluster, with its
// monitoring port, which tells which server leads the stream.
type natsNode struct {
	*server
	monitor int
}

// startNATS starts three nats-servers with JetStream (file storage, each
// in its own directory under dir), routed to each other, and waits until
// they elected a JetStream leader. The hubs' URL names the three and
// keeps the stream on the three (replicas=3): an update is acknowledged
// once two have it. The store's event kills the stream's leader.
func startNATS(dir, bin string) *storeSet {
	nodes := make([]*natsNode, 3)
	var routes []string
	for i := range nodes {
		name := fmt.Sprintf("nats %d", i+1)
		s := &server{name: name, port: freePort(), dir: serverDir(dir, name), crash: syscall.SIGKILL}
		n := &natsNode{server: s, monitor: freePort()}
		s.argv = []string{bin, "-js", "-sd", filepath.Join(s.dir, "jetstream"), "-a", "127.0.0.1", "-p", strconv.Itoa(s.port),
			"-m", strconv.Itoa(n.monitor), "-n", fmt.Sprintf("n%d", i+1), "--cluster_name", "clusterload",
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", freePort())}
		nodes[i] = n
	}
	for _, n := range nodes {
		_, cluster, _ := strings.Cut(n.argv[len(n.argv)-1], "://")
		routes = append(routes, "nats-route://"+cluster)
	}
	st := &storeSet{kind: kindNATS}
	var addrs []string
	for _, n := range nodes {
		n.argv = append(n.argv, "--routes", strings.Join(routes, ","))
		n.start()
		st.all = append(st.all, n.server)
		addrs = append(addrs, n.addr())
	}
	waitAll("the NATS servers' JetStream to be ready", 60*time.Second, func() bool {
		for _, n := range nodes {
			if !n.healthy() {
				return false
			}
		}
		return true
	})
	st.url = "nats://" + strings.Join(addrs, ",") + "?replicas=3"
	st.leader = func() *server {
		for _, n := range nodes {
			if leader := n.streamLeader(); leader != "" {
				for i, m := range nodes {
					if leader == fmt.Sprintf("n%d", i+1) {
						log.Printf("%s leads the stream", m.name)
						return m.server
					}
				}
			}
		}
		fatalf("no NATS server names the stream's leader")
		return nil
	}
	return st
}

var monitorClient = &http.Client{Timeout: 2 * time.Second}

// healthy reports whether the server's JetStream accepts requests.
func (n *natsNode) healthy() bool {
	resp, err := monitorClient.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.monitor))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// streamLeader returns the name of the stream's leader as the server
// knows it, "" if it does not.
func (n *natsNode) streamLeader() string {
	resp, err := monitorClient.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz?accounts=true&streams=true", n.monitor))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name    string `json:"name"`
				Cluster struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if json.NewDecoder(resp.Body).Decode(&jsz) != nil {
		return ""
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == natsStream {
				return s.Cluster.Leader
			}
		}
	}
	return ""
}

// embeddedNATS is the store of hubs that each embed a NATS node: no
// server; each hub gets -nats-embed, its node's directory under dir, and
// the cluster addresses of all the nodes. The nodes keep the stream on
// three of them (the standalone's default with routes).
func embeddedNATS(dir string) *storeSet {
	var cluster []string
	return &storeSet{kind: kindNATSEmbed, hubArgs: func(i, n int) []string {
		for len(cluster) < n {
			cluster = append(cluster, fmt.Sprintf("127.0.0.1:%d", freePort()))
		}
		return []string{"-nats-embed", filepath.Join(dir, fmt.Sprintf("node-%d", i+1)),
			"-nats-cluster", cluster[i], "-nats-routes", strings.Join(cluster, ",")}
	}}
}
