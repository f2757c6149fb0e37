package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mercurekit/mercure/natsstore/natstest"
	"github.com/mercurekit/mercure/storetest"
)

// The -nats- flags are refused, before anything starts, when they make
// no sense together or name a bad address: each error names its flag and
// says why.
func TestStandalone_BadNATSEmbedFlags(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "node")
	for _, c := range []struct {
		args       []string
		flag, want string
	}{
		{[]string{"-nats-cluster", "127.0.0.1:6222"}, "-nats-cluster", "needs -nats-embed DIR"},
		{[]string{"-nats-routes", "127.0.0.1:6222"}, "-nats-routes", "needs -nats-embed DIR"},
		{[]string{"-nats-listen", "127.0.0.1:4222"}, "-nats-listen", "needs -nats-embed DIR"},
		{[]string{"-nats-replicas", "3"}, "-nats-replicas", "needs -nats-embed DIR"},
		{[]string{"-nats-wait", "1s"}, "-nats-wait", "needs -nats-embed DIR"},
		{[]string{"-nats-embed", ""}, "-nats-embed", "needs a directory"},
		{[]string{"-nats-embed", dir, "-store", "memory"}, "-store and -nats-embed", "give one of them"},
		{[]string{"-nats-embed", dir, "-store", "nats://127.0.0.1:4222"}, "-store and -nats-embed", "give one of them"},
		{[]string{"-nats-embed", dir, "-nats-cluster", "127.0.0.1:6222"}, "-nats-cluster", "needs -nats-routes"},
		{[]string{"-nats-embed", dir, "-nats-routes", "127.0.0.1:6222,127.0.0.1:6223"}, "-nats-routes", "needs -nats-cluster"},
		{[]string{"-nats-embed", dir, "-nats-cluster", "node-1", "-nats-routes", "node-2:6222"}, "-nats-cluster", "want HOST:PORT"},
		{[]string{"-nats-embed", dir, "-nats-cluster", "127.0.0.1:0", "-nats-routes", "node-2:6222"}, "-nats-cluster", "bad port"},
		{[]string{"-nats-embed", dir, "-nats-cluster", ":6222", "-nats-routes", "node-2:6222,node-3"}, "-nats-routes", `"node-3": want HOST:PORT`},
		{[]string{"-nats-embed", dir, "-nats-cluster", ":6222", "-nats-routes", "node-2:6222,:6222"}, "-nats-routes", `":6222": want HOST:PORT`},
		{[]string{"-nats-embed", dir, "-nats-cluster", "127.0.0.1:6222", "-nats-routes", "127.0.0.1:6222"}, "-nats-routes", "names only this node"},
		{[]string{"-nats-embed", dir, "-nats-listen", "4222"}, "-nats-listen", "want HOST:PORT"},
		{[]string{"-nats-embed", dir, "-nats-replicas", "0"}, "-nats-replicas", "want 1 to 5"},
		{[]string{"-nats-embed", dir, "-nats-cluster", ":6222", "-nats-routes", "a:6222,b:6222,c:6222,d:6222,e:6222,f:6222", "-nats-replicas", "6"}, "-nats-replicas", "want 1 to 5"},
		{[]string{"-nats-embed", dir, "-nats-replicas", "3"}, "-nats-replicas", "needs -nats-cluster and -nats-routes: a single node keeps one copy"},
		{[]string{"-nats-embed", dir, "-nats-cluster", "a:6222", "-nats-routes", "a:6222,b:6222", "-nats-replicas", "3"}, "-nats-replicas", "name 2 nodes"},
		{[]string{"-nats-embed", dir, "-nats-wait", "0s"}, "-nats-wait", "want a positive duration"},
	} {
		_, err := configure(append([]string{"-addr", "127.0.0.1:0"}, c.args...), slog.New(slog.DiscardHandler))
		if err == nil || !strings.HasPrefix(err.Error(), c.flag) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error of %s saying %q", c.args, err, c.flag, c.want)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused configuration made the node's directory: %v", err)
	}
}

