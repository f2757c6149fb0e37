package mercure_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/testwait"
)

// Black-box tests of the subscribe side (the SUB requirements of
// docs/requirements.md); matcher_test.go tests the matcher types with
// these helpers. Absence of delivery is checked without sleeping: the
// probe update is published, then a marker update the stream does match,
// and the next event must be the marker.

// subMarker is a topic every probe stream also subscribes to.
const subMarker = "urn:mercure-test:marker"

// subFor returns th bound to the (sub)test t, so that failures of its
// helpers are reported by the test that called them.
func subFor(th *testHub, t *testing.T) *testHub {
	c := *th
	c.t = t
	return &c
}

// subEnc percent-encodes s as URLSearchParams does.
func subEnc(s string) string { return url.QueryEscape(s) }

// subPublishBody is a publish body with the given topics and data.
func subPublishBody(data string, topics ...string) string {
	var b strings.Builder
	for _, t := range topics {
		b.WriteString("topic=" + subEnc(t) + "&")
	}
	b.WriteString("data=" + subEnc(data))
	return b.String()
}

// subReceives reports whether a fresh stream subscribed with the raw query
// q (plus an exact matcher on subMarker) receives an update published on
// topics. It fails the test when the update arrives more than once, or when
// replaying it from history decides otherwise than live delivery did: the
// matchers apply to both (REC-5).
func subReceives(t *testing.T, th *testHub, q string, topics ...string) bool {
	t.Helper()
	th = subFor(th, t)
	q += "&match=" + subEnc(subMarker)
	cursor := th.mustPost(subPublishBody("cursor", subMarker))
	s := th.subscribe(q)
	defer s.close()
	live := subProbe(t, th, s, topics...)

	r := th.subscribe(q, "Last-Event-ID", cursor)
	defer r.close()
	replayed := false
	switch ev := r.next(t); ev.Data {
	case "marker":
	case "probe":
		replayed = true
		if ev := r.next(t); ev.Data != "marker" {
			t.Fatalf("replay: after the probe got %+v, want the marker (was the probe replayed twice?)", ev)
		}
	default:
		t.Fatalf("replay: unexpected event %+v", ev)
	}
	if replayed != live {
		t.Errorf("?%s and topics %q: delivered live = %v but replayed = %v", q, topics, live, replayed)
	}
	return live
}

// subProbe publishes a probe update on topics, then the marker, and reports
// whether the probe reached s (exactly once, before the marker).
func subProbe(t *testing.T, th *testHub, s *subscription, topics ...string) bool {
	t.Helper()
	th.mustPost(subPublishBody("probe", topics...))
	th.mustPost(subPublishBody("marker", subMarker))
	switch ev := s.next(t); ev.Data {
	case "marker":
		return false
	case "probe":
	default:
		t.Fatalf("unexpected event %+v", ev)
	}
	if ev := s.next(t); ev.Data != "marker" {
		t.Fatalf("after the probe got %+v, want the marker (was the probe delivered twice?)", ev)
	}
	return true
}

