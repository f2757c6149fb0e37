package mercure_test

// Every Go snippet of the docs is exercised.
//
// The convention: each ```go block of README.md and docs/*.md appears
// verbatim in a _test.go file of this repository that declares Examples,
// in an Example function (or in code that one calls), so that `go test` compiles it and, where
// the Example has an Output comment, runs it. "Verbatim" compares line by
// line, ignoring each line's leading and trailing spaces and tabs, so that
// a snippet may sit indented in a function; the lines must follow each
// other in the test file as they do in the snippet. Snippets that need only
// this module live in docs_example_test.go; those that need chi,
// gorilla/mux, a store's driver or Prometheus live in examples/guides (a
// module that requires them); the migration guide's is
// ExampleWithLegacyClients. To change a snippet, change it in both places.
//
// TestDocsSnippets reads the test files of every module as text, so a
// snippet edited in the docs but not in its Example (or the other way
// round) fails here, and an Example that no longer compiles fails its own
// module's tests.

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goFence finds the ```go blocks of a markdown file.
var goFence = regexp.MustCompile("(?ms)^```go\n(.*?)^```$")

// normalize trims every line of s, so that indentation does not count.
func normalize(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(lines, "\n")
}

func TestDocsSnippets(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"README.md"}, docs...)

	var tests []string // the normalized test files, each between newlines
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || path == "docs_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "\nfunc Example") { // only files that go test runs as examples
			tests = append(tests, "\n"+normalize(string(b))+"\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	snippets := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goFence.FindAllSubmatchIndex(b, -1) {
			snippets++
			snippet := string(b[m[2]:m[3]])
			line := 1 + strings.Count(string(b[:m[0]]), "\n")
			want := "\n" + normalize(snippet) + "\n"
			found := false
			for _, f := range tests {
				if strings.Contains(f, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s:%d: this Go snippet is in no test file: put it, verbatim, in an Example (see docs_test.go)\n%s", doc, line, snippet)
			}
		}
	}
	if snippets < 10 {
		t.Fatalf("found %d Go snippets in %v: is the fence pattern still right?", snippets, docs)
	}
}

// TestReadmeIsShort keeps the README a five-minute introduction (issue 21):
// what goes beyond belongs in a guide under docs/.
func TestReadmeIsShort(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= 250 {
		t.Errorf("README.md has %d lines, want under 250: move the details to a guide under docs/", n)
	}
}