// Bad NATS URLs are refused before any connection, saying why and
// naming the flag, without their passwords; an unreachable server is
// refused at start-up.
func TestStandalone_BadNATSURL(t *testing.T) {
	t.Parallel()
	for spec, why := range map[string]string{
		"nats://":                                             "no address",
		"tls://?tls_ca=/ca.pem":                               "no address",
		"nats://127.0.0.1:1,,127.0.0.1:2":                     `address "": want HOST:PORT`,
		"nats://::1:4222":                                     `address "::1:4222": want HOST:PORT`,
		"nats://127.0.0.1:99999":                              "want HOST:PORT",
		"nats://127.0.0.1:":                                   "want HOST:PORT",
		"nats://127.0.0.1:1/mercure":                          "names no database",
		"nats://127.0.0.1:1?replicas=0":                       "replicas=",
		"nats://127.0.0.1:1?replicas=6":                       "replicas=",
		"nats://127.0.0.1:1?replicas=x":                       "replicas=",
		"nats://127.0.0.1:1?stream=a.b":                       "stream=",
		"nats://127.0.0.1:1?stream=":                          "stream=",
		"nats://127.0.0.1:1?bogus=1":                          "unknown parameter bogus",
		"nats://127.0.0.1:1?creds=/a&nkey=/b":                 "want one",
		"nats://u:secret@127.0.0.1:1?creds=/a":                "two ways to authenticate",
		"nats://secret@127.0.0.1:1?nkey=/a":                   "two ways to authenticate",
		"nats://:secret@127.0.0.1:1":                          "without a user",
		"tls://u:secret@127.0.0.1:1?tls_cert=/c":              "go together",
		"tls://127.0.0.1:1?tls_key=/k":                        "go together",
		"nats://u:secret@127.0.0.1:1#frag":                    "fragment",
		"nats://u:secret@127.0.0.1:1?nkey=/does/not/exist":    "nkey=/does/not/exist",
		"tls://u:secret@127.0.0.1:1?tls_ca=/does/not/exist":   "rootCA",
		"nats://u:secret@127.0.0.1:1,127.0.0.1:2?stream=test": "no servers available",
		"nats://secret@127.0.0.1:1":                           "no servers available",
		"nats://127.0.0.1:1,tls://127.0.0.1:2":                "want one scheme",
		"nats://u:secret@127.0.0.1:1,nats://v:secret@h:2":     "different user information",
	} {
		_, err := configure([]string{"-addr", "127.0.0.1:0", "-store", spec}, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), why) || !strings.HasPrefix(err.Error(), "-store") {
			t.Errorf("-store %s: %v, want an error of -store saying %q", spec, err, why)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("-store %s: %v shows a password", spec, err)
		}
	}
}

// The NATS URLs of -store are taken apart as nats.go would read them,
// the credentials kept apart for every server: several addresses, IPv6
// ones, the default port, percent-encoded passwords, a token.
func TestParseNATSURL(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]natsURL{
		"nats://h:1": {servers: []string{"h:1"}, stream: "mercure"},
		"nats://h":   {servers: []string{"h:4222"}, stream: "mercure"},
		"nats://u:p%40ss%3Aw%2Frd@h:1,[::1]:2,[::1]/?stream=s_1&replicas=3": {servers: []string{"h:1", "[::1]:2", "[::1]:4222"},
			user: "u", password: "p@ss:w/rd", stream: "s_1", replicas: 3},
		"tls://tok@h:1?tls_ca=/ca.pem&tls_cert=/c.pem&tls_key=/k.pem": {tls: true, servers: []string{"h:1"}, token: "tok",
			stream: "mercure", tlsCA: "/ca.pem", tlsCert: "/c.pem", tlsKey: "/k.pem"},
		"nats://h:1?creds=/u.creds": {servers: []string{"h:1"}, stream: "mercure", creds: "/u.creds"},
		// nats.go's list of URLs.
		"nats://u:p@h:1,nats://u:p@h:2,nats://h:3?replicas=3": {servers: []string{"h:1", "h:2", "h:3"}, user: "u", password: "p",
			stream: "mercure", replicas: 3},
	} {
		got, err := parseNATSURL(spec)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		got.shown = ""
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", spec, got, want)
		}
	}
	if n, _ := parseNATSURL("tls://u:pw@h:1,h:2?replicas=3"); n.shown != "tls://u:xxxxx@h:1,h:2?replicas=3" || n.urls() != "tls://h:1,tls://h:2" {
		t.Errorf("shown as %s, connecting to %s", n.shown, n.urls())
	}
	if n, _ := parseNATSURL("nats://sometoken@h:1"); n.shown != "nats://xxxxx@h:1" {
		t.Errorf("a token shown as %s", n.shown)
	}
}

// natsStreamName returns a stream name no other test uses.
func natsStreamName() string {
	return fmt.Sprintf("standalone_%d_%d", os.Getpid(), time.Now().UnixNano())
}