// subStatus sends a subscribe request and returns its status; a stream that
// opens is closed at once.
func subStatus(th *testHub, method, q, body string, header ...string) int {
	s, res := th.trySubscribe(method, q, body, header...)
	if s != nil {
		s.close()
		return http.StatusOK
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// subRawStream opens a GET stream and returns its response once the headers
// have arrived. The request is abandoned after testwait.Deadline, so that
// a missing event fails the test instead of hanging it.
func subRawStream(t *testing.T, th *testHub, q string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, th.endpoint()+"?"+q, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("subscribe %q: no response headers before any event: %v", q, err)
	}
	t.Cleanup(func() {
		cancel()
		res.Body.Close()
	})
	return res
}

func TestSUB1_GETSubscribes(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s, res := th.trySubscribe(http.MethodGet, "match="+subEnc("urn:x")+"&match="+subEnc(subMarker), "")
	if s == nil {
		t.Fatalf("GET: status %d, want 200", res.StatusCode)
	}
	if !subProbe(t, th, s, "urn:x") {
		t.Fatal("GET stream did not receive an update on its topic")
	}
}

func TestSUB2_QUERYWithFormBody(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s, res := th.trySubscribe("QUERY", "", "match="+subEnc("urn:x")+"&match_urlpattern="+subEnc("/books/:id")+"&match="+subEnc(subMarker))
	if s == nil {
		t.Fatalf("QUERY: status %d, want 200", res.StatusCode)
	}
	if !subProbe(t, th, s, "urn:x") {
		t.Fatal("QUERY stream did not receive an update selected by its exact body matcher")
	}
	if !subProbe(t, th, s, "https://example.com/books/1") {
		t.Fatal("QUERY stream did not receive an update selected by its pattern body matcher")
	}
	if subProbe(t, th, s, "urn:y") {
		t.Fatal("QUERY stream received an update none of its matchers selects")
	}
}

func TestSUB2_QUERYBodyMediaType(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	body := "match=" + subEnc("urn:x")
	tests := []struct {
		contentType string
		ok          bool
	}{
		{"application/x-www-form-urlencoded", true},
		{"application/x-www-form-urlencoded; charset=utf-8", true},
		{"Application/X-WWW-Form-URLEncoded", true}, // media types are case-insensitive
		{"application/json", false},
		{"text/plain", false},
		{"multipart/form-data; boundary=x", false},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			th := subFor(th, t)
			b := body
			if tt.contentType == "application/json" {
				b = `{"match":"urn:x"}`
			}
			got := subStatus(th, "QUERY", "", b, "Content-Type", tt.contentType)
			switch {
			case tt.ok && got != http.StatusOK:
				t.Errorf("status %d, want 200", got)
			case !tt.ok && got != http.StatusUnsupportedMediaType && got != http.StatusBadRequest:
				t.Errorf("status %d, want 415 (or 400)", got)
			}
		})
	}
}

func TestSUB2_BodyPairsFollowTheSameRules(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	tests := []struct{ name, body string }{
		{"reserved name", "Match=urn%3Ax"},
		{"unsupported type", "match_regex=x"},
		{"invalid UTF-8", "match=%FF"},
		{"control character", "match=a%00b"},
		{"format character", "match=a%E2%80%8Bb"},
		{"bad pattern", "match_urlpattern=" + subEnc("https://example.com/(")},
		{"empty value", "match="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := subFor(th, t)
			// The query alone would be a valid subscription.
			if got := subStatus(th, "QUERY", "match="+subEnc("urn:ok"), tt.body); got != http.StatusBadRequest {
				t.Errorf("body %q: status %d, want 400", tt.body, got)
			}
		})
	}
}

func TestSUB3_QueryAndBodyMatchersAreUnited(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s, res := th.trySubscribe("QUERY", "match="+subEnc("urn:q"), "match="+subEnc("urn:b")+"&match="+subEnc(subMarker))
	if s == nil {
		t.Fatalf("status %d, want 200", res.StatusCode)
	}
	if !subProbe(t, th, s, "urn:q") {
		t.Error("the query matcher is not active")
	}
	if !subProbe(t, th, s, "urn:b") {
		t.Error("the body matcher is not active")
	}
	if subProbe(t, th, s, "urn:other") {
		t.Error("received an update neither matcher selects")
	}
}

func TestSUB3_LastEventIDPrecedence(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	for _, id := range []string{"c1", "c2", "c3", "c4"} {
		th.mustPost("topic=urn%3Ah&id=" + id + "&data=" + id)
	}
	tests := []struct {
		name                  string
		method                string
		header, q, body       string // cursors; "" means absent
		wantCursor, wantFirst string // Mercure-Last-Event-ID, first replayed id
	}{
		{"header beats query and body", "QUERY", "c1", "c2", "c3", "c1", "c2"},
		{"header beats query", http.MethodGet, "c1", "c2", "", "c1", "c2"},
		{"header beats body", "QUERY", "c1", "", "c3", "c1", "c2"},
		{"query beats body", "QUERY", "", "c2", "c3", "c2", "c3"},
		{"query alone", http.MethodGet, "", "c2", "", "c2", "c3"},
		{"body alone", "QUERY", "", "", "c3", "c3", "c4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := subFor(th, t)
			q := "match=" + subEnc("urn:h")
			if tt.q != "" {
				q += "&last_event_id=" + tt.q
			}
			var body string
			if tt.body != "" {
				body = "last_event_id=" + tt.body
			}
			var hdr []string
			if tt.header != "" {
				hdr = []string{"Last-Event-ID", tt.header}
			}
			s, res := th.trySubscribe(tt.method, q, body, hdr...)
			if s == nil {
				t.Fatalf("status %d, want 200", res.StatusCode)
			}
			defer s.close()
			if got := s.header("Mercure-Last-Event-ID"); got != tt.wantCursor {
				t.Errorf("Mercure-Last-Event-ID = %q, want %q", got, tt.wantCursor)
			}
			if ev := s.next(t); ev.ID != tt.wantFirst {
				t.Errorf("first replayed event %q, want %q", ev.ID, tt.wantFirst)
			}
		})
	}
}

