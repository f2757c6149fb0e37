package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mercurekit/mercure"
)

// guide is the migration guide, whose snippets these tests run.
const guide = "../../docs/migration.md"

// snippetRE finds a marked snippet: its name, language and text.
var snippetRE = regexp.MustCompile("(?s)<!-- snippet: ([a-z-]+) -->\n```([a-z]+)\n(.*?)\n```")

// snippets returns the guide's snippets by name, failing unless every
// fenced block is marked, so that none escapes these tests.
func snippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range snippetRE.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[3]
	}
	if fences := strings.Count(string(b), "\n```") / 2; fences != len(out) {
		t.Fatalf("%d fenced blocks, %d marked snippets: mark every snippet, and test it here", fences, len(out))
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range out {
			if !yield(n) {
				return
			}
		}
	})
	if want := []string{"env", "go", "php-publish", "php-token", "polyfill", "standalone"}; !slices.Equal(names, want) {
		t.Fatalf("snippets %q, want %q (a new one needs its test)", names, want)
	}
	return out
}

// guideEnv is the env snippet's variables.
func guideEnv(t *testing.T, s string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	for _, k := range []string{"MERCURE_URL", "MERCURE_PUBLIC_URL", "MERCURE_JWT_SECRET"} {
		if env[k] == "" {
			t.Fatalf("the env snippet has no %s", k)
		}
	}
	return env
}

// guideHub runs the standalone snippet in dir: its first line writes the
// JWK Set with the shell; the command line's flags configure a hub served
// on a free port, with -legacy-clients unless legacy is false. It returns
// the hub's address (MERCURE_URL) and the hub.
func guideHub(t *testing.T, snippet, dir string, env map[string]string, legacy bool) (string, *server) {
	t.Helper()
	lines := strings.SplitN(snippet, "\n", 2)
	cmd := exec.Command("sh", "-c", lines[0])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MERCURE_JWT_SECRET="+env["MERCURE_JWT_SECRET"])
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", lines[0], err, out)
	}
	words := strings.Fields(strings.ReplaceAll(lines[1], "\\\n", " "))
	if !slices.Equal(words[:3], []string{"go", "run", "./examples/standalone"}) {
		t.Fatalf("command %q", words)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for i := 3; i < len(words); i++ {
		w := strings.ReplaceAll(words[i], `"$MERCURE_PUBLIC_URL"`, env["MERCURE_PUBLIC_URL"])
		switch {
		case words[i-1] == "-addr":
			w = ln.Addr().String()
		case strings.HasSuffix(w, ".jwks"):
			w = filepath.Join(dir, w)
		case w == "-legacy-clients" && !legacy:
			continue
		}
		args = append(args, w)
	}
	return "http://" + ln.Addr().String() + "/.well-known/mercure", serveOn(t, ln, args)
}

// Step 1 of the guide: the hub its command line starts takes the stock
// Symfony component's legacy publish.
func TestMigrationGuide_CompatibilityMode(t *testing.T) {
	php := needPHP(t)
	sn := snippets(t)
	env := guideEnv(t, sn["env"])
	if env["MERCURE_JWT_SECRET"] != symfonySecret {
		t.Fatalf("the guide's secret %q differs from the one symfony_publish.php is run with", env["MERCURE_JWT_SECRET"])
	}
	hub, _ := guideHub(t, sn["standalone"], t.TempDir(), env, true)
	if got := symfonyPublish(t, php, hub, "https://example.com/books/1", "Dune"); !strings.HasPrefix(got, "urn:uuid:") {
		t.Fatalf("legacy publish: %s", got)
	}
}

// The guide's Go snippet is the body of ExampleWithLegacyClients, which
// go test runs.
func TestMigrationGuide_GoSnippetIsTheExample(t *testing.T) {
	sn := snippets(t)
	b, err := os.ReadFile("../../example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	code := func(s string) string {
		var out []string
		for line := range strings.SplitSeq(s, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "//") {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}
	example := string(b)[strings.Index(string(b), "func ExampleWithLegacyClients"):]
	if !strings.Contains(code(example), code(sn["go"])) {
		t.Fatalf("the Go snippet is not in ExampleWithLegacyClients:\n%s", sn["go"])
	}
}

// Step 2: the guide's PHP token function, used through Symfony's Hub,
// publishes with a standard token to the hub without the compatibility
// mode; a browser with a subscriber token minted by the same function
// receives the private update.
func TestMigrationGuide_StandardTokensFromPHP(t *testing.T) {
	php := needPHP(t)
	sn := snippets(t)
	env := guideEnv(t, sn["env"])
	dir := t.TempDir()
	hub, _ := guideHub(t, sn["standalone"], dir, env, false)
	for name, file := range map[string]string{"php-token": "mercure_token.php", "php-publish": "publish.php"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(sn[name]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(php, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MERCURE_URL="+hub, "MERCURE_PUBLIC_URL="+env["MERCURE_PUBLIC_URL"], "MERCURE_JWT_SECRET="+env["MERCURE_JWT_SECRET"])
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("php %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	subTok := run("-r", `require "mercure_token.php"; echo mercure_token(getenv("MERCURE_JWT_SECRET"), "https://app.example", getenv("MERCURE_PUBLIC_URL"), "alice", [], [["match" => "https://example.com/books/:id", "match_type" => "urlpattern"]]);`)
	req, _ := http.NewRequest(http.MethodGet, hub+"?match_urlpattern="+url.QueryEscape("https://example.com/books/:id"), nil)
	req.Header.Set("Authorization", "Bearer "+subTok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("subscribe with the guide's token: %d %s", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}
	id := run("publish.php")
	if !strings.HasPrefix(id, "urn:uuid:") {
		t.Fatalf("publish with the guide's token: %s", id)
	}
	got, lines := nextEvent(t, bufio.NewScanner(res.Body))
	if got != id || !slices.Contains(lines, `data: {"title":"Dune"}`) {
		t.Fatalf("event %s %q, want %s", got, lines, id)
	}
}

// The polyfill, with the guide's setting and with its default, resumes
// without loss from the hub without the compatibility mode.
func TestMigrationGuide_Polyfill(t *testing.T) {
	sn := snippets(t)
	m := regexp.MustCompile(`lastEventIdQueryParameterName: "([^"]+)"`).FindStringSubmatch(sn["polyfill"])
	if m == nil {
		t.Fatal("the polyfill snippet sets no lastEventIdQueryParameterName")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serveOn(t, ln, []string{"-addr", ln.Addr().String(), "-anonymous"})
	hub := "http://" + ln.Addr().String() + "/.well-known/mercure"
	var ids []string
	for i := range 3 {
		id, err := s.hub.Publish(context.Background(), mercure.Update{Topics: []string{"https://example.com/books/1"}, Data: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, param := range []string{m[1], "lastEventId"} {
		// The polyfill appends the parameter to the URL it was given.
		u := hub + "?match=" + url.QueryEscape("https://example.com/books/1") + "&" + param + "=" + url.QueryEscape(ids[0])
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		for _, want := range ids[1:] {
			if got, _ := nextEvent(t, sc); got != want {
				t.Errorf("%s: resumed with %s, want %s", param, got, want)
			}
		}
		res.Body.Close()
	}
}
