package authserver

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestASMetadataURL(t *testing.T) {
	for _, c := range []struct{ iss, want string }{
		{"https://as.example", "https://as.example/.well-known/oauth-authorization-server"},
		{"https://as.example/", "https://as.example/.well-known/oauth-authorization-server"},
		{"https://as.example/tenant1", "https://as.example/.well-known/oauth-authorization-server/tenant1"},
		{"https://as.example:8443/a/b/", "https://as.example:8443/.well-known/oauth-authorization-server/a/b"},
	} {
		got, err := MetadataURL(c.iss)
		if err != nil || got != c.want {
			t.Errorf("MetadataURL(%q) = %q, %v; want %q", c.iss, got, err, c.want)
		}
	}
	for _, bad := range []string{"http://as.example", "https://as.example?x", "https://as.example#f", "https://u@as.example", "as.example", "https:opaque"} {
		if _, err := MetadataURL(bad); err == nil {
			t.Errorf("MetadataURL(%q) accepted", bad)
		}
	}
}

func TestSEC11_PublicAddr(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"93.184.216.34", true},
		{"2606:2800:220:1:248:1893:25c8:1946", true},
		{"127.0.0.1", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"100.64.0.1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"fc00::1", false},
		{"fe80::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"64:ff9b::a00:1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
	} {
		if got := publicAddr(netip.MustParseAddr(c.addr)); got != c.ok {
			t.Errorf("publicAddr(%s) = %t, want %t", c.addr, got, c.ok)
		}
		err := refusePrivate("tcp", netip.AddrPortFrom(netip.MustParseAddr(c.addr), 443).String(), nil)
		if (err == nil) != c.ok {
			t.Errorf("refusePrivate(%s) = %v", c.addr, err)
		}
	}
}

type bodyTransport string

func (b bodyTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(string(b)))}, nil
}

func TestSEC11_BodyCap(t *testing.T) {
	for _, c := range []struct {
		n  int
		ok bool
	}{{maxFetchBytes, true}, {maxFetchBytes + 1, false}} {
		resp, err := cappedTransport{bodyTransport(strings.Repeat("x", c.n))}.RoundTrip(nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if c.ok && (err != nil || len(b) != c.n) {
			t.Errorf("%d bytes: read %d, %v", c.n, len(b), err)
		}
		if !c.ok && !errors.Is(err, errBodyTooLarge) {
			t.Errorf("%d bytes: err = %v", c.n, err)
		}
	}
}

func TestSEC11_FetchClient(t *testing.T) {
	// A foreign RoundTripper cannot be guarded.
	if _, _, err := fetchClient(&http.Client{Transport: bodyTransport("")}, false); err == nil {
		t.Error("fetchClient accepted an unguardable transport")
	}
	if _, _, err := fetchClient(&http.Client{Transport: bodyTransport("")}, true); err != nil {
		t.Error(err)
	}
	c, tr, err := fetchClient(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Proxy != nil || c.Timeout != fetchTimeout || c.CheckRedirect == nil {
		t.Errorf("guarded client: proxy set %t, timeout %v", tr.Proxy != nil, c.Timeout)
	}
}
