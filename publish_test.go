package mercure_test

// Black-box tests of publication: docs/requirements.md (PUB-1 to
// PUB-19) and the publish side of SEC-1, SEC-2, SEC-3 and SEC-6.
//
// Each test publishes exactly as a client would, over HTTP through
// httptest (or through Hub.Publish for the Go API), and asserts what the
// publisher gets back and what subscribers receive. To show that an update
// was NOT delivered, a test publishes a public marker update afterwards
// and asserts that the marker is the next event: delivery is in order, so
// anything refused earlier would have arrived first.
//
// Helpers of this file are prefixed with "pub" so that they cannot clash
// with those of the other test files of the package.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mercurekit/mercure/memstore"
	"github.com/mercurekit/mercure/store"

	"github.com/mercurekit/mercure"
)

// pubTopic is the topic most tests publish to. It needs no escaping in a
// form body, so raw bodies stay readable.
const pubTopic = "https://example.com/books/1"

// pubFormType is the media type of publish bodies (PUB-1).
const pubFormType = "application/x-www-form-urlencoded"

// pubUUID is the shape of the ids the hub generates: urn:uuid: and a
// random (version 4, RFC 9562 variant) UUID in lowercase (PUB-10).
var pubUUID = regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// ---------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------

// pubResult is the hub's answer to one HTTP publish.
type pubResult struct {
	status int
	body   string
	header http.Header
}

// pubPost publishes the raw form body.
func pubPost(t testing.TB, th *testHub, body string) pubResult {
	t.Helper()
	return pubRequest(t, th, pubFormType, "", body)
}

// pubRequest POSTs body to the hub URL with the raw query string query
// (none when empty) and the given Content-Type (none when empty).
// header holds extra name, value pairs.
func pubRequest(t testing.TB, th *testHub, contentType, query, body string, header ...string) pubResult {
	t.Helper()
	u := th.endpoint()
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return pubDo(t, req)
}

func pubDo(t testing.TB, req *http.Request) pubResult {
	t.Helper()
	status, body, header := do(t, req)
	return pubResult{status, body, header}
}

// wantOK asserts that the publish succeeded and returns the update's id.
// TestPUB14_SuccessResponse checks the rest of the success response.
func (r pubResult) wantOK(t testing.TB) string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("publish: status %d, want 200; body %q", r.status, r.body)
	}
	return r.body
}

// wantProblem asserts that the publish was refused with status and an
// RFC 9457 problem document that repeats no OAuth error code (AUTH-18).
// It reports with Errorf so that the caller still checks that nothing was
// delivered.
func (r pubResult) wantProblem(t testing.TB, status int) {
	t.Helper()
	if r.status != status {
		t.Errorf("publish: status %d, want %d; body %q", r.status, status, r.body)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.header.Get("Content-Type")); err != nil || mt != "application/problem+json" {
		t.Errorf("%d response: Content-Type %q, want application/problem+json", status, r.header.Get("Content-Type"))
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Errorf("%d response: body %q is not a JSON object: %v", status, r.body, err)
	}
	if s, ok := doc["status"]; ok && s != float64(status) {
		t.Errorf("%d response: problem status member %v", status, s)
	}
	for _, code := range []string{"invalid_request", "invalid_token", "insufficient_scope"} {
		if strings.Contains(r.body, code) {
			t.Errorf("%d response: body %q repeats the OAuth error code %s", status, r.body, code)
		}
	}
}

// pubForm encodes name, value pairs as a form body, escaping both as
// URLSearchParams does, so that any byte (a "%" included) arrives as is.
func pubForm(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(pairs[i]))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(pairs[i+1]))
	}
	return b.String()
}

// pubMatch is a subscribe query string with one exact matcher per topic.
func pubMatch(topics ...string) string {
	q := make([]string, len(topics))
	for i, t := range topics {
		q[i] = "match=" + url.QueryEscape(t)
	}
	return strings.Join(q, "&")
}

// pubMarker publishes a public update on topics from Go and returns its id.
func pubMarker(t testing.TB, th *testHub, topics ...string) string {
	t.Helper()
	id, err := th.Publish(context.Background(), mercure.Update{Topics: topics, Data: "marker"})
	if err != nil {
		t.Fatalf("publishing the marker: %v", err)
	}
	return id
}

// pubNext returns the event with the given id, reporting every event that
// s receives before it as an error.
func pubNext(t testing.TB, s *subscription, id string) sseEvent {
	t.Helper()
	for {
		ev := s.next(t)
		if ev.ID == id {
			return ev
		}
		t.Errorf("unexpected event before %q: %+v", id, ev)
	}
}

// pubWantNothing asserts that none of subs receives anything before a
// marker published now on topic, which every one of them must match.
func pubWantNothing(t testing.TB, th *testHub, topic string, subs ...*subscription) {
	t.Helper()
	marker := pubMarker(t, th, topic)
	for _, s := range subs {
		pubNext(t, s, marker)
	}
}

// pubFieldLines returns the raw lines of the SSE field name ("data", ...).
func pubFieldLines(ev sseEvent, name string) []string {
	var lines []string
	for _, l := range ev.Lines {
		if field, _, _ := strings.Cut(l, ":"); field == name {
			lines = append(lines, l)
		}
	}
	return lines
}

// newPubSecureHub is newTestHub without WithInsecurePublishing: HTTP
// publishing needs a token there (AUTH-1).
func newPubSecureHub(t testing.TB) *testHub {
	t.Helper()
	return startHub(t, nil)
}

// ---------------------------------------------------------------------
// PUB-1: a form-encoded POST, parsed with the WHATWG algorithm
// ---------------------------------------------------------------------