func TestSUB5_WHATWGFormParsing(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	tests := []struct {
		name  string
		query string // raw
		topic string
		want  bool
	}{
		{"malformed escape stays literal", "match=a%zz", "a%zz", true},
		{"lone percent stays literal", "match=100%", "100%", true},
		{"percent before one hex digit stays literal", "match=a%4", "a%4", true},
		{"semicolon is not a separator", "match=a;b", "a;b", true},
		{"semicolon does not split off the rest", "match=a;b", "a", false},
		{"encoded semicolon", "match=a%3Bb", "a;b", true},
		{"plus is a space", "match=a+b", "a b", true},
		{"plus is not a plus", "match=a+b", "a+b", false},
		{"encoded plus is a plus", "match=a%2Bb", "a+b", true},
		{"value cut at the first equals sign", "match=a=b", "a=b", true},
		{"encoded name", "m%61tch=urn%3Ax", "urn:x", true},
		{"encoded pattern name", "match_url%70attern=%2Fbooks%2F%3Aid", "/books/7", true},
		{"lowercase escapes", "match=urn%3ax%2fy", "urn:x/y", true},
		{"empty pieces are skipped", "&&match=urn%3Ax&&", "urn:x", true},
		{"multibyte UTF-8", "match=urn%3A%C3%A9", "urn:é", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := subReceives(t, th, tt.query, tt.topic); got != tt.want {
				t.Errorf("?%s and topic %q: delivered = %v, want %v", tt.query, tt.topic, got, tt.want)
			}
		})
	}
}

func TestSUB6_MatcherNamesAndMixes(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	mixed := "match=https%3A%2F%2Fexample.com%2Ffoo&match=bar&match_urlpattern=https%3A%2F%2Fexample.com%2Fbar%2F%3Aid&match_exact=urn%3Ae"
	tests := []struct {
		name  string
		query string
		topic string
		want  bool
	}{
		{"match is exact", "match=urn%3Ae", "urn:e", true},
		{"match_exact is exact", "match_exact=urn%3Ae", "urn:e", true},
		{"match_urlpattern is a pattern", "match_urlpattern=%2Fbooks%2F%3Aid", "/books/1", true},
		{"exact value with pattern syntax is literal", "match=https%3A%2F%2Fexample.com%2Fbar%2F%3Aid", "https://example.com/bar/:id", true},
		{"exact value with pattern syntax is not a pattern", "match=https%3A%2F%2Fexample.com%2Fbar%2F%3Aid", "https://example.com/bar/1", false},
		{"match_exact value is not a pattern", "match_exact=https%3A%2F%2Fexample.com%2Fbar%2F%3Aid", "https://example.com/bar/1", false},
		{"mix: absolute exact", mixed, "https://example.com/foo", true},
		{"mix: relative exact", mixed, "bar", true},
		{"mix: pattern", mixed, "https://example.com/bar/1", true},
		{"mix: match_exact", mixed, "urn:e", true},
		{"mix: none matches the pattern's prefix", mixed, "https://example.com/bar", false},
		{"mix: none matches another topic", mixed, "foo", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := subReceives(t, th, tt.query, tt.topic); got != tt.want {
				t.Errorf("?%s and topic %q: delivered = %v, want %v", tt.query, tt.topic, got, tt.want)
			}
		})
	}
}

