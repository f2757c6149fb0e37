package mercure_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// What a program that imports only this module's packages (the root one
// and client) gets after go mod tidy, measured on 2026-12-02 with Go 1.26
// (docs/footprint.md): 28 indirect requirements, 141 go.sum lines and 54
// lines of go list -m all (the program's module and 53 others). The
// limits leave a small margin for upstream releases; a new requirement of
// this module that goes past them is a decision to take in docs/footprint.md.
const (
	maxRequirements = 28 + 3
	maxSumLines     = 141 + 9
	maxModules      = 54 + 4
)

// forbiddenModules are the drivers, routers and metrics libraries that
// live in modules of their own (boltstore, redisstore, pgstore, promhub,
// examples): none may reach a program that uses only this module, not
// even as a node of its module graph (so no package of it can import
// one).
var forbiddenModules = []string{
	"github.com/chromedp/",
	"github.com/jackc/pgx",
	"github.com/redis/go-redis",
	"go.etcd.io/bbolt",
	"github.com/prometheus/",
	"github.com/go-chi/",
	"github.com/gorilla/",
}

// A throwaway program importing the root package and client, with this
// checkout as the module: its go.mod, go.sum and module graph after go
// mod tidy hold no forbidden module and stay within the limits.
func TestFootprint(t *testing.T) {
	t.Parallel()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/consumer\n\ngo 1.25.0\n\n"+
		"require github.com/mercurekit/mercure v0.0.0-00010101000000-000000000000\n\n"+
		"replace github.com/mercurekit/mercure => "+root+"\n")
	write("main.go", `package main

import (
	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/client"
)

var _, _ = mercure.New, client.New

func main() {}
`)
	// The module cache first (what this module's own build downloaded,
	// go.sum checked then); the proxy only when something is missing.
	goCmd := func(proxy string, args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY="+proxy)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Logf("GOPROXY=%s go %s: %v\n%s", proxy, strings.Join(args, " "), err, stderr.Bytes())
		}
		return out, err
	}
	// A guard that cannot measure fails: a skip would pass unseen.
	proxy := "off"
	if _, err := goCmd(proxy, "mod", "tidy"); err != nil {
		out, err := exec.Command("go", "env", "GOPROXY").Output()
		proxy = strings.TrimSpace(string(out))
		if err != nil || proxy == "off" {
			t.Fatal("go mod tidy needs modules that are neither in the module cache nor reachable (GOPROXY=off): the footprint cannot be measured")
		}
		if _, err := goCmd(proxy, "mod", "tidy"); err != nil {
			t.Fatalf("go mod tidy cannot reach the modules it needs through GOPROXY=%s: the footprint cannot be measured", proxy)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// After go.mod and go.sum are read: go list may add go.sum lines.
	list, err := goCmd(proxy, "list", "-m", "all")
	if err != nil {
		t.Fatal(err)
	}

	for _, f := range []struct {
		name, text string
	}{{"go.mod", string(gomod)}, {"go.sum", string(gosum)}, {"go list -m all", string(list)}} {
		for _, m := range forbiddenModules {
			if strings.Contains(f.text, m) {
				t.Errorf("%s names %s", f.name, m)
			}
		}
	}
	requirements := strings.Count(string(gomod), "// indirect")
	sumLines := bytes.Count(gosum, []byte("\n"))
	modules := bytes.Count(list, []byte("\n"))
	t.Logf("%d indirect requirements, %d go.sum lines, %d modules in go list -m all", requirements, sumLines, modules)
	if requirements > maxRequirements {
		t.Errorf("%d indirect requirements, more than %d:\n%s", requirements, maxRequirements, gomod)
	}
	if sumLines > maxSumLines {
		t.Errorf("%d go.sum lines, more than %d", sumLines, maxSumLines)
	}
	if modules > maxModules {
		t.Errorf("%d modules in go list -m all, more than %d:\n%s", modules, maxModules, list)
	}
}