// TestPUB1_WHATWGFormParsing: names and values are decoded as
// URLSearchParams does (SUB-5), not as url.ParseQuery does: a malformed
// "%" and a ";" are kept literally instead of dropping the pair.
func TestPUB1_WHATWGFormParsing(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))
	const topic = "topic=" + pubTopic

	tests := []struct {
		name, body, wantData string
	}{
		{"percent at the end stays literal", topic + "&data=50%", "50%"},
		{"percent before non-hex digits stays literal", topic + "&data=%zz", "%zz"},
		{"percent before one hex digit stays literal", topic + "&data=%4", "%4"},
		{"percent before a hex and a non-hex digit stays literal", topic + "&data=%4g", "%4g"},
		{"semicolon is not a separator", topic + "&data=a;b", "a;b"},
		{"semicolon pair with an equals sign", topic + "&data=a;b=c", "a;b=c"},
		{"plus is a space", topic + "&data=a+b", "a b"},
		{"%2B is a plus", topic + "&data=a%2Bb", "a+b"},
		{"%20 is a space", topic + "&data=a%20b", "a b"},
		{"value is cut at the first equals sign only", topic + "&data=a=b=c", "a=b=c"},
		{"lowercase hex escapes", topic + "&data=%c3%a9", "é"},
		{"percent-encoded UTF-8", topic + "&data=%E2%82%AC", "€"},
		{"raw UTF-8", topic + "&data=€", "€"},
		{"percent-encoded name", topic + "&%64ata=x", "x"},
		{"percent-encoded topic name", "%74opic=" + pubTopic + "&data=x", "x"},
		{"empty pieces are skipped", "&&" + topic + "&&data=x&&", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := pubPost(t, th, tt.body).wantOK(t)
			if ev := pubNext(t, s, id); ev.Data != tt.wantData {
				t.Errorf("body %q: data %q, want %q", tt.body, ev.Data, tt.wantData)
			}
		})
	}

	t.Run("semicolon in a topic", func(t *testing.T) {
		const semi = "https://example.com/books/1;v=2"
		th := newTestHub(t)
		s := th.subscribe(pubMatch(semi))
		id := pubPost(t, th, "topic="+semi+"&data=x").wantOK(t)
		pubNext(t, s, id)
	})
}

// TestPUB1_MediaType: the body must be application/x-www-form-urlencoded
// (a charset naming UTF-8 allowed); anything else is refused, with 415
// for JSON, and nothing is delivered.
func TestPUB1_MediaType(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=*")
	form := "topic=" + pubTopic + "&data=x"

	accepted := []string{
		"application/x-www-form-urlencoded; charset=utf-8",
		"application/x-www-form-urlencoded;charset=UTF-8",
		"Application/X-WWW-Form-URLEncoded",
	}
	for _, ct := range accepted {
		t.Run("accepts "+ct, func(t *testing.T) {
			id := pubRequest(t, th, ct, "", form).wantOK(t)
			if ev := pubNext(t, s, id); ev.Data != "x" {
				t.Errorf("data %q, want x", ev.Data)
			}
		})
	}

	refused := []struct {
		name, contentType, body string
		statuses                []int // acceptable statuses (Impl. choice: 400 or 415)
	}{
		{"JSON", "application/json", `{"topic":"` + pubTopic + `","data":"x"}`, []int{415}},
		{"JSON with a form-looking body", "application/json", form, []int{415}},
		{"text/plain", "text/plain", form, []int{400, 415}},
		{"multipart", "multipart/form-data; boundary=b",
			"--b\r\nContent-Disposition: form-data; name=\"topic\"\r\n\r\n" + pubTopic + "\r\n--b--\r\n", []int{400, 415}},
		{"no Content-Type", "", form, []int{400, 415}},
		{"malformed Content-Type", "application/x-www-form-urlencoded; charset", form, []int{400, 415}},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			r := pubRequest(t, th, tt.contentType, "", tt.body)
			if !slices.Contains(tt.statuses, r.status) {
				t.Errorf("status %d, want one of %v; body %q", r.status, tt.statuses, r.body)
			} else {
				r.wantProblem(t, r.status)
			}
			pubWantNothing(t, th, pubTopic, s)
		})
	}
}

// TestPUB1_QueryStringNeverMixesIn: only the body counts; pairs of the URL
// query string are neither used nor validated.
func TestPUB1_QueryStringNeverMixesIn(t *testing.T) {
	t.Parallel()
	const other = "https://example.com/books/2"
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))
	sOther := th.subscribe(pubMatch(other))

	t.Run("topic only in the query is no topic", func(t *testing.T) {
		pubRequest(t, th, pubFormType, "topic="+url.QueryEscape(pubTopic), "data=x").wantProblem(t, http.StatusBadRequest)
		pubWantNothing(t, th, pubTopic, s)
	})
	t.Run("query topic is not an alternate topic", func(t *testing.T) {
		id := pubRequest(t, th, pubFormType, "topic="+url.QueryEscape(other), "topic="+pubTopic+"&data=x").wantOK(t)
		pubNext(t, s, id)
		pubWantNothing(t, th, other, sOther)
	})
	t.Run("query private does not make the update private", func(t *testing.T) {
		id := pubRequest(t, th, pubFormType, "private=on", "topic="+pubTopic).wantOK(t)
		pubNext(t, s, id)
	})
	t.Run("query fields are not used", func(t *testing.T) {
		id := pubRequest(t, th, pubFormType, "id=from-query&type=query-type&retry=7&data=from-query", "topic="+pubTopic).wantOK(t)
		if !pubUUID.MatchString(id) {
			t.Errorf("id %q, want a generated urn:uuid (the query id must be ignored)", id)
		}
		ev := pubNext(t, s, id)
		if ev.Data != "" || ev.Type != "" || ev.Retry != "" {
			t.Errorf("event %+v took fields from the query string", ev)
		}
	})
	t.Run("invalid query fields are not validated", func(t *testing.T) {
		id := pubRequest(t, th, pubFormType, "type=mercure&retry=x&id=earliest&topic=*", "topic="+pubTopic).wantOK(t)
		if ev := pubNext(t, s, id); ev.Type != "" {
			t.Errorf("event type %q, want none", ev.Type)
		}
	})
}

// ---------------------------------------------------------------------
// PUB-2 to PUB-6: topics
// ---------------------------------------------------------------------