func TestSUB7_ReservedMatchPrefix(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	rejected := []string{
		"Match", "MATCH", "MATCH_exact", "match_Exact", "match_URLPattern", "Match_urlpattern",
		"matches", "matching", "match_", "match_regex", "match_exact_", "match_urlpatterns",
		"match-exact", "match exact", "mAtCh",
	}
	for _, name := range rejected {
		t.Run(name, func(t *testing.T) {
			th := subFor(th, t)
			q := subEnc(name) + "=" + subEnc("urn:x") + "&match=" + subEnc("urn:ok")
			if got := subStatus(th, http.MethodGet, q, ""); got != http.StatusBadRequest {
				t.Errorf("?%s: status %d, want 400", q, got)
			}
			bare := subEnc(name) + "&match=" + subEnc("urn:ok") // name without "="
			if got := subStatus(th, http.MethodGet, bare, ""); got != http.StatusBadRequest {
				t.Errorf("?%s: status %d, want 400", bare, got)
			}
		})
	}

	// Names outside the prefix are not matchers: they neither fail the
	// request nor subscribe to anything.
	for _, name := range []string{"foo", "last_event_id", "matc", "_match", "xmatch", "topic"} {
		t.Run("not a matcher/"+name, func(t *testing.T) {
			th := subFor(th, t)
			if got := subStatus(th, http.MethodGet, name+"=urn%3Ax", ""); got != http.StatusBadRequest {
				t.Errorf("?%s=urn:x alone: status %d, want 400 (no matcher)", name, got)
			}
			if name == "last_event_id" {
				return // a cursor: it would replay the history
			}
			if subReceives(t, th, name+"=urn%3Ax", "urn:x") {
				t.Errorf("?%s=urn:x subscribed to urn:x", name)
			}
		})
	}
}

func TestSUB8_InvalidMatcherValues(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	values := []struct{ name, value string }{ // raw, percent-encoded
		{"invalid UTF-8", "a%FFb"},
		{"truncated UTF-8", "a%C3"},
		{"overlong UTF-8", "%C0%AF"},
		{"UTF-16 surrogate", "%ED%A0%80"},
		{"NUL", "a%00b"},
		{"LF", "a%0Ab"},
		{"CR", "a%0Db"},
		{"TAB", "a%09b"},
		{"US", "a%1Fb"},
		{"DEL", "a%7Fb"},
		{"C1 U+0080", "a%C2%80b"},
		{"C1 U+009F", "a%C2%9Fb"},
		{"Cf soft hyphen", "a%C2%ADb"},
		{"Cf zero width space", "a%E2%80%8Bb"},
		{"Cf left-to-right mark", "a%E2%80%8Eb"},
		{"Cf right-to-left override", "a%E2%80%AEb"},
		{"Cf left-to-right isolate", "a%E2%81%A6b"},
		{"Cf byte order mark", "%EF%BB%BFa"},
	}
	for _, name := range []string{"match", "match_exact", "match_urlpattern"} {
		for _, v := range values {
			t.Run(name+"/"+v.name, func(t *testing.T) {
				th := subFor(th, t)
				q := name + "=https%3A%2F%2Fexample.com%2F" + v.value
				if got := subStatus(th, http.MethodGet, q, ""); got != http.StatusBadRequest {
					t.Errorf("?%s: status %d, want 400", q, got)
				}
			})
		}
	}

	patterns := []string{
		"https://example.com/(",
		"https://example.com/:id(",
		"https://example.com/:",
		"https://example.com/{",
		"https://example.com/([)",
		"https://example.com/:id(?=a)", // MAT-9: lookahead
		"https://example.com/(?=a)",
		"https://example.com/(?!a)",
		"https://example.com/((?<=a)b)",
		"https://example.com/(a)(\\1)", // back-reference
	}
	for _, p := range patterns {
		t.Run("pattern/"+p, func(t *testing.T) {
			th := subFor(th, t)
			q := "match_urlpattern=" + subEnc(p)
			if got := subStatus(th, http.MethodGet, q, ""); got != http.StatusBadRequest {
				t.Errorf("pattern %q: status %d, want 400", p, got)
			}
		})
	}

	// Controls: the same shapes, valid, are accepted.
	for _, q := range []string{
		"match=" + subEnc("https://example.com/é"),
		"match_urlpattern=" + subEnc("https://example.com/:id(\\d+)"),
		"match_urlpattern=" + subEnc("https://example.com/(a|b)"),
	} {
		t.Run("valid/"+q, func(t *testing.T) {
			th := subFor(th, t)
			if got := subStatus(th, http.MethodGet, q, ""); got != http.StatusOK {
				t.Errorf("?%s: status %d, want 200", q, got)
			}
		})
	}
}

