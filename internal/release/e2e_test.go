package main

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A toyRepo is a throwaway multi-module git repository: the root module
// example.com/x, the releasable sub-module example.com/x/sub that requires
// it, and the test harness example.com/x/internal/harness, all in go.work.
type toyRepo struct {
	dir string
	env []string // of the commands run: no network, no checksum database
}

const (
	toyX = `package x

// Hello greets.
func Hello() string { return "hello" }

// Old is on its way out.
func Old() {}
`
	toySubMod = `module example.com/x/sub

go 1.25.0

require example.com/x v0.1.0
`
	toyWork       = "go 1.25.0\n\nuse (\n\t.\n\t./internal/harness\n\t./sub\n)\n"
	toyHarnessMod = `module example.com/x/internal/harness

go 1.25.0

require example.com/x v0.1.0
`
)

func newToyRepo(t *testing.T) *toyRepo {
	t.Helper()
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the end-to-end test runs %s: %v", tool, err)
		}
	}
	r := &toyRepo{dir: t.TempDir()}
	r.env = append(os.Environ(),
		"GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local",
		"GOMODCACHE="+t.TempDir(), // the check's "user's module cache", empty
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	for name, text := range map[string]string{
		"go.work":                     toyWork + "\nreplace example.com/x v0.1.0 => ./\n",
		"go.mod":                      "module example.com/x\n\ngo 1.25.0\n",
		"x.go":                        toyX,
		"LICENSE":                     "a licence\n",
		".gitignore":                  "*.test\n",
		"cmd/hello/main.go":           "package main\n\nimport \"example.com/x\"\n\nfunc main() { println(x.Hello()) }\n",
		"sub/go.mod":                  toySubMod,
		"sub/sub.go":                  "package sub\n\nimport \"example.com/x\"\n\n// Greet greets.\nfunc Greet() string { return x.Hello() }\n",
		"internal/harness/go.mod":     toyHarnessMod,
		"internal/harness/harness.go": "package harness\n\nimport \"example.com/x\"\n\n// Hello greets.\nfunc Hello() string { return x.Hello() }\n",
	} {
		r.write(t, name, text)
	}
	r.git(t, "init", "-q")
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", "toy")
	return r
}

func (r *toyRepo) write(t *testing.T, name, text string) {
	t.Helper()
	p := filepath.Join(r.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o666); err != nil {
		t.Fatal(err)
	}
}

func (r *toyRepo) git(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = r.dir, r.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// run runs the tool's subcommand with args on the repository and returns
// its output and whether it passed.
func (r *toyRepo) run(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args = append(args[:1:1], append([]string{"-root", r.dir}, args[1:]...)...)
	code := run(context.Background(), args, r.env, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code == 2 {
		t.Fatalf("usage error: %s", out)
	}
	return out, code == 0
}

func TestCheckEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds modules and runs the go command")
	}
	tests := []struct {
		name string
		edit func(t *testing.T, r *toyRepo)
		want []string // in the output when the check fails; none when it passes
	}{{
		name: "passes",
		want: nil,
	}, {
		name: "replace",
		edit: func(t *testing.T, r *toyRepo) {
			r.write(t, "sub/go.mod", toySubMod+"\nreplace example.com/x => ../\n")
		},
		want: []string{"FAIL sub/go.mod:7: replace of example.com/x: a user's build ignores it"},
	}, {
		name: "go.work without the replace of the untagged version",
		edit: func(t *testing.T, r *toyRepo) {
			r.write(t, "go.work", toyWork)
		},
		want: []string{"FAIL go.work: no replace of example.com/x v0.1.0, which is not published"},
	}, {
		name: "zero pseudo-version",
		edit: func(t *testing.T, r *toyRepo) {
			r.write(t, "sub/go.mod", strings.Replace(toySubMod, "v0.1.0", "v0.0.0-00010101000000-000000000000", 1))
		},
		want: []string{
			"FAIL sub/go.mod:5: requires example.com/x v0.0.0-00010101000000-000000000000, a pseudo-version, which no tag publishes",
			"FAIL example.com/x/sub: go get example.com/x/sub@v0.1.0: exit status 1",
		},
	}, {
		name: "releasable module requires the harness",
		edit: func(t *testing.T, r *toyRepo) {
			r.write(t, "sub/go.mod", toySubMod+"\nrequire example.com/x/internal/harness v0.1.0\n")
			r.write(t, "sub/sub_test.go", "package sub\n\nimport (\n\t\"testing\"\n\n\t\"example.com/x/internal/harness\"\n)\n\nfunc TestGreet(t *testing.T) {\n\tif Greet() != harness.Hello() {\n\t\tt.Fail()\n\t}\n}\n")
		},
		want: []string{
			"FAIL sub/go.mod:7: releasable module example.com/x/sub requires example.com/x/internal/harness, which is never published",
			// go get and go build pass: the program needs no package of
			// the harness, but its module graph does need the module.
			"FAIL example.com/x/sub: go list -m all: exit status 1",
		},
	}, {
		name: "a module imports another's internal package",
		edit: func(t *testing.T, r *toyRepo) {
			r.write(t, "internal/greet/greet.go", "package greet\n\n// Word is a greeting.\nconst Word = \"hi\"\n")
			r.write(t, "sub/sub_test.go", "package sub_test\n\nimport (\n\t\"testing\"\n\n\t\"example.com/x/internal/greet\"\n)\n\nfunc TestWord(t *testing.T) { _ = greet.Word }\n")
		},
		want: []string{"FAIL example.com/x/sub imports example.com/x/internal/greet, internal to module example.com/x"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newToyRepo(t)
			if tt.edit != nil {
				tt.edit(t, r)
				r.git(t, "add", "-A")
			}
			out, ok := r.run(t, "check")
			if ok != (tt.want == nil) {
				t.Fatalf("check passed: %v, want %v; output:\n%s", ok, tt.want == nil, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in the output:\n%s", w, out)
				}
			}
			if tt.want == nil {
				for _, w := range []string{
					"ok   example.com/x: 1 modules in the consumer's graph",
					"ok   example.com/x/sub: 2 modules in the consumer's graph",
					"nothing to compare against",
				} {
					if !strings.Contains(out, w) {
						t.Errorf("no %q in the output:\n%s", w, out)
					}
				}
			}
		})
	}
}