// TestPUB2_TopicRequired: a publish without a field named exactly "topic"
// is a 400 (a plain 400: no token is involved).
func TestPUB2_TopicRequired(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=*")
	tests := []struct{ name, body string }{
		{"empty body", ""},
		{"data only", "data=x"},
		{"name is case-sensitive", "Topic=" + pubTopic},
		{"plural", "topics=" + pubTopic},
		{"brackets", "topic%5B%5D=" + pubTopic},
		{"leading space in the name", "+topic=" + pubTopic},
		{"empty pieces only", "&&&"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pubPost(t, th, tt.body).wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}
}

// TestPUB3_AlternateTopics: every topic routes the update, the canonical
// one and each alternate; a stream gets it once however many of its
// matchers select it, and a stream that matches none gets nothing.
func TestPUB3_AlternateTopics(t *testing.T) {
	t.Parallel()
	const (
		a     = "https://example.com/books/1"
		b     = "https://example.com/authors/2"
		c     = "https://example.com/shelves/3"
		other = "https://example.com/other"
	)
	th := newTestHub(t)
	subs := map[string]*subscription{
		"canonical":                  th.subscribe(pubMatch(a)),
		"second topic":               th.subscribe(pubMatch(b)),
		"third topic (URL pattern)":  th.subscribe("match_urlpattern=" + url.QueryEscape("https://example.com/shelves/:id")),
		"second and third topics":    th.subscribe(pubMatch(b, c)),
		"every topic and wildcard":   th.subscribe(pubMatch(a, b, c) + "&match=*"),
		"same matcher twice":         th.subscribe(pubMatch(b, b)),
		"exact and pattern together": th.subscribe(pubMatch(c) + "&match_urlpattern=" + url.QueryEscape("https://example.com/:kind/:id")),
	}
	none := th.subscribe(pubMatch(other))

	id := pubPost(t, th, pubForm("topic", a, "topic", b, "topic", c, "data", "x")).wantOK(t)
	for name, s := range subs {
		if ev := pubNext(t, s, id); ev.Data != "x" {
			t.Errorf("%s: data %q, want x", name, ev.Data)
		}
	}
	// Exactly once: the next event after the update is the marker.
	marker := pubMarker(t, th, a, b, c, other)
	for name, s := range subs {
		if ev := s.next(t); ev.ID != marker {
			t.Errorf("%s: got %+v after the update, want the marker (delivered twice?)", name, ev)
		}
	}
	if ev := none.next(t); ev.ID != marker {
		t.Errorf("stream matching no topic got %+v", ev)
	}

	t.Run("repeated topic", func(t *testing.T) {
		s := subs["canonical"]
		id := pubPost(t, th, pubForm("topic", a, "topic", a)).wantOK(t)
		pubNext(t, s, id)
		pubWantNothing(t, th, a, s)
	})
}

// TestPUB4_TopicCharacters: a topic must be valid UTF-8 free of C0, DEL,
// C1 and Cf characters (TOP-1), as canonical and as alternate topic.
func TestPUB4_TopicCharacters(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=*")

	refused := []struct{ name, char string }{
		{"NUL", "\x00"},
		{"U+001F", "\x1f"},
		{"tab", "\t"},
		{"LF", "\n"},
		{"CR", "\r"},
		{"DEL", "\x7f"},
		{"C1 U+0080", "\u0080"},
		{"C1 U+0085 NEL", "\u0085"},
		{"C1 U+009F", "\u009f"},
		{"soft hyphen U+00AD", "\u00ad"},
		{"Arabic number sign U+0600", "\u0600"},
		{"zero width space U+200B", "\u200b"},
		{"left-to-right mark U+200E", "\u200e"},
		{"right-to-left mark U+200F", "\u200f"},
		{"right-to-left override U+202E", "\u202e"},
		{"left-to-right isolate U+2066", "\u2066"},
		{"BOM U+FEFF", "\ufeff"},
		{"musical symbol begin beam U+1D173", "\U0001D173"},
		{"language tag U+E0001", "\U000E0001"},
		{"tag letter U+E0041", "\U000E0041"},
		{"invalid byte FF", "\xff"},
		{"truncated sequence", "\xc3"},
		{"overlong slash", "\xc0\xaf"},
		{"surrogate U+D800", "\xed\xa0\x80"},
	}
	for _, tt := range refused {
		bad := "https://example.com/books/" + tt.char + "1"
		t.Run("refuses "+tt.name, func(t *testing.T) {
			pubPost(t, th, pubForm("topic", bad, "data", "x")).wantProblem(t, http.StatusBadRequest)
			pubPost(t, th, pubForm("topic", pubTopic, "topic", bad, "data", "x")).wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}

	// Neighbours of the banned ranges and other printable characters.
	accepted := []struct{ name, char string }{
		{"space", " "},
		{"tilde U+007E", "~"},
		{"no-break space U+00A0", "\u00a0"},
		{"e acute", "é"},
		{"hair space U+200A", "\u200a"},
		{"hyphen U+2010", "\u2010"},
		{"replacement character U+FFFD", "\ufffd"},
		{"emoji", "😀"},
		{"private use U+10FFFD", "\U0010fffd"},
	}
	for _, tt := range accepted {
		topic := "https://example.com/books/" + tt.char + "1"
		t.Run("accepts "+tt.name, func(t *testing.T) {
			id := pubPost(t, th, pubForm("topic", topic, "data", "x")).wantOK(t)
			pubNext(t, s, id)
		})
	}
}

// TestPUB5_WildcardTopic: "*" is a matcher, never a topic (MAT-4), even
// as an alternate topic; topics merely containing "*" are fine.
func TestPUB5_WildcardTopic(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=*")

	refused := []struct{ name, body string }{
		{"canonical", "topic=*"},
		{"percent-encoded", "topic=%2A"},
		{"alternate", "topic=" + pubTopic + "&topic=*"},
		{"canonical with an alternate", "topic=*&topic=" + pubTopic},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			pubPost(t, th, tt.body+"&data=x").wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}
	for _, topic := range []string{"**", " *", "*/books", "https://example.com/*"} {
		t.Run("accepts "+topic, func(t *testing.T) {
			id := pubPost(t, th, pubForm("topic", topic)).wantOK(t)
			pubNext(t, s, id)
		})
	}
}

// TestPUB6_ReservedNamespace: a topic whose path, resolved against the hub
// URL with unreserved escapes decoded and dot segments removed, is the hub
// path or below it is refused, as canonical or alternate topic; scheme and
// host play no part. This is also SEC-2: the test is on the normalized,
// resolved path, never a prefix test on the raw string.
func TestPUB6_ReservedNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		hubURL      string
		reserved    []string
		notReserved []string
	}{{
		hubURL: testHubURL,
		reserved: []string{
			// The examples of PUB-6.
			"/.well-known/mercure",
			"https://any.example/.well-known/mercure/subscriptions/x",
			"/.well-known/%6Dercure/x",
			"/.well-known/mercure/../mercure/x",
			"/a/%2E%2E/.well-known/mercure",
			"mercure/x",
			// Scheme, host and port play no part.
			"https://example.com/.well-known/mercure",
			"http://example.com:8080/.well-known/mercure/x",
			"wss://other.example/.well-known/mercure/x",
			"//other.example/.well-known/mercure",
			"foo://host/.well-known/mercure/x",
			"/.well-known/mercure/",
			"/.well-known/mercure?q=1",
			"/.well-known/mercure#f",
			// Unreserved escapes, in either case.
			"/.well-known/%6dercure",
			"/.well-known/mercur%65/x",
			"/%2Ewell-known/mercure",
			"/.well-known/%6D%65%72%63%75%72%65",
			// Dot segments, WHATWG spellings included.
			"/x/./../.well-known/mercure",
			"/x/.%2e/.well-known/mercure",
			"/x/%2e./.well-known/mercure",
			"/x/%2e%2E/.well-known/mercure/y",
			"./mercure",
			"../.well-known/mercure/x",
			// WHATWG URL parsing: backslashes, surrounding spaces.
			`https://example.com\.well-known\mercure\x`,
			`\.well-known\mercure`,
			" /.well-known/mercure/x ",
			// (derived) References that resolve to the hub URL itself.
			"",
			"?x",
			"#x",
		},
		notReserved: []string{
			"/.well-known/mercure-x",
			"/.well-known/mercure%2Fx",
			"/.well-known/mercure%2fx",
			"urn:uuid:0b5b6f9e-3c51-4f4a-9d3e-5a1d2c7e8f90",
			"/.well-known/mercurex",
			"/.well-known/mercur",
			"/.WELL-KNOWN/mercure/x",
			"/.well-known/MERCURE",
			"/.well-known/mercure/../x",
			"/.well-known/mercure/%2E%2E/x",
			"/%2F.well-known/mercure",
			".well-known/mercure",
			".",
			"mailto:hub@example.com",
			"urn:x:/.well-known/mercure",
			pubTopic,
		},
	}, {
		hubURL: "https://example.com/app/hub",
		reserved: []string{
			"/app/hub",
			"/app/hub/x",
			"hub/x",
			"https://other.example/app/hub/subscriptions",
			"/app/x/../hub",
			"",
		},
		notReserved: []string{
			"/.well-known/mercure",
			"/.well-known/mercure/x",
			"/.well-known/mercure/subscriptions",
			"mercure/x",
			"/app/hubx",
			"/app",
			"/app/",
			"/hub/x",
		},
	}}
	for _, hub := range tests {
		t.Run(hub.hubURL, func(t *testing.T) {
			th := newTestHubAt(t, hub.hubURL)
			s := th.subscribe("match=*")
			for _, topic := range hub.reserved {
				t.Run("reserved "+topic, func(t *testing.T) {
					pubPost(t, th, pubForm("topic", topic, "data", "x")).wantProblem(t, http.StatusBadRequest)
					pubPost(t, th, pubForm("topic", pubTopic, "topic", topic, "data", "x")).wantProblem(t, http.StatusBadRequest)
					pubWantNothing(t, th, pubTopic, s)
				})
			}
			for _, topic := range hub.notReserved {
				t.Run("not reserved "+topic, func(t *testing.T) {
					id := pubPost(t, th, pubForm("topic", topic, "data", "x")).wantOK(t)
					pubNext(t, s, id)
				})
			}
		})
	}
}

// ---------------------------------------------------------------------
// PUB-7 to PUB-13: the other fields
// ---------------------------------------------------------------------

// TestPUB7_Data: data is optional and any valid UTF-8; it is written as
// one "data: " line per line (SUB-16), with one empty line when absent.
func TestPUB7_Data(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))

	for _, tt := range []struct{ name, data string }{
		{"invalid byte FF", "\xff"},
		{"truncated sequence", "ok\xc3"},
		{"overlong slash", "\xc0\xaf"},
		{"surrogate", "\xed\xa0\x80"},
	} {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			pubPost(t, th, pubForm("topic", pubTopic, "data", tt.data)).wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}

	tests := []struct {
		name, body string
		wantLines  []string
		wantData   string // as EventSource gives it: line breaks are LF
	}{
		{"absent", "topic=" + pubTopic, []string{"data: "}, ""},
		{"empty", "topic=" + pubTopic + "&data=", []string{"data: "}, ""},
		{"one line", pubForm("topic", pubTopic, "data", "hello"), []string{"data: hello"}, "hello"},
		{"CRLF, CR and LF, trailing break", pubForm("topic", pubTopic, "data", "a\r\nb\rc\n"),
			[]string{"data: a", "data: b", "data: c", "data: "}, "a\nb\nc\n"},
		{"a lone break", pubForm("topic", pubTopic, "data", "\n"), []string{"data: ", "data: "}, "\n"},
		{"two CRs are two breaks", pubForm("topic", pubTopic, "data", "a\r\rb"), []string{"data: a", "data: ", "data: b"}, "a\n\nb"},
		{"LF then CRLF", pubForm("topic", pubTopic, "data", "a\n\r\nb"), []string{"data: a", "data: ", "data: b"}, "a\n\nb"},
		{"leading space survives", pubForm("topic", pubTopic, "data", " x"), []string{"data:  x"}, " x"},
		{"JSON across lines", pubForm("topic", pubTopic, "data", "{\"title\":\n \"Dune\"}"),
			[]string{`data: {"title":`, `data:  "Dune"}`}, "{\"title\":\n \"Dune\"}"},
		{"controls and format characters are opaque", pubForm("topic", pubTopic, "data", "a\tb\x00c\u00ad\u202e"),
			[]string{"data: a\tb\x00c\u00ad\u202e"}, "a\tb\x00c\u00ad\u202e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := pubPost(t, th, tt.body).wantOK(t)
			ev := pubNext(t, s, id)
			if got := pubFieldLines(ev, "data"); !slices.Equal(got, tt.wantLines) {
				t.Errorf("data lines %q, want %q", got, tt.wantLines)
			}
			if ev.Data != tt.wantData {
				t.Errorf("data %q, want %q", ev.Data, tt.wantData)
			}
		})
	}
}

