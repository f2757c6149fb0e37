package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The tidy rule: a module's go.mod and go.sum are what go mod tidy makes of
// them without go.work, against the published modules (here the disk
// proxies), except for the go.sum lines of repository modules at versions
// that are not tagged. Those lines hash content that is not released: the
// work tree's, which changes with every commit until the tag, and which no
// one can download to verify. They are never committed; the release
// procedure adds the published hash of each version once it is tagged,
// before tagging the modules that require it. The modules that are not
// released (internal/..., examples) are never tagged, so their lines are
// never committed either.

// checkTidy checks that each module of go.work is tidy.
func (s *session) checkTidy() {
	s.r.section("tidy: go mod tidy -diff in each module, without go.work")
	for _, m := range s.ws.Modules {
		problems, err := s.tidy(m, false)
		switch {
		case err != nil:
			s.r.failf("%s: %v", m.GoMod(), err)
		case len(problems) > 0:
			s.r.failf("%s is not tidy (GOWORK=off; fix with go run ./internal/release tidy):\n%s", m.RelDir, strings.Join(problems, "\n"))
		default:
			s.r.okf("%s", m.RelDir)
		}
	}
}

// tidy runs go mod tidy in m on copies of its go.mod and go.sum, the go.sum
// less the lines that the tidy rule keeps out. With fix, it writes the tidy
// files back into m, less those lines again, and returns what it changed;
// else it runs go mod tidy -diff and returns the differences.
func (s *session) tidy(m *Module, fix bool) ([]string, error) {
	goSum, err := os.ReadFile(filepath.Join(m.Dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	kept, dropped := s.splitSums(goSum)
	var problems []string
	for _, line := range dropped {
		problems = append(problems, fmt.Sprintf("%s:%d: %s is a hash of unreleased content, never committed: delete it", path.Join(m.RelDir, "go.sum"), line.n, line.text))
	}
	dir, err := os.MkdirTemp(s.tmp, "tidy-")
	if err != nil {
		return nil, err
	}
	goMod, err := os.ReadFile(filepath.Join(m.Dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	modFile := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(modFile, goMod, 0o666); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), kept, 0o666); err != nil {
		return nil, err
	}
	if fix {
		return s.fixTidy(m, dir, goMod, goSum)
	}
	res, err := s.run(m.Dir, s.workspaceEnv, "go", "mod", "tidy", "-diff", "-modfile="+modFile)
	if err != nil && !strings.HasPrefix(res.stdout, "diff ") {
		return nil, err
	}
	return append(problems, tidyChanges(res.stdout, s.unreleasedSum)...), nil
}

// fixTidy runs go mod tidy on the copies of m's go.mod and go.sum in dir
// and writes the result into m.
func (s *session) fixTidy(m *Module, dir string, goMod, goSum []byte) ([]string, error) {
	modFile := filepath.Join(dir, "go.mod")
	if _, err := s.run(m.Dir, s.workspaceEnv, "go", "mod", "tidy", "-modfile="+modFile); err != nil {
		return nil, err
	}
	newMod, err := os.ReadFile(modFile)
	if err != nil {
		return nil, err
	}
	newSum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	newSum, _ = s.splitSums(newSum)
	var changed []string
	for _, f := range []struct {
		name     string
		old, new []byte
	}{{"go.mod", goMod, newMod}, {"go.sum", goSum, newSum}} {
		if bytes.Equal(f.old, f.new) {
			continue
		}
		if err := os.WriteFile(filepath.Join(m.Dir, f.name), f.new, 0o666); err != nil {
			return nil, err
		}
		changed = append(changed, path.Join(m.RelDir, f.name))
	}
	return changed, nil
}

// A sumLine is a line of a go.sum file and its number.
type sumLine struct {
	n    int
	text string
}

// splitSums splits the go.sum content data into what the tidy rule keeps
// and the lines it keeps out.
func (s *session) splitSums(data []byte) ([]byte, []sumLine) {
	var kept bytes.Buffer
	var dropped []sumLine
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if s.unreleasedSum(strings.TrimSpace(line)) {
			dropped = append(dropped, sumLine{i + 1, strings.TrimSpace(line)})
			continue
		}
		kept.WriteString(line)
	}
	return kept.Bytes(), dropped
}

// unreleasedSum reports whether line is a go.sum line of a repository
// module at a version without a tag.
func (s *session) unreleasedSum(line string) bool {
	f := strings.Fields(line)
	if len(f) != 3 || !s.ws.isRepoModule(f[0]) {
		return false
	}
	return !s.tagged(f[0], strings.TrimSuffix(f[1], "/go.mod"))
}

// tidyChanges returns the changed lines in the output of go mod tidy -diff,
// each after the name of its file, less the go.sum lines that ignore
// reports true for.
func tidyChanges(diff string, ignore func(line string) bool) []string {
	var changes []string
	file := ""
	for _, line := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "diff "), strings.HasPrefix(line, "@@"), strings.HasPrefix(line, "+++ "):
		case strings.HasPrefix(line, "--- "):
			file = path.Base(strings.TrimPrefix(line, "--- "))
		case strings.HasPrefix(line, "+"), strings.HasPrefix(line, "-"):
			if file == "go.sum" && ignore(line[1:]) {
				continue
			}
			changes = append(changes, file+": "+line)
		}
	}
	return changes
}

// runTidy runs tidy: it rewrites each module's go.mod and go.sum as check
// wants them.
func runTidy(ctx context.Context, o options) (bool, error) {
	s, err := startSession(ctx, o)
	if s == nil || err != nil {
		return false, err
	}
	defer s.close()
	if err := s.layout(); err != nil {
		return false, err
	}
	s.r.section("tidy: go mod tidy in each module, without go.work")
	for _, m := range s.ws.Modules {
		changed, err := s.tidy(m, true)
		switch {
		case err != nil:
			s.r.failf("%s: %v", m.RelDir, err)
		case len(changed) > 0:
			s.r.okf("%s: rewrote %s", m.RelDir, strings.Join(changed, " and "))
		default:
			s.r.okf("%s: tidy already", m.RelDir)
		}
	}
	return s.done(), nil
}
