package main

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"
)

// checkConsumers checks, for each releasable module, what a new program
// that uses it gets: go get of the module at the release version, a build
// that imports each of its public packages, and a module graph without
// anything that is never published.
func (s *session) checkConsumers() {
	s.r.section(fmt.Sprintf("consumers: a new program's go get of each releasable module at %s", s.version))
	for _, m := range s.ws.releasableModules() {
		count, problems, err := s.consumer(m)
		switch {
		case err != nil:
			s.r.failf("%s: %v", m.Path, err)
		case len(problems) > 0:
			for _, p := range problems {
				s.r.failf("%s: %s", m.Path, p)
			}
		default:
			s.r.okf("%s: %d modules in the consumer's graph", m.Path, count)
		}
	}
}

// consumer builds a scratch program that imports every public package of
// m, and returns how many modules its graph has and what in that graph no
// user could have.
func (s *session) consumer(m *Module) (int, []string, error) {
	src, err := s.source(m)
	if err != nil {
		return 0, nil, err
	}
	pkgs, err := importablePackages(src, m.Path)
	if err != nil {
		return 0, nil, err
	}
	dir, err := os.MkdirTemp(s.tmp, "consumer-")
	if err != nil {
		return 0, nil, err
	}
	goMod := "module example.com/consumer\n\ngo 1.25.0\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o666); err != nil {
		return 0, nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), consumerMain(m.Path, pkgs), 0o666); err != nil {
		return 0, nil, err
	}
	for _, args := range [][]string{{"get", m.Path + "@" + s.version}, {"build", "./..."}} {
		if _, err := s.run(dir, s.publishEnv, "go", args...); err != nil {
			return 0, nil, err
		}
	}
	res, err := s.run(dir, s.publishEnv, "go", "list", "-m", "all")
	if err != nil {
		return 0, nil, err
	}
	count, problems := s.graphProblems(res.stdout)
	return count, problems, nil
}

// consumerMain is the main.go of a program that imports pkgs of module
// modPath.
func consumerMain(modPath string, pkgs []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "// Command consumer imports every public package of %s, as a program that uses it would.\npackage main\n\n", modPath)
	if len(pkgs) > 0 {
		b.WriteString("import (\n")
		for _, p := range pkgs {
			fmt.Fprintf(&b, "\t_ %q\n", p)
		}
		b.WriteString(")\n\n")
	}
	b.WriteString("func main() {}\n")
	return []byte(b.String())
}

// graphProblems reads the output of go list -m all, whose first line is the
// main module. It returns the number of the other modules and what no user
// could have among them: a repository module that is never published, or a
// pseudo-version of one.
func (s *session) graphProblems(list string) (int, []string) {
	lines := strings.Split(strings.TrimSpace(list), "\n")
	var problems []string
	for _, line := range lines[1:] {
		modPath, vers, _ := strings.Cut(line, " ")
		if !s.ws.isRepoModule(modPath) {
			continue
		}
		if m := s.ws.module(modPath); m == nil || !m.Releasable {
			problems = append(problems, fmt.Sprintf("the consumer's module graph has %s %s, which is never published", modPath, vers))
		}
		if module.IsPseudoVersion(vers) {
			problems = append(problems, fmt.Sprintf("the consumer's module graph has %s at the pseudo-version %s", modPath, vers))
		}
	}
	return len(lines) - 1, problems
}

// importablePackages returns the import paths of the packages in the
// module source dir (module path modPath) that another module can import:
// not internal, not a main package, not in testdata, and with at least one
// Go file that builds here besides tests.
func importablePackages(dir, modPath string) ([]string, error) {
	var pkgs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if p != dir && (name == "testdata" || name == "internal" || name == "vendor" ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		pkg, err := build.Default.ImportDir(p, 0)
		var noGo *build.NoGoError
		switch {
		case errors.As(err, &noGo):
			return nil
		case err != nil:
			return err
		case pkg.Name == "main" || len(pkg.GoFiles)+len(pkg.CgoFiles) == 0:
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		pkgs = append(pkgs, path.Join(modPath, filepath.ToSlash(rel)))
		return nil
	})
	return pkgs, err
}