// TestPUB8_Private: the presence of a private field alone makes the update
// private, whatever its value; anonymous streams never get private updates.
func TestPUB8_Private(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, withAuthIssuer(t), mercure.WithAnonymousSubscribers())
	s := th.subscribe(pubMatch(pubTopic))
	topic := "topic=" + pubTopic

	private := []struct{ name, body string }{
		{"on", topic + "&private=on"},
		{"empty value", topic + "&private="},
		{"false", topic + "&private=false"},
		{"0", topic + "&private=0"},
		{"off", topic + "&private=off"},
		{"bare name", topic + "&private"},
		{"before the topic", "private&" + topic},
		{"percent-encoded name", topic + "&%70rivate=no"},
		{"repeated", topic + "&private=on&private=off"},
	}
	for _, tt := range private {
		t.Run("private "+tt.name, func(t *testing.T) {
			pubPost(t, th, tt.body+"&data=secret").wantOK(t)
			pubWantNothing(t, th, pubTopic, s)
		})
	}

	public := []struct{ name, body string }{
		{"no private field", topic},
		{"name is case-sensitive", topic + "&Private=on"},
		{"other name", topic + "&privates=on"},
		{"private in another field's value", topic + "&data=private"},
	}
	for _, tt := range public {
		t.Run("public "+tt.name, func(t *testing.T) {
			id := pubPost(t, th, tt.body).wantOK(t)
			pubNext(t, s, id)
		})
	}
}

