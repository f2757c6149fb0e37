package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// releaseLevels orders the modules nodes for release: deps maps a module
// to those it requires (others than nodes are left out), and each level
// holds the modules whose requirements are all in earlier levels, sorted.
// A cycle has no order: the error names the modules in or behind it.
func releaseLevels(nodes []string, deps map[string][]string) ([][]string, error) {
	placed := make(map[string]bool)
	var levels [][]string
	for len(placed) < len(nodes) {
		var level []string
		for _, n := range nodes {
			if placed[n] {
				continue
			}
			ready := true
			for _, d := range deps[n] {
				if d != n && slices.Contains(nodes, d) && !placed[d] {
					ready = false
				}
			}
			if ready {
				level = append(level, n)
			}
		}
		if len(level) == 0 {
			var rest []string
			for _, n := range nodes {
				if !placed[n] {
					rest = append(rest, n)
				}
			}
			sort.Strings(rest)
			return nil, fmt.Errorf("the requirements between these modules form a cycle, so none can be tagged first: %s", strings.Join(rest, ", "))
		}
		sort.Strings(level)
		for _, n := range level {
			placed[n] = true
		}
		levels = append(levels, level)
	}
	return levels, nil
}

// repoRequires returns the repository modules that m requires.
func (ws *Workspace) repoRequires(m *Module) []string {
	var paths []string
	for _, r := range m.File.Require {
		if ws.isRepoModule(r.Mod.Path) && r.Mod.Path != m.Path {
			paths = append(paths, r.Mod.Path)
		}
	}
	return paths
}

// runPlan prints the release procedure.
func runPlan(o options) (bool, error) {
	ws, err := loadWorkspace(o.root)
	if err != nil {
		return false, err
	}
	version, findings := checkRequirements(ws, "")
	if o.version != "" {
		version = o.version
	}
	if version == "" {
		return false, fmt.Errorf("no go.mod requires another module of %s at a release version: pass -version", ws.Prefix)
	}
	var nodes []string
	deps := make(map[string][]string)
	for _, m := range ws.releasableModules() {
		nodes = append(nodes, m.Path)
		deps[m.Path] = ws.repoRequires(m)
	}
	levels, err := releaseLevels(nodes, deps)
	if err != nil {
		return false, err
	}
	printPlan(o.stdout, ws, version, levels, len(findings))
	return true, nil
}

// printPlan prints the release procedure of version, whose modules are in
// levels; findings is the number of go.mod problems check would report.
func printPlan(w io.Writer, ws *Workspace, version string, levels [][]string, findings int) {
	fmt.Fprintf(w, "Release %s of %s: the releasable modules in dependency order,\n", version, ws.Prefix)
	fmt.Fprintf(w, "each tagged once the modules it requires are published.\n\n")
	fmt.Fprintf(w, "Before: every go.mod requires the repository's modules at %s, and the check passes.\n", version)
	for _, m := range ws.Modules {
		var edits []string
		for _, r := range m.File.Require {
			if ws.isRepoModule(r.Mod.Path) && r.Mod.Version != version {
				edits = append(edits, "-require="+r.Mod.Path+"@"+version)
			}
		}
		if len(edits) > 0 {
			fmt.Fprintf(w, "    (cd %s && go mod edit %s)\n", m.RelDir, strings.Join(edits, " "))
		}
	}
	if edits := missingWorkReplaces(ws, version); len(edits) > 0 {
		fmt.Fprintf(w, "    go work edit -replace=%s\n", strings.Join(edits, " -replace="))
	}
	if findings > 0 {
		fmt.Fprintf(w, "    # the go.mod files have %d problems now: go run ./internal/release check names them\n", findings)
	}
	fmt.Fprintf(w, "    go run ./internal/release check -version %s\n", version)
	published := make(map[string]bool)
	for i, level := range levels {
		fmt.Fprintf(w, "\nStep %d:\n", i+1)
		var files []string
		for _, p := range level {
			m := ws.module(p)
			var gets []string
			for _, d := range ws.repoRequires(m) {
				if published[d] {
					gets = append(gets, d+"@"+version)
				}
			}
			if len(gets) > 0 {
				fmt.Fprintf(w, "    (cd %s && GOWORK=off go get %s && GOWORK=off go mod tidy)\n", m.RelDir, strings.Join(gets, " "))
				files = append(files, m.RelDir+"/go.mod", m.RelDir+"/go.sum")
			}
		}
		if len(files) > 0 {
			fmt.Fprintf(w, "    git commit -m \"go.sum: the published %s of the modules they require\" %s\n", version, strings.Join(files, " "))
			fmt.Fprintf(w, "    git push origin HEAD\n")
		}
		for _, p := range level {
			tag := ws.module(p).TagPrefix + version
			fmt.Fprintf(w, "    git tag %s && git push origin %s    # %s\n", tag, tag, p)
			published[p] = true
		}
	}
	fmt.Fprintf(w, "\nAfter: the modules that are not released record the published hashes too:\n")
	fmt.Fprintf(w, "    go run ./internal/release tidy && git commit -am \"go.sum: the published %s\"\n", version)
}

// missingWorkReplaces returns the go work edit -replace arguments that
// make go.work replace each module that a go.mod requires at version.
func missingWorkReplaces(ws *Workspace, version string) []string {
	required := make(map[string]bool)
	for _, m := range ws.Modules {
		for _, p := range ws.repoRequires(m) {
			required[p] = true
		}
	}
	var edits []string
	for _, m := range ws.Modules {
		if required[m.Path] && workReplaceOf(ws, m.Path, version) == nil {
			edits = append(edits, workReplace(m, version))
		}
	}
	return edits
}
