package main

import (
	"fmt"
	"path"
	"sort"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// A Finding is one problem in a file of the repository.
type Finding struct {
	File string // relative to the repository root
	Line int    // 0 when the finding is about the whole file
	Msg  string
}

func (f Finding) String() string {
	if f.Line == 0 {
		return fmt.Sprintf("%s: %s", f.File, f.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", f.File, f.Line, f.Msg)
}

// A repoRequire is one require of a repository module.
type repoRequire struct {
	from *Module
	path string
	vers string
	line int
}

// checkRequirements checks the go.mod files of ws: lockstep requirements of
// the repository's modules at one release version, no replace of them, no
// releasable module requiring an unreleasable one, and module paths that
// match their directories. want is the release version if the caller names
// one, else "": the version most requires name is then taken. It returns that
// version ("" when there is none) and the findings, in file order.
func checkRequirements(ws *Workspace, want string) (string, []Finding) {
	var findings []Finding
	add := func(m *Module, line int, format string, args ...any) {
		findings = append(findings, Finding{File: m.GoMod(), Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	var reqs []repoRequire
	for _, m := range ws.Modules {
		if m.RelDir != "." && m.Path != ws.Prefix+"/"+m.RelDir {
			add(m, m.File.Module.Syntax.Start.Line, "module path %s does not match its directory: the go command looks for it in %s", m.Path, path.Join(ws.Prefix, m.RelDir))
		}
		for _, r := range m.File.Require {
			if ws.isRepoModule(r.Mod.Path) {
				reqs = append(reqs, repoRequire{from: m, path: r.Mod.Path, vers: r.Mod.Version, line: r.Syntax.Start.Line})
			}
		}
		for _, r := range m.File.Replace {
			if ws.isRepoModule(r.Old.Path) {
				add(m, r.Syntax.Start.Line, "replace of %s: a user's build ignores it, so the published modules would not build as tested here; go.work serves local development", r.Old.Path)
			}
		}
	}
	for _, r := range reqs {
		target := ws.module(r.path)
		switch {
		case target == nil:
			add(r.from, r.line, "requires %s, which is not a module of go.work", r.path)
		case r.from.Releasable && !target.Releasable:
			add(r.from, r.line, "releasable module %s requires %s, which is never published: a user's go command cannot download it (move what the tests need into the module, e.g. an internal package)", r.from.Path, r.path)
		}
	}
	version, vfindings := lockstepVersion(reqs, want)
	findings = append(findings, vfindings...)
	sort.SliceStable(findings, func(i, j int) bool {
		if findings[i].File != findings[j].File {
			return findings[i].File < findings[j].File
		}
		return findings[i].Line < findings[j].Line
	})
	return version, findings
}

// lockstepVersion returns the release version of reqs: want if not "", else
// the release version most of them name (the highest on a tie), with a
// finding for each require that names another version or a pseudo-version.
func lockstepVersion(reqs []repoRequire, want string) (string, []Finding) {
	var findings []Finding
	count := make(map[string]int)
	for _, r := range reqs {
		if isReleaseVersion(r.vers) {
			count[r.vers]++
			continue
		}
		what := "not a canonical semantic version"
		if module.IsPseudoVersion(r.vers) {
			what = "a pseudo-version, which no tag publishes"
		}
		findings = append(findings, Finding{File: r.from.GoMod(), Line: r.line,
			Msg: fmt.Sprintf("requires %s %s, %s: require the release version", r.path, r.vers, what)})
	}
	version := want
	if version == "" {
		for v, n := range count {
			if version == "" || n > count[version] || n == count[version] && semver.Compare(v, version) > 0 {
				version = v
			}
		}
	}
	for _, r := range reqs {
		if isReleaseVersion(r.vers) && r.vers != version {
			findings = append(findings, Finding{File: r.from.GoMod(), Line: r.line,
				Msg: fmt.Sprintf("requires %s %s, but the release version is %s: the modules are versioned in lockstep", r.path, r.vers, version)})
		}
	}
	return version, findings
}

// isReleaseVersion reports whether v is a version that a tag can publish: a
// canonical semantic version without build metadata that is no pseudo-version.
func isReleaseVersion(v string) bool {
	return semver.IsValid(v) && semver.Canonical(v) == v && !module.IsPseudoVersion(v)
}
