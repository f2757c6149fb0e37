package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// -debugger serves the debugger at the hub path followed by /debug/, and
// the home page links to it; without it nothing of the debugger answers.
// -playground hands its page a token (and implies -debugger).
func TestStandalone_DebuggerFlags(t *testing.T) {
	get := func(t *testing.T, method, u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, c := range []struct {
		flags              []string
		page, token, asset int
		link               bool
	}{
		{nil, 404, 404, 404, false},
		{[]string{"-debugger"}, 200, 404, 200, true},
		{[]string{"-playground"}, 200, 200, 200, true},
	} {
		d := startDebuggerServer(t, append([]string{"-insecure-publish"}, c.flags...)...)
		if status, _ := get(t, http.MethodGet, d.base+"/.well-known/mercure/debug/"); status != c.page {
			t.Errorf("%v: GET the page: %d, want %d", c.flags, status, c.page)
		}
		if status, _ := get(t, http.MethodGet, d.base+"/.well-known/mercure/debug/app.js"); status != c.asset {
			t.Errorf("%v: GET app.js: %d, want %d", c.flags, status, c.asset)
		}
		if status, body := get(t, http.MethodPost, d.base+"/.well-known/mercure/debug/token"); status != c.token {
			t.Errorf("%v: POST token: %d %s, want %d", c.flags, status, body, c.token)
		}
		if _, home := get(t, http.MethodGet, d.base+"/"); strings.Contains(home, `href="/.well-known/mercure/debug/"`) != c.link {
			t.Errorf("%v: the home page links to the debugger: %v, want %v", c.flags, !c.link, c.link)
		}
	}
}