func TestSUB8_OddPatternDoesNotBreakTheHub(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	for _, q := range []string{"match_urlpattern=%23*0", "match_urlpattern=%3F*0", "match_urlpattern=*0", "match_urlpattern=%3A*"} {
		t.Run(q, func(t *testing.T) {
			th := subFor(th, t)
			s, res := th.trySubscribe(http.MethodGet, q+"&match="+subEnc(subMarker), "")
			if s == nil {
				if res.StatusCode != http.StatusBadRequest {
					t.Fatalf("?%s: status %d, want 400 or 200", q, res.StatusCode)
				}
			} else {
				defer s.close()
				// Whether these match is the pattern's business; the hub must
				// survive evaluating it and still deliver the marker.
				for _, topic := range []string{"https://example.com/x#y0", "https://example.com/a?b0", "urn:x", "x0", "/x0"} {
					th.mustPost(subPublishBody("probe", topic))
				}
				th.mustPost(subPublishBody("marker", subMarker))
				for ev := s.next(t); ev.Data != "marker"; ev = s.next(t) {
				}
			}
			if !subReceives(t, th, "match=urn%3Aafter", "urn:after") {
				t.Fatal("a later subscription does not work")
			}
		})
	}
}

func TestSUB9_NoMatcherIsRejected(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	for _, q := range []string{
		"",
		"foo=bar",
		"last_event_id=x",
		"match=",
		"match",
		"match_exact=",
		"match_urlpattern=",
		"match=" + subEnc("urn:x") + "&match=",
	} {
		t.Run(q, func(t *testing.T) {
			th := subFor(th, t)
			if got := subStatus(th, http.MethodGet, q, ""); got != http.StatusBadRequest {
				t.Errorf("?%s: status %d, want 400", q, got)
			}
		})
	}
	t.Run("QUERY with an empty body", func(t *testing.T) {
		th := subFor(th, t)
		if got := subStatus(th, "QUERY", "", "", "Content-Type", "application/x-www-form-urlencoded"); got != http.StatusBadRequest {
			t.Errorf("status %d, want 400", got)
		}
	})
}

func TestSUB10_MatcherLimits(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxMatchers: 2, MaxMatcherBytes: 16}))
	tests := []struct {
		name        string
		method      string
		query, body string
		want        int
	}{
		{"two matchers", http.MethodGet, "match=a&match=b", "", http.StatusOK},
		{"three matchers", http.MethodGet, "match=a&match=b&match=c", "", http.StatusBadRequest},
		{"three matchers of mixed types", http.MethodGet, "match=a&match_exact=b&match_urlpattern=%2Fc", "", http.StatusBadRequest},
		{"three matchers, query and body", "QUERY", "match=a&match=b", "match=c", http.StatusBadRequest},
		{"other parameters are not counted", http.MethodGet, "foo=1&bar=2&last_event_id=x&match=a&match=b", "", http.StatusOK},
		{"16 bytes", http.MethodGet, "match=" + strings.Repeat("a", 16), "", http.StatusOK},
		{"17 bytes", http.MethodGet, "match=" + strings.Repeat("a", 17), "", http.StatusBadRequest},
		{"17-byte pattern", http.MethodGet, "match_urlpattern=%2F" + strings.Repeat("a", 16), "", http.StatusBadRequest},
		{"decoded length counts: 16 bytes escaped", http.MethodGet, "match=" + strings.Repeat("%41", 16), "", http.StatusOK},
		{"16 bytes of UTF-8", http.MethodGet, "match=" + strings.Repeat("%C3%A9", 8), "", http.StatusOK},
		{"18 bytes of UTF-8", http.MethodGet, "match=" + strings.Repeat("%C3%A9", 9), "", http.StatusBadRequest},
		{"17 bytes in the body", "QUERY", "", "match=" + strings.Repeat("a", 17), http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := subFor(th, t)
			if got := subStatus(th, tt.method, tt.query, tt.body); got != tt.want {
				t.Errorf("%s ?%s body %q: status %d, want %d", tt.method, tt.query, tt.body, got, tt.want)
			}
		})
	}
}

func TestSUB11_DuplicateMatchersDeliverOnce(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	for _, q := range []string{
		"match=urn%3Ax&match=urn%3Ax",
		"match=urn%3Ax&match_exact=urn%3Ax",
		"match=*&match=*",
		"match_urlpattern=%2Fa%2F%3Aid&match_urlpattern=%2Fa%2F%3Aid",
	} {
		t.Run(q, func(t *testing.T) {
			topic := "urn:x"
			if strings.Contains(q, "urlpattern") {
				topic = "/a/1"
			}
			// subReceives fails if the probe arrives twice.
			if !subReceives(t, th, q, topic) {
				t.Errorf("?%s did not receive %q", q, topic)
			}
		})
	}
}