// -store nats://... shares the history between hubs: an update published
// on one reaches the subscribers of the other, and is replayed from the
// stream.
func TestStandalone_NATSStore(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	a, b := twoHubs(t, srv.URL+"?stream="+natsStreamName())
	lines := subscribe(t, b+"?match=x")
	publishOK(t, a, "hello")
	want(t, lines, "data: hello")
	publishOK(t, a, "again")
	lines = subscribe(t, b+"?match=x&last_event_id=earliest")
	want(t, lines, "data: hello")
	want(t, lines, "data: again")
}

// publishOK publishes data on topic x to the hub at u, and fails the test
// unless the hub acknowledges it.
func publishOK(t *testing.T, u, data string) {
	t.Helper()
	res, err := http.PostForm(u, url.Values{"topic": {"x"}, "data": {data}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("publish %s: %d", data, res.StatusCode)
	}
}

// -store nats://A,B,C?replicas=3 keeps the stream on the three servers
// of a NATS cluster: the stream leader's death (SIGKILL) loses nothing
// acknowledged, and the hubs, moved to the other servers, publish again
// once the two survivors elected a leader.
func TestStandalone_NATSClusterStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: a leader election takes seconds")
	}
	ss := natstest.StartCluster(t)
	stream := natsStreamName()
	a, b := twoHubs(t, natstest.URLs(ss...)+"?replicas=3&stream="+stream)
	js, err := jetstream.New(natstest.Connect(t, ss...))
	if err != nil {
		t.Fatal(err)
	}
	testFailover(t, a, b, func() func() {
		ctx, cancel := context.WithTimeout(context.Background(), natstest.Patient)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info := st.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil {
			t.Fatalf("stream %s: %d replicas, cluster %+v; want 3", stream, info.Config.Replicas, info.Cluster)
		}
		for _, s := range ss {
			if s.Name == info.Cluster.Leader {
				s.Kill()
				return func() {}
			}
		}
		t.Fatalf("stream leader %q is none of the servers", info.Cluster.Leader)
		return nil
	})
}

// -store takes credentials in the URL's user information, percent-encoded,
// and tls:// with tls_ca=FILE checks the server's certificate against
// that CA: a hub connects to a server that demands both, and is refused,
// at start-up, with a wrong password (not shown) or without the CA.
func TestStandalone_NATSCredentialsAndTLS(t *testing.T) {
	t.Parallel()
	bin := natstest.Binary(t)
	dir := t.TempDir()
	ca := writeTLSFiles(t, dir)
	port := storetest.Port(t)
	const pass = "p@ss:w/rd"
	cmd := exec.Command(bin, "-js", "-sd", filepath.Join(dir, "js"), "-a", "127.0.0.1", "-p", strconv.Itoa(port),
		"--user", "hub", "--pass", pass, "--tls", "--tlscert", filepath.Join(dir, "server.pem"), "--tlskey", filepath.Join(dir, "server-key.pem"))
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("nats-server:\n%s", b)
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	storetest.WaitFor(t, "nats-server to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	user := url.UserPassword("hub", pass).String()
	for spec, why := range map[string]string{
		"tls://" + url.UserPassword("hub", "wrong-secret").String() + "@" + addr + "?tls_ca=" + ca: "uthorization",
		"tls://" + user + "@" + addr: "certificate",
	} {
		_, err := configure([]string{"-addr", "127.0.0.1:0", "-store", spec}, slog.New(slog.DiscardHandler))
		if err == nil || !strings.HasPrefix(err.Error(), "-store") || !strings.Contains(err.Error(), why) {
			t.Errorf("-store %s: %v, want an error of -store saying %q", spec, err, why)
		} else if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "w%2Frd") {
			t.Errorf("-store %s: %v shows a password", spec, err)
		}
	}
	a, b := twoHubs(t, "tls://"+user+"@"+addr+"?tls_ca="+ca+"&stream="+natsStreamName())
	lines := subscribe(t, b+"?match=x")
	publishOK(t, a, "over TLS")
	want(t, lines, "data: over TLS")
}

// writeTLSFiles writes, in dir, a CA (returning its file's path) and a
// certificate it signed for 127.0.0.1 with its key: server.pem and
// server-key.pem.
func writeTLSFiles(t *testing.T, dir string) (caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("server.pem", "CERTIFICATE", srvDER)
	write("server-key.pem", "PRIVATE KEY", keyDER)
	return write("ca.pem", "CERTIFICATE", caDER)
}