// TestPUB9_ID: a given id becomes the SSE id and the response body; one
// holding C0, DEL, C1 or Cf characters, starting with "#" or equal to
// "earliest" is refused.
func TestPUB9_ID(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))

	refused := []struct{ name, id string }{
		{"LF", "a\nb"},
		{"CR", "a\rb"},
		{"NUL", "a\x00b"},
		{"tab", "a\tb"},
		{"DEL", "a\x7f"},
		{"C1 NEL", "a\u0085b"},
		{"soft hyphen", "a\u00adb"},
		{"zero width space", "\u200b"},
		{"BOM", "\ufeffid"},
		{"invalid UTF-8", "a\xffb"},
		{"leading #", "#1842"},
		{"lone #", "#"},
		{"exactly earliest", "earliest"},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			pubPost(t, th, pubForm("topic", pubTopic, "id", tt.id)).wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}

	accepted := []string{
		"my-id-1",
		"urn:uuid:0b5b6f9e-3c51-4f4a-9d3e-5a1d2c7e8f90",
		"https://example.com/events/1#frag",
		"a#b",
		"Earliest",
		"earliest-2",
		"with spaces",
		"é-1",
	}
	for _, want := range accepted {
		t.Run("accepts "+want, func(t *testing.T) {
			id := pubPost(t, th, pubForm("topic", pubTopic, "id", want)).wantOK(t)
			if id != want {
				t.Errorf("response body %q, want the given id %q", id, want)
			}
			ev := pubNext(t, s, want)
			if got := pubFieldLines(ev, "id"); !slices.Equal(got, []string{"id: " + want}) {
				t.Errorf("id lines %q, want [id: %s]", got, want)
			}
		})
	}
}

// TestPUB10_GeneratedIDs: without an id the hub generates a random
// urn:uuid, unique per update, returned and used as the SSE id.
func TestPUB10_GeneratedIDs(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))
	const n = 100
	seen := make(map[string]bool, n)
	ids := make([]string, 0, n)
	for range n {
		id := pubPost(t, th, "topic="+pubTopic).wantOK(t)
		if !pubUUID.MatchString(id) {
			t.Fatalf("generated id %q does not match %s", id, pubUUID)
		}
		if seen[id] {
			t.Fatalf("id %q generated twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	for _, id := range ids {
		if ev := s.next(t); ev.ID != id {
			t.Fatalf("event id %q, want %q (in publication order)", ev.ID, id)
		}
	}
}

// TestPUB11_Type: type becomes the SSE event; control and format
// characters and the hub's own "mercure" are refused (also SEC-3).
func TestPUB11_Type(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))

	refused := []struct{ name, typ string }{
		{"mercure", "mercure"},
		{"LF", "a\nb"},
		{"mercure then LF", "mercure\n"},
		{"CR", "a\rb"},
		{"NUL", "\x00"},
		{"DEL", "a\x7f"},
		{"C1", "\u0080"},
		{"zero width space", "book\u200bupdated"},
		{"invalid UTF-8", "\xff"},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			pubPost(t, th, pubForm("topic", pubTopic, "type", tt.typ)).wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}

	for _, typ := range []string{"book-updated", "Mercure", "mercure-updated", "message"} {
		t.Run("accepts "+typ, func(t *testing.T) {
			id := pubPost(t, th, pubForm("topic", pubTopic, "type", typ)).wantOK(t)
			ev := pubNext(t, s, id)
			if got := pubFieldLines(ev, "event"); !slices.Equal(got, []string{"event: " + typ}) {
				t.Errorf("event lines %q, want [event: %s]", got, typ)
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		id := pubPost(t, th, "topic="+pubTopic).wantOK(t)
		if got := pubFieldLines(pubNext(t, s, id), "event"); len(got) != 0 {
			t.Errorf("event lines %q, want none", got)
		}
	})
}

// TestPUB12_Retry: retry becomes the SSE retry; it holds ASCII digits only.
func TestPUB12_Retry(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))

	refused := []struct{ name, retry string }{
		{"unit", "5s"},
		{"negative", "-1"},
		{"fraction", "1.5"},
		{"empty", ""},
		{"leading space", " 5"},
		{"trailing space", "5 "},
		{"plus sign", "+5"},
		{"hex", "0x10"},
		{"exponent", "1e3"},
		{"Arabic-Indic digit", "\u0661"},
		{"fullwidth digit", "\uff15"},
		{"trailing LF", "5\n"},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			pubPost(t, th, pubForm("topic", pubTopic, "retry", tt.retry)).wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}

	accepted := []struct {
		retry string
		want  int
	}{
		{"5000", 5000},
		{"1", 1},
		{"007", 7},
		{"0", 0},
	}
	for _, tt := range accepted {
		t.Run("accepts "+tt.retry, func(t *testing.T) {
			id := pubPost(t, th, pubForm("topic", pubTopic, "retry", tt.retry)).wantOK(t)
			ev := pubNext(t, s, id)
			lines := pubFieldLines(ev, "retry")
			if len(lines) != 1 {
				t.Fatalf("retry lines %q, want one retry field of %d ms", lines, tt.want)
			}
			if got, err := strconv.Atoi(ev.Retry); err != nil || got != tt.want || lines[0] != "retry: "+ev.Retry {
				t.Errorf("retry line %q, want retry: %d", lines[0], tt.want)
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		id := pubPost(t, th, "topic="+pubTopic).wantOK(t)
		if got := pubFieldLines(pubNext(t, s, id), "retry"); len(got) != 0 {
			t.Errorf("retry lines %q, want none", got)
		}
	})
}

// TestPUB13_UnknownFieldsIgnored: unknown fields, access_token included,
// change nothing.
func TestPUB13_UnknownFieldsIgnored(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))
	for _, extra := range []string{
		"access_token=x",
		"foo=bar",
		"match=*",
		"last_event_id=earliest",
		"Data=other",
		"TYPE=mercure",
		"topic_=" + pubTopic,
		"data%5B%5D=y",
		"=nameless",
		"bare",
	} {
		t.Run(extra, func(t *testing.T) {
			id := pubPost(t, th, "topic="+pubTopic+"&data=payload&"+extra).wantOK(t)
			ev := pubNext(t, s, id)
			if ev.Data != "payload" || ev.Type != "" || ev.Retry != "" {
				t.Errorf("event %+v, want data payload and nothing else", ev)
			}
		})
	}
}