func TestSUB13_OverlappingMatchersDeliverOnce(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	tests := []struct {
		name   string
		query  string
		topics []string
		want   bool
	}{
		{
			"exact, patterns and wildcards on one topic",
			"match=" + subEnc("https://example.com/a") +
				"&match_urlpattern=" + subEnc("https://example.com/:p") +
				"&match_urlpattern=" + subEnc("/:p") +
				"&match_urlpattern=" + subEnc("https://*/*") +
				"&match=*&match_urlpattern=*",
			[]string{"https://example.com/a"}, true,
		},
		{
			"several topics selected",
			"match=urn%3Aa&match=urn%3Ab&match_urlpattern=" + subEnc("/c/*"),
			[]string{"urn:a", "urn:b", "/c/1", "https://example.com/c/2"}, true,
		},
		{"canonical topic selected", "match=urn%3Aa", []string{"urn:a", "urn:b"}, true},
		{"alternate topic selected", "match=urn%3Ab", []string{"urn:a", "urn:b"}, true},
		{"later alternate topic selected by a pattern", "match_urlpattern=" + subEnc("/alt/:id"), []string{"urn:a", "urn:b", "/alt/3"}, true},
		{"no topic selected", "match=urn%3Ac", []string{"urn:a", "urn:b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := subReceives(t, th, tt.query, tt.topics...); got != tt.want {
				t.Errorf("?%s and topics %q: delivered = %v, want %v", tt.query, tt.topics, got, tt.want)
			}
		})
	}
}

func TestSUB12_GlobalConnectionLimit(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxConnections: 2}))
	q := "match=urn%3Ax"
	// Refused requests do not take a slot.
	for range 3 {
		if got := subStatus(th, http.MethodGet, "match=", ""); got != http.StatusBadRequest {
			t.Fatalf("bad request: status %d, want 400", got)
		}
	}
	first := th.subscribe(q)
	th.subscribe(q)
	for range 3 {
		if got := subStatus(th, http.MethodGet, q, ""); got != http.StatusTooManyRequests {
			t.Fatalf("third stream: status %d, want 429", got)
		}
	}
	first.close()
	testwait.For(t, "the closed stream to be released", func() bool { return th.Metrics().Streams == 1 })
	if got := subStatus(th, http.MethodGet, q, ""); got != http.StatusOK {
		t.Fatalf("after closing a stream: status %d, want 200", got)
	}
}

func TestSUB12_PerClientConnectionLimit(t *testing.T) {
	t.Parallel()
	th := newTestHub(t,
		mercure.WithLimits(mercure.Limits{MaxConnectionsPerClient: 1}),
		mercure.WithClientKey(func(r *http.Request) string { return r.Header.Get("X-Client") }),
	)
	q := "match=urn%3Ax&match=" + subEnc(subMarker)
	a := th.subscribe(q, "X-Client", "a")
	if got := subStatus(th, http.MethodGet, q, "", "X-Client", "a"); got != http.StatusTooManyRequests {
		t.Fatalf("second stream of client a: status %d, want 429", got)
	}
	b := th.subscribe(q, "X-Client", "b")
	if !subProbe(t, th, b, "urn:x") || !subProbe(t, th, a, "urn:x") {
		t.Fatal("the streams that were admitted do not receive updates")
	}
	a.close()
	testwait.For(t, "the closed stream to be released", func() bool { return th.Metrics().Streams == 1 })
	if got := subStatus(th, http.MethodGet, q, "", "X-Client", "a"); got != http.StatusOK {
		t.Fatalf("client a after closing its stream: status %d, want 200", got)
	}
	if got := subStatus(th, http.MethodGet, q, "", "X-Client", "b"); got != http.StatusTooManyRequests {
		t.Fatalf("second stream of client b: status %d, want 429", got)
	}
}

