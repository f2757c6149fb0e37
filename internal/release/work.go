package main

import (
	"fmt"
	"path/filepath"
	"sort"

	"golang.org/x/mod/modfile"
)

// checkWork checks that go.work serves local development at the release
// version: in workspace mode the go command still reads the go.mod of each
// module version that a go.mod requires, even of a module that go.work
// uses (go.work's modules are where the module graph starts, not a
// replacement of every version of them). A required version that is not
// published, because it is not tagged yet or is a harness that never is,
// must then be replaced in go.work by its directory, at that version: go.work
// may not replace every version of a module that it uses.
func checkWork(ws *Workspace, version string, tagged func(modPath, v string) bool) []Finding {
	required := make(map[string]bool)
	for _, m := range ws.Modules {
		for _, r := range m.File.Require {
			if r.Mod.Version == version && ws.module(r.Mod.Path) != nil {
				required[r.Mod.Path] = true
			}
		}
	}
	var findings []Finding
	for _, m := range ws.Modules {
		if !required[m.Path] || tagged(m.Path, version) {
			continue
		}
		r := workReplaceOf(ws, m.Path, version)
		if r == nil {
			findings = append(findings, Finding{File: "go.work",
				Msg: fmt.Sprintf("no replace of %s %s, which is not published: in workspace mode the go command reads the go.mod of each required version; add it: go work edit -replace=%s", m.Path, version, workReplace(m, version))})
			continue
		}
		dir := filepath.FromSlash(r.New.Path)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(ws.Root, dir)
		}
		if r.New.Version != "" || dir != m.Dir {
			findings = append(findings, Finding{File: "go.work", Line: r.Syntax.Start.Line,
				Msg: fmt.Sprintf("replaces %s %s with %s, not its directory ./%s", m.Path, version, r.New, m.RelDir)})
		}
	}
	sort.SliceStable(findings, func(i, j int) bool { return findings[i].Line < findings[j].Line })
	return findings
}

// workReplaceOf returns go.work's replace of modPath at version, or nil.
func workReplaceOf(ws *Workspace, modPath, version string) *modfile.Replace {
	for _, r := range ws.Work.Replace {
		if r.Old.Path == modPath && r.Old.Version == version {
			return r
		}
	}
	return nil
}

// workReplace is the -replace argument of go work edit that replaces m at
// version with its directory.
func workReplace(m *Module, version string) string {
	if m.RelDir == "." {
		return m.Path + "@" + version + "=./"
	}
	return m.Path + "@" + version + "=./" + m.RelDir
}

// checkWork reports what checkWork finds.
func (s *session) checkWork() {
	s.r.section("go.work: local development at " + s.version)
	findings := checkWork(s.ws, s.version, s.tagged)
	for _, f := range findings {
		s.r.failf("%s", f)
	}
	if len(findings) == 0 {
		s.r.okf("go.work replaces each required version that is not published with its directory")
	}
}
