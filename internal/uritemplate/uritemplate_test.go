package uritemplate

import (
	"net/url"
	"testing"
)

// Every example of ACT-5.
func TestEscape(t *testing.T) {
	cases := map[string]string{
		"https://example.com/books/:id": "https%3A%2F%2Fexample.com%2Fbooks%2F%3Aid",
		"https://example.com/a%20b":     "https%3A%2F%2Fexample.com%2Fa%2520b",
		"*":                             "%2A",
		"café":                          "caf%C3%A9",
		"urn:uuid:6f0d2c1e-8a4b-4c3d-9e2f-1a2b3c4d5e6f": "urn%3Auuid%3A6f0d2c1e-8a4b-4c3d-9e2f-1a2b3c4d5e6f",
		"AZaz09-._~":           "AZaz09-._~",
		"/:?#[]@!$&'()*+,;= %": "%2F%3A%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%20%25",
		"":                     "",
	}
	for in, want := range cases {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	topic := "/.well-known/mercure/subscriptions/urlpattern/" + Escape("https://example.com/books/:id") + "/" + Escape("urn:uuid:6f0d2c1e-8a4b-4c3d-9e2f-1a2b3c4d5e6f")
	if want := "/.well-known/mercure/subscriptions/urlpattern/https%3A%2F%2Fexample.com%2Fbooks%2F%3Aid/urn%3Auuid%3A6f0d2c1e-8a4b-4c3d-9e2f-1a2b3c4d5e6f"; topic != want {
		t.Errorf("topic %q, want %q", topic, want)
	}
}

func TestEscapeNoAllocWhenUnreserved(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Escape("abc-DEF_123.~") }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzEscape: the output holds only unreserved characters and escapes, and
// one percent-decoding gives the input back.
func FuzzEscape(f *testing.F) {
	f.Add("https://example.com/a%20b")
	f.Add("café*")
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		for i := 0; i < len(out); i++ {
			if !unreserved(out[i]) && out[i] != '%' {
				t.Fatalf("Escape(%q) = %q holds %q", s, out, out[i])
			}
		}
		back, err := url.PathUnescape(out)
		if err != nil || back != s {
			t.Fatalf("PathUnescape(Escape(%q)) = %q, %v", s, back, err)
		}
	})
}