func TestSUB14_StreamHeadersBeforeAnyEvent(t *testing.T) {
	t.Parallel()
	// No keep-alive either, whose write would flush the headers.
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{KeepAlive: time.Hour}))
	for _, method := range []string{http.MethodGet, "QUERY"} {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, method, th.endpoint()+"?match=urn%3Anothing", nil)
			if err != nil {
				t.Fatal(err)
			}
			// Nothing is ever published: Do returns only if the hub flushes
			// the headers at once.
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("no response headers without any event: %v", err)
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", res.StatusCode)
			}
			mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
			if err != nil || mt != "text/event-stream" {
				t.Fatalf("Content-Type %q, want text/event-stream", res.Header.Get("Content-Type"))
			}
		})
	}
}

func TestSUB15_ExampleEventOnTheWire(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	res := subRawStream(t, th, "match=urn%3Abook")
	th.mustPost("topic=urn%3Abook&id=" + subEnc("urn:uuid:0b5b6f9e-3c51-4f4a-9d3e-5a1d2c7e8f90") +
		"&type=book-updated&retry=5000&data=" + subEnc("{\"title\":\n \"Dune\"}"))
	want := "id: urn:uuid:0b5b6f9e-3c51-4f4a-9d3e-5a1d2c7e8f90\n" +
		"event: book-updated\n" +
		"retry: 5000\n" +
		"data: {\"title\":\n" +
		"data:  \"Dune\"}\n" +
		"\n"
	r := bufio.NewReader(res.Body)
	skipPosition(t, r)
	var got strings.Builder
	for !strings.HasSuffix(got.String(), "\n\n") {
		line, err := r.ReadString('\n')
		if got.Len() == 0 && (strings.HasPrefix(line, ":") || line == "\n") {
			continue // a keep-alive comment before the event
		}
		got.WriteString(line)
		if err != nil {
			t.Fatalf("reading the event: %v; got so far %q", err, got.String())
		}
	}
	if got.String() != want {
		t.Errorf("event on the wire:\n%q\nwant\n%q", got.String(), want)
	}
}

func TestSUB15_OptionalFields(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=urn%3Af")
	tests := []struct {
		name   string
		fields string // publish fields besides topic and id
		want   []string
	}{
		{"neither event nor retry", "data=x", []string{"data: x"}},
		{"event only", "type=t&data=x", []string{"event: t", "data: x"}},
		{"retry only", "retry=10&data=x", []string{"retry: 10", "data: x"}},
		{"event and retry", "type=t&retry=10&data=x", []string{"event: t", "retry: 10", "data: x"}},
		{"value starting with a space", "type=+t&data=+x", []string{"event:  t", "data:  x"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("urn:f:%d", i)
			subFor(th, t).mustPost("topic=urn%3Af&id=" + subEnc(id) + "&" + tt.fields)
			ev := s.next(t)
			want := append([]string{"id: " + id}, tt.want...)
			if !slices.Equal(ev.Lines, want) {
				t.Errorf("lines %q, want %q", ev.Lines, want)
			}
		})
	}
	t.Run("generated id is always sent", func(t *testing.T) {
		id := subFor(th, t).mustPost("topic=urn%3Af&data=x")
		if ev := s.next(t); len(ev.Lines) == 0 || ev.Lines[0] != "id: "+id {
			t.Errorf("lines %q, want first %q", ev.Lines, "id: "+id)
		}
	})
}

func TestSUB16_DataLines(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=urn%3Ad")
	absent := "\x00absent"
	tests := []struct {
		name string
		data string
		want []string
	}{
		{"CRLF, CR and LF", "a\r\nb\rc\n", []string{"data: a", "data: b", "data: c", "data: "}},
		{"one line", "x", []string{"data: x"}},
		{"empty", "", []string{"data: "}},
		{"absent", absent, []string{"data: "}},
		{"only a break", "\n", []string{"data: ", "data: "}},
		{"empty line in the middle", "a\n\nb", []string{"data: a", "data: ", "data: b"}},
		{"CRLF twice", "a\r\n\r\nb", []string{"data: a", "data: ", "data: b"}},
		{"LF then CR is two breaks", "a\n\rb", []string{"data: a", "data: ", "data: b"}},
		{"CR at the end", "a\r", []string{"data: a", "data: "}},
		{"leading space kept", " a\n  b", []string{"data:  a", "data:   b"}},
		{"colon in a line", "id: x\nevent: y", []string{"data: id: x", "data: event: y"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("urn:d:%d", i)
			body := "topic=urn%3Ad&id=" + subEnc(id)
			if tt.data != absent {
				body += "&data=" + subEnc(tt.data)
			}
			subFor(th, t).mustPost(body)
			ev := s.next(t)
			want := append([]string{"id: " + id}, tt.want...)
			if !slices.Equal(ev.Lines, want) {
				t.Errorf("data %q: lines %q, want %q", tt.data, ev.Lines, want)
			}
		})
	}
}

