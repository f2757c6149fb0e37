package main

import (
	"net/url"
	"testing"
)

// A node's view of the cluster: the store's slot 7000 is served by n2,
// whose replica n5 is in sync; n3 (taken for failing) also claims it, as
// a failed primary keeps its slots in the view until its replica took
// over; bracketed slots are being moved.
const nodesText = `n4 127.0.0.1:7004@17004 slave n1 0 1 4 connected
n2 127.0.0.1:7002@17002,host2 master - 0 1 2 connected 5461-10922 [5460->-n1]
n3 127.0.0.1:7003@17003 master,fail - 0 1 3 disconnected 6000-8000 16383
n5 127.0.0.1:7005@17005 slave n2 0 1 5 connected
n6 127.0.0.1:7006@17006 slave,fail n2 0 1 6 connected
n1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
`

func TestShardOf(t *testing.T) {
	nodes := parseClusterNodes(nodesText)
	if len(nodes) != 6 {
		t.Fatalf("%d nodes, want 6", len(nodes))
	}
	if n := nodes[1]; n.addr != "127.0.0.1:7002" || len(n.slots) != 1 || n.slots[0] != [2]int{5461, 10922} {
		t.Errorf("n2: %+v", n)
	}
	if n := nodes[2]; len(n.slots) != 2 || n.slots[1] != [2]int{16383, 16383} {
		t.Errorf("n3's slots: %v", n.slots)
	}
	p, r, ok := shardOf(nodes, 7000)
	if !ok || p != "127.0.0.1:7002" || r != "127.0.0.1:7005" {
		t.Errorf("slot 7000: %q %q %v, want n2 and n5", p, r, ok)
	}
	p, r, ok = shardOf(nodes, 16383)
	if ok {
		t.Errorf("slot 16383, served by a failed primary only: %q %q", p, r)
	}
	if p, r, ok = shardOf(nodes, 0); !ok || p != "127.0.0.1:7001" || r != "127.0.0.1:7004" {
		t.Errorf("slot 0: %q %q %v, want n1 and n4", p, r, ok)
	}
}

func TestInfoAndFlatPairs(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=1,state=online,offset=9,lag=0\r\nslave1:ip=127.0.0.1,port=2,state=wait_bgsave,offset=0,lag=0\r\nmaster_repl_offset:9\r\n"
	f := infoFields(info)
	if f["role"] != "master" || f["connected_slaves"] != "2" || countOnline(f) != 1 {
		t.Errorf("fields %q: %d online, want 1", f, countOnline(f))
	}
	m := flatPairs("name\nmercure\nnum-slaves\n2\nnum-other-sentinels\n2")
	if m["name"] != "mercure" || m["num-slaves"] != "2" || m["num-other-sentinels"] != "2" {
		t.Errorf("pairs %q", m)
	}
}

// -durable is replicas=1 in the hubs' Redis URL; PostgreSQL's several
// hosts need the one that accepts writes.
func TestStoreURLs(t *testing.T) {
	if q := replicasQuery(url.Values{"master": {"mercure"}}, true); q != "master=mercure&replicas=1" {
		t.Errorf("durable: %q", q)
	}
	if q := replicasQuery(url.Values{"stream": {clusterKey}}, false); q != "stream=%7Bmercure%7D" {
		t.Errorf("not durable: %q", q)
	}
	a, b := &server{port: 5432}, &server{port: 5433}
	if u := postgresURL(a); u != "postgres://postgres@127.0.0.1:5432/postgres" {
		t.Errorf("one server: %q", u)
	}
	if u := postgresURL(a, b); u != "postgres://postgres@127.0.0.1:5432,127.0.0.1:5433/postgres?target_session_attrs=read-write" {
		t.Errorf("primary and standby: %q", u)
	}
}

// SENTINEL REPLICAS, as redis-cli prints it to a pipe: each replica's
// fields one after the other, name first.
func TestReplicaPriority(t *testing.T) {
	text := "name\n127.0.0.1:7002\nip\n127.0.0.1\nport\n7002\nflags\nslave\nslave-priority\n100\nslave-repl-offset\n9\n" +
		"name\n127.0.0.1:7003\nip\n127.0.0.1\nport\n7003\nflags\nslave\nslave-priority\n1\nslave-repl-offset\n9"
	for addr, want := range map[string]string{"127.0.0.1:7002": "100", "127.0.0.1:7003": "1", "127.0.0.1:7004": ""} {
		if got := replicaPriority(text, addr); got != want {
			t.Errorf("%s: priority %q, want %q", addr, got, want)
		}
	}
}

// A command as Redis reads it: an array of bulk strings.
func TestRespCommand(t *testing.T) {
	if got, want := string(respCommand("CLIENT", "PAUSE", "60000", "WRITE")), "*4\r\n$6\r\nCLIENT\r\n$5\r\nPAUSE\r\n$5\r\n60000\r\n$5\r\nWRITE\r\n"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