// ---------------------------------------------------------------------
// PUB-14 to PUB-16: responses, authorization and limits
// ---------------------------------------------------------------------

// TestPUB14_SuccessResponse: exactly 200, text/plain; charset=utf-8, the id
// as the whole body, and no Location.
func TestPUB14_SuccessResponse(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	tests := []struct {
		name, body string
		wantID     func(string) bool
	}{
		{"given id", pubForm("topic", pubTopic, "id", "urn:uuid:1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed"),
			func(id string) bool { return id == "urn:uuid:1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed" }},
		{"generated id", "topic=" + pubTopic, pubUUID.MatchString},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := pubPost(t, th, tt.body)
			if r.status != http.StatusOK {
				t.Errorf("status %d, want exactly 200", r.status)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q, want text/plain; charset=utf-8", ct)
			}
			if !tt.wantID(r.body) {
				t.Errorf("body %q is not the id alone", r.body)
			}
			if loc, ok := r.header["Location"]; ok {
				t.Errorf("Location %q sent", loc)
			}
		})
	}
}

// TestPUB15_PublishingNeedsAuthorization: without WithInsecurePublishing
// (AUTH-7) an HTTP publish without a token is a 401 with a Bearer
// challenge that has no error attribute (AUTH-13), and nothing is
// delivered. A form or query access_token is not a token (AUTH-9).
func TestPUB15_PublishingNeedsAuthorization(t *testing.T) {
	t.Parallel()
	th := newPubSecureHub(t)
	s := th.subscribe("match=*")
	form := pubForm("topic", pubTopic, "data", "x")
	tests := []struct{ name, query, body string }{
		{"no token", "", form},
		{"private update", "", form + "&private=on"},
		{"access_token form field", "", form + "&access_token=x"},
		{"access_token query parameter", "access_token=x", form},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := pubRequest(t, th, pubFormType, tt.query, tt.body)
			if r.status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401; body %q", r.status, r.body)
			}
			challenge := r.header.Get("WWW-Authenticate")
			if scheme, _, _ := strings.Cut(challenge, " "); scheme != "Bearer" {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge", challenge)
			}
			if strings.Contains(challenge, "error=") {
				t.Errorf("WWW-Authenticate %q: no error attribute when no token was sent", challenge)
			}
			pubWantNothing(t, th, pubTopic, s)
		})
	}
}

// TestPUB16_Limits (SEC-6): a body, a field or a topic count over its
// limit is a 413, and nothing is delivered; values at the limit pass.
func TestPUB16_Limits(t *testing.T) {
	t.Parallel()
	t.Run("MaxBodyBytes", func(t *testing.T) {
		th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxBodyBytes: 100}))
		s := th.subscribe("match=*")
		prefix := "topic=/t&data="
		atLimit := prefix + strings.Repeat("x", 100-len(prefix))

		id := pubPost(t, th, atLimit).wantOK(t)
		pubNext(t, s, id)

		pubPost(t, th, atLimit+"x").wantProblem(t, http.StatusRequestEntityTooLarge)
		pubPost(t, th, prefix+strings.Repeat("x", 1000)).wantProblem(t, http.StatusRequestEntityTooLarge)
		// Without Content-Length (chunked), the hub counts as it reads.
		req, err := http.NewRequest(http.MethodPost, th.endpoint(), struct{ io.Reader }{strings.NewReader(atLimit + "x")})
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", pubFormType)
		pubDo(t, req).wantProblem(t, http.StatusRequestEntityTooLarge)
		pubWantNothing(t, th, "/t", s)
	})

	t.Run("MaxTopics", func(t *testing.T) {
		th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxTopics: 2}))
		s := th.subscribe("match=*")

		id := pubPost(t, th, "topic=/a&topic=/b").wantOK(t)
		pubNext(t, s, id)

		pubPost(t, th, "topic=/a&topic=/b&topic=/c").wantProblem(t, http.StatusRequestEntityTooLarge)
		pubWantNothing(t, th, "/a", s)
	})

	t.Run("MaxFieldBytes", func(t *testing.T) {
		th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxFieldBytes: 10}))
		s := th.subscribe("match=*")
		ten, eleven := "/abcdefghi", "/abcdefghij"

		for _, body := range []string{
			"topic=" + ten,
			"topic=/t&id=" + ten,
			"topic=/t&type=" + ten,
			"topic=/t&retry=1234567890",
			"topic=/t&data=" + strings.Repeat("d", 50), // data is capped by MaxBodyBytes only
		} {
			id := pubPost(t, th, body).wantOK(t)
			pubNext(t, s, id)
		}
		for _, body := range []string{
			"topic=" + eleven,
			"topic=/t&topic=" + eleven,
			"topic=/t&id=" + eleven,
			"topic=/t&type=" + eleven,
			"topic=/t&retry=12345678901",
		} {
			pubPost(t, th, body).wantProblem(t, http.StatusRequestEntityTooLarge)
			pubWantNothing(t, th, "/t", s)
		}
	})

	t.Run("topics never exceed 2 KiB", func(t *testing.T) {
		th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxFieldBytes: 8192}))
		long := "/" + strings.Repeat("a", 2048)
		pubPost(t, th, "topic="+long).wantProblem(t, http.StatusRequestEntityTooLarge)
		pubPost(t, th, "topic=/t&id="+long).wantOK(t) // other fields follow MaxFieldBytes
		if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{long}}); !errors.Is(err, mercure.ErrInvalidUpdate) {
			t.Fatalf("Go publish of a %d-byte topic: %v", len(long), err)
		}
	})
}