func TestSUB17_KeepAliveComment(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{KeepAlive: 50 * time.Millisecond}))
	s := th.subscribe("match=urn%3Ak&match=" + subEnc(subMarker))
	for range 2 {
		select {
		case c := <-s.comments:
			if !strings.HasPrefix(c, ":") {
				t.Fatalf("keep-alive line %q does not start with ':'", c)
			}
		case <-time.After(testwait.Deadline):
			t.Fatal("no keep-alive comment on an idle stream")
		}
	}
	if !subProbe(t, th, s, "urn:k") {
		t.Fatal("the stream no longer delivers after keep-alives")
	}
}

// The server's WriteTimeout is a deadline on the connection (net.Pipe
// keeps deadlines too): the test runs in a synctest bubble, over memnet,
// so that it passes on the bubble's clock. In both engines: a stream
// written by its handler's goroutine lifts the deadline itself; a
// detached one also clears it after Hijack (net/http clears it today,
// but its documentation leaves that to the caller).
func TestSUB17_ServerWriteTimeoutDoesNotCutStreams(t *testing.T) {
	t.Parallel()
	for name, engine := range map[string][]mercure.Option{"detached": nil, "goroutine": {mercure.WithGoroutineStreams()}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const writeTimeout = 200 * time.Millisecond
				th := startBubbleHub(t, func(srv *http.Server) { srv.WriteTimeout = writeTimeout },
					append([]mercure.Option{mercure.WithInsecurePublishing()}, engine...)...)

				s := th.subscribe("match=urn%3Aw")
				time.Sleep(3 * writeTimeout) // on the bubble's clock
				id := th.mustPost("topic=urn%3Aw&data=late")
				if ev := s.next(t); ev.ID != id || ev.Data != "late" {
					t.Fatalf("got %+v, want the update %s published after the server's WriteTimeout", ev, id)
				}
			})
		})
	}
}

func TestSUB11_DuplicateMatchersLeaveCleanly(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	tests := []struct{ query, topic string }{
		{"match=urn%3Ax&match=urn%3Ax", "urn:x"},
		{"match_urlpattern=%2Fx%2F%3Aid&match_urlpattern=%2Fx%2F%3Aid", "/x/1"},
		{"match=*&match=*", "urn:y"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			th := subFor(th, t)
			stays := th.subscribe(tt.query + "&match=" + subEnc(subMarker))
			leaves := th.subscribe(tt.query)
			leaves.close()
			if !subProbe(t, th, stays, tt.topic) {
				t.Errorf("after another stream with the same matchers left, %q is no longer delivered", tt.topic)
			}
		})
	}
}

// SEC-6, SEC-7: the index evaluates, for each topic, the patterns whose
// literal prefix the topic has; their distinct number per prefix is capped
// (429) so that no client can make every publish slow. Shared patterns
// count once, and a pattern's slot is freed when its last stream ends.
func TestSEC6_PatternsPerPrefixLimit(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxPatternsPerPrefix: 2}))
	q := func(patterns ...string) string { return url.Values{"match_urlpattern": patterns}.Encode() }
	refused := func(patterns ...string) {
		t.Helper()
		if s, res := th.trySubscribe(http.MethodGet, q(patterns...), ""); s != nil || res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%v: status %d, want 429", patterns, res.StatusCode)
		}
	}
	first := th.subscribe(q("*://*/a/:id", "*://*/b/:id", "*://*/a/:id")) // no literal prefix at all
	th.subscribe(q("*://*/a/:id", "/books/:id", "/books/:id/x"))          // shared, and another prefix
	th.subscribe(q("/*?n=1", "https://example.com/:id"))                  // prefix https://example.com/
	refused("*://*/c/:id")
	refused("/books/*")
	refused("/*?n=2")
	th.subscribe(q("/authors/:id", "https://other.example/:id"))

	first.close()
	// *://*/b/:id is released with the first stream; *://*/a/:id is still shared.
	testwait.For(t, "the first stream to be released", func() bool { return th.Metrics().Streams == 3 })
	th.subscribe(q("*://*/c/:id"))
	refused("*://*/d/:id")
}