// TestCheckTagged checks that a tagged version is served from its tag, not
// the work tree, and that the next version is compared with it.
func TestCheckTagged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds modules and runs the go command")
	}
	r := newToyRepo(t)
	r.git(t, "tag", "v0.1.0")
	next := strings.Replace(toyX, "// Old is on its way out.\nfunc Old() {}\n", "// Bye says goodbye.\nfunc Bye() string { return \"bye\" }\n", 1)
	r.write(t, "x.go", next)
	r.write(t, "x.test", "a test binary, ignored\n")
	r.write(t, "notes.txt", "untracked, not ignored\n")

	keep := filepath.Join(t.TempDir(), "proxy")
	out, ok := r.run(t, "check", "-keep", keep)
	// Tagged, v0.1.0 of the root is published: who requires it commits its
	// hash, which the release procedure adds with go mod tidy.
	for _, w := range []string{
		"FAIL sub is not tidy",
		"go.sum: +example.com/x v0.1.0 h1:",
		"untracked files are left out",
		"notes.txt",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in the output:\n%s", w, out)
		}
	}
	if ok {
		t.Errorf("check passed without the hashes of the tagged version:\n%s", out)
	}
	files := zipFiles(t, filepath.Join(keep, "publish", "example.com", "x", "@v", "v0.1.0.zip"))
	if got := files["example.com/x@v0.1.0/x.go"]; got != toyX {
		t.Errorf("x.go in the proxy's v0.1.0:\n%s\nwant the tagged one:\n%s", got, toyX)
	}
	for name := range files {
		if strings.Contains(name, "/sub/") || strings.HasSuffix(name, ".test") || strings.HasSuffix(name, "notes.txt") {
			t.Errorf("the root module's zip has %s", name)
		}
	}

	r.tidy(t)
	if out, ok := r.run(t, "check"); !ok {
		t.Fatalf("check failed after tidy:\n%s", out)
	}

	t.Run("next version", func(t *testing.T) {
		gorelease := findGorelease(t)
		r.write(t, "sub/go.mod", strings.Replace(toySubMod, "v0.1.0", "v0.2.0", 1))
		r.write(t, "internal/harness/go.mod", strings.Replace(toyHarnessMod, "v0.1.0", "v0.2.0", 1))
		r.write(t, "go.work", toyWork+"\nreplace example.com/x v0.2.0 => ./\n")
		// The hashes of v0.1.0 go, and those of v0.2.0 wait for its tag.
		r.tidy(t)
		out, ok := r.run(t, "check", "-gorelease", gorelease)
		if !ok {
			t.Fatalf("check failed:\n%s", out)
		}
		// v0: the incompatible change is reported and allowed.
		for _, w := range []string{"ok   example.com/x v0.2.0 against v0.1.0:", "Old: removed", "Bye: added"} {
			if !strings.Contains(out, w) {
				t.Errorf("no %q in the output:\n%s", w, out)
			}
		}
	})
}

// tidy runs the tool's tidy and commits what it changed.
func (r *toyRepo) tidy(t *testing.T) {
	t.Helper()
	if out, ok := r.run(t, "tidy"); !ok {
		t.Fatalf("tidy failed:\n%s", out)
	}
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", "tidy")
}

func TestPlan(t *testing.T) {
	r := newToyRepo(t)
	out, ok := r.run(t, "plan")
	if !ok {
		t.Fatalf("plan failed:\n%s", out)
	}
	want := `
Step 1:
    git tag v0.1.0 && git push origin v0.1.0    # example.com/x

Step 2:
    (cd sub && GOWORK=off go get example.com/x@v0.1.0 && GOWORK=off go mod tidy)
    git commit -m "go.sum: the published v0.1.0 of the modules they require" sub/go.mod sub/go.sum
    git push origin HEAD
    git tag sub/v0.1.0 && git push origin sub/v0.1.0    # example.com/x/sub
`
	if !strings.Contains(out, want) {
		t.Errorf("plan:\n%s\nwant in it:\n%s", out, want)
	}
	out, _ = r.run(t, "plan", "-version", "v0.2.0")
	for _, w := range []string{
		"(cd sub && go mod edit -require=example.com/x@v0.2.0)",
		"go work edit -replace=example.com/x@v0.2.0=./",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("plan -version v0.2.0 does not say %q:\n%s", w, out)
		}
	}
}

// zipFiles returns the content of each file of the zip file name.
func zipFiles(t *testing.T, name string) map[string]string {
	t.Helper()
	zr, err := zip.OpenReader(name)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	files := make(map[string]string)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name] = string(data)
	}
	return files
}

// findGorelease returns a gorelease binary: on PATH, in GOPATH/bin, or
// installed for the test at the version that check pins. It skips the test
// when there is none and the network does not serve one.
func findGorelease(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("gorelease"); err == nil {
		return p
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "gorelease")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	bin := t.TempDir()
	cmd := exec.Command("go", "install", goreleasePkg)
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("gorelease is not installed, and go install %s failed, so the compatibility check is not tested: %v\n%s", goreleasePkg, err, out)
	}
	return filepath.Join(bin, "gorelease")
}