// TestPUB_ErrorResponsesAreProblemDetails (AUTH-18): the 400, 413 and 415
// answers to a publish are application/problem+json documents.
func TestPUB_ErrorResponsesAreProblemDetails(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithLimits(mercure.Limits{MaxTopics: 1}))
	pubPost(t, th, "data=x").wantProblem(t, http.StatusBadRequest)
	pubPost(t, th, "topic=/a&topic=/b").wantProblem(t, http.StatusRequestEntityTooLarge)
	pubRequest(t, th, "application/json", "", `{"topic":"/a"}`).wantProblem(t, http.StatusUnsupportedMediaType)
}

// ---------------------------------------------------------------------
// PUB-18, PUB-19: the Go publish API
// ---------------------------------------------------------------------

// TestPUB19_GoPublishValidates: Hub.Publish enforces PUB-2 to PUB-12 and
// returns errors that match the package's sentinel errors.
func TestPUB19_GoPublishValidates(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=*")
	ok := []string{pubTopic}
	tests := []struct {
		name    string
		update  mercure.Update
		wantErr error
	}{
		{"no topic", mercure.Update{Data: "x"}, mercure.ErrInvalidUpdate},
		{"empty topic list", mercure.Update{Topics: []string{}}, mercure.ErrInvalidUpdate},
		{"NUL in topic", mercure.Update{Topics: []string{"a\x00"}}, mercure.ErrInvalidUpdate},
		{"LF in alternate topic", mercure.Update{Topics: []string{pubTopic, "a\nb"}}, mercure.ErrInvalidUpdate},
		{"Cf in topic", mercure.Update{Topics: []string{"a\u200bb"}}, mercure.ErrInvalidUpdate},
		{"invalid UTF-8 topic", mercure.Update{Topics: []string{"\xff"}}, mercure.ErrInvalidUpdate},
		{"wildcard topic", mercure.Update{Topics: []string{"*"}}, mercure.ErrInvalidUpdate},
		{"wildcard alternate", mercure.Update{Topics: []string{pubTopic, "*"}}, mercure.ErrInvalidUpdate},
		{"reserved topic", mercure.Update{Topics: []string{"/.well-known/mercure/x"}}, mercure.ErrInvalidUpdate},
		{"reserved relative alternate", mercure.Update{Topics: []string{pubTopic, "mercure/x"}}, mercure.ErrInvalidUpdate},
		{"reserved with escape and other host", mercure.Update{Topics: []string{"https://other.example/.well-known/%6Dercure"}}, mercure.ErrInvalidUpdate},
		{"LF in id", mercure.Update{Topics: ok, ID: "a\nb"}, mercure.ErrInvalidUpdate},
		{"Cf in id", mercure.Update{Topics: ok, ID: "\ufeff1"}, mercure.ErrInvalidUpdate},
		{"# id", mercure.Update{Topics: ok, ID: "#1"}, mercure.ErrInvalidUpdate},
		{"earliest id", mercure.Update{Topics: ok, ID: "earliest"}, mercure.ErrInvalidUpdate},
		{"mercure type", mercure.Update{Topics: ok, Type: "mercure"}, mercure.ErrInvalidUpdate},
		{"CR in type", mercure.Update{Topics: ok, Type: "a\rb"}, mercure.ErrInvalidUpdate},
		{"negative retry", mercure.Update{Topics: ok, Retry: ptr(-time.Second)}, mercure.ErrInvalidUpdate},
		{"invalid UTF-8 data", mercure.Update{Topics: ok, Data: "a\xffb"}, mercure.ErrInvalidUpdate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := th.Publish(context.Background(), tt.update)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Publish: error %v, want one matching %v", err, tt.wantErr)
			}
			pubWantNothing(t, th, pubTopic, s)
		})
	}
}

// TestPUB19_GoPublishDelivers: a valid Hub.Publish needs no token nor
// WithInsecurePublishing (PUB-18), returns the id (a generated urn:uuid
// when none is given) and delivers every field.
func TestPUB19_GoPublishDelivers(t *testing.T) {
	t.Parallel()
	// An issuer, so that private updates have readers; anonymous streams.
	th := startHub(t, nil, withAuthIssuer(t), mercure.WithAnonymousSubscribers())
	s := th.subscribe(pubMatch(pubTopic))
	ctx := context.Background()

	id, err := th.Publish(ctx, mercure.Update{Topics: []string{pubTopic}, Data: "x"})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if !pubUUID.MatchString(id) {
		t.Errorf("generated id %q does not match %s", id, pubUUID)
	}
	pubNext(t, s, id)

	u := mercure.Update{
		Topics: []string{"https://example.com/other", pubTopic},
		Data:   "a\r\nb",
		ID:     "go-1",
		Type:   "book-updated",
		Retry:  ptr(5 * time.Second),
	}
	id, err = th.Publish(ctx, u)
	if err != nil || id != "go-1" {
		t.Fatalf("Publish: id %q, error %v; want go-1, nil", id, err)
	}
	ev := pubNext(t, s, "go-1")
	want := []string{"id: go-1", "event: book-updated", "retry: 5000", "data: a", "data: b"}
	if got := slices.Sorted(slices.Values(ev.Lines)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("event lines %q, want %q in any order", ev.Lines, want)
	}

	if _, err := th.Publish(ctx, mercure.Update{Topics: []string{pubTopic}, Private: true}); err != nil {
		t.Fatalf("Publish private: %v", err)
	}
	pubWantNothing(t, th, pubTopic, s) // anonymous streams get no private update
}

