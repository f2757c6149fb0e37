// Package skips counts the tests that skip for want of something the
// environment lacks (a server named by a variable, a program) and, once
// the tests ran, says how many skipped and what would run them: otherwise
// go test ./... passes a package whose every store test skipped as "ok",
// without a word.
package skips

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A Want is what skipped tests lack, and how to provide it.
type Want struct {
	// What names it, after "for want of": "a Redis server".
	What string
	// How says how to provide it: "set MERCURE_TEST_REDIS=host:port
	// (such as localhost:6399)".
	How string
}

// Skip skips t for want of w, and counts the skip for [Report].
func Skip(t testing.TB, w Want) {
	t.Helper()
	counts.add(w)
	t.Skip("for want of " + w.What + "; to run it, " + w.How)
}

// M is what a TestMain runs: *testing.M, or what Report returns
// (goleak.VerifyTestMain takes either).
type M interface{ Run() int }

// Report wraps the m of a TestMain so that, once the tests ran, a line on
// stderr says, for each [Want], how many tests of package pkg skipped for
// want of it:
//
//	pgstore: 34 tests skipped for want of a PostgreSQL server; to run them, set MERCURE_TEST_POSTGRES=...
//
// go test shows it with -v, or when run in the package's directory
// without arguments; go test ./... hides what a passing package prints.
func Report(pkg string, m M) M { return reporting{m, pkg, os.Stderr} }

type reporting struct {
	m   M
	pkg string
	out io.Writer
}

func (r reporting) Run() int {
	code := r.m.Run()
	counts.write(r.out, r.pkg)
	return code
}

// counts are the skips of this test binary, by Want.
var counts tally

type tally struct {
	mu sync.Mutex
	n  map[Want]int
}

func (c *tally) add(w Want) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[Want]int)
	}
	c.n[w]++
}

// write writes a line per Want that skipped tests, in a stable order.
func (c *tally) write(out io.Writer, pkg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wants := make([]Want, 0, len(c.n))
	for w := range c.n {
		wants = append(wants, w)
	}
	slices.SortFunc(wants, func(a, b Want) int { return strings.Compare(a.What, b.What) })
	for _, w := range wants {
		n, tests, them := c.n[w], "tests", "them"
		if n == 1 {
			tests, them = "test", "it"
		}
		fmt.Fprintf(out, "%s: %d %s skipped for want of %s; to run %s, %s\n", pkg, n, tests, w.What, them, w.How)
	}
}