// ---------------------------------------------------------------------
// SEC: security considerations on the publish side
// ---------------------------------------------------------------------

// TestSEC1_NoSSEFieldInjection: line breaks in data only ever produce
// more data lines; id, type, retry and topic cannot carry them at all.
func TestSEC1_NoSSEFieldInjection(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe(pubMatch(pubTopic))

	injections := []struct {
		name, data string
		wantData   []string
	}{
		{"LF", "x\nevent: mercure\nid: forged",
			[]string{"data: x", "data: event: mercure", "data: id: forged"}},
		{"CR", "x\revent: mercure\rretry: 1",
			[]string{"data: x", "data: event: mercure", "data: retry: 1"}},
		{"CRLF", "x\r\nid: forged\r\n",
			[]string{"data: x", "data: id: forged", "data: "}},
		{"blank line ends no event", "x\n\nid: forged\n\ndata: y",
			[]string{"data: x", "data: ", "data: id: forged", "data: ", "data: data: y"}},
	}
	check := func(t *testing.T, id string, wantData []string) {
		t.Helper()
		ev := pubNext(t, s, id)
		if got := pubFieldLines(ev, "data"); !slices.Equal(got, wantData) {
			t.Errorf("data lines %q, want %q", got, wantData)
		}
		if ev.ID != id || ev.Type != "" || ev.Retry != "" || len(ev.Lines) != len(wantData)+1 {
			t.Errorf("event %+v has forged fields", ev)
		}
		pubWantNothing(t, th, pubTopic, s) // and no second, forged event
	}
	for _, tt := range injections {
		t.Run("HTTP data "+tt.name, func(t *testing.T) {
			id := pubPost(t, th, pubForm("topic", pubTopic, "data", tt.data)).wantOK(t)
			check(t, id, tt.wantData)
		})
		t.Run("Go data "+tt.name, func(t *testing.T) {
			id, err := th.Publish(context.Background(), mercure.Update{Topics: []string{pubTopic}, Data: tt.data})
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			check(t, id, tt.wantData)
		})
	}

	for _, field := range []string{"id", "type", "retry", "topic"} {
		t.Run("HTTP "+field, func(t *testing.T) {
			body := pubForm("topic", pubTopic, field, "1\nevent: mercure\ndata: forged")
			pubPost(t, th, body).wantProblem(t, http.StatusBadRequest)
			pubWantNothing(t, th, pubTopic, s)
		})
	}
}

// TestSEC3_TypeMercureRefused: only the hub sends "mercure" events, so
// subscribers can trust them whatever the topic.
func TestSEC3_TypeMercureRefused(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	s := th.subscribe("match=*")
	for _, body := range []string{
		pubForm("topic", pubTopic, "type", "mercure"),
		pubForm("topic", pubTopic, "type", "mercure", "private", "on"),
		pubForm("topic", pubTopic, "topic", "https://example.com/other", "type", "mercure"),
		pubForm("topic", pubTopic, "type", "mercure", "id", "x1"),
	} {
		pubPost(t, th, body).wantProblem(t, http.StatusBadRequest)
		pubWantNothing(t, th, pubTopic, s)
	}
	_, err := th.Publish(context.Background(), mercure.Update{Topics: []string{pubTopic}, Type: "mercure"})
	if !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Errorf("Go Publish with type mercure: error %v, want ErrInvalidUpdate", err)
	}
	pubWantNothing(t, th, pubTopic, s)
}

// A private update on a hub that validates no subscriber's token could
// reach no stream: it is refused, from Go and over HTTP, and nothing is
// recorded.
func TestPrivateUpdateWithoutReaders(t *testing.T) {
	t.Parallel()
	th := newTestHub(t)
	if _, err := th.Publish(context.Background(), mercure.Update{Topics: []string{pubTopic}, Private: true}); !errors.Is(err, mercure.ErrInvalidUpdate) {
		t.Fatalf("Publish: %v, want ErrInvalidUpdate", err)
	}
	status, body, _ := th.post("topic=" + url.QueryEscape(pubTopic) + "&private=on")
	if status != http.StatusBadRequest || !strings.Contains(body, "authorizes no subscriber") {
		t.Fatalf("POST: %d %q, want 400 saying why", status, body)
	}
	if id := th.LastEventID(); id != store.Earliest {
		t.Fatalf("LastEventID %q: a refused update was recorded", id)
	}
	if got := th.Metrics().UpdatesRefused["400"]; got != 2 {
		t.Fatalf("UpdatesRefused[400] = %d, want 2", got)
	}
}

// cancelCheckingStore fails an append whose context is already done, as a
// store on the network would.
type cancelCheckingStore struct{ *memstore.Store }

func (s cancelCheckingStore) Append(ctx context.Context, e *store.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.Store.Append(ctx, e)
}

// Publish's context bounds only its wait for room: an update the
// application decided to publish is recorded and delivered even when the
// context is already cancelled (its HTTP client went away), whatever the
// store does with a done context, and its trace values still reach the
// store.
func TestPublishOutlivesItsContext(t *testing.T) {
	t.Parallel()
	th := newTestHub(t, mercure.WithStore(cancelCheckingStore{newMemoryStore(t, 10)}))
	s := th.subscribe(pubMatch(pubTopic))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id, err := th.Publish(ctx, mercure.Update{Topics: []string{pubTopic}, Data: "x"})
	if err != nil {
		t.Fatalf("Publish with a cancelled context: %v", err)
	}
	pubNext(t, s, id)
	if got := th.LastEventID(); got != id {
		t.Fatalf("LastEventID %q, want %q", got, id)
	}
}
