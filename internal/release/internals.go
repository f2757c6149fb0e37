package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// checkInternals reports every import, by a package of one module (its
// tests included), of an internal package of another module of the
// repository. Go allows it by path, since every module's path lies below
// the root's, but an internal package promises nothing across module
// versions: a module that imports another's breaks, for its users, the
// first time the two are released apart.
func (s *session) checkInternals() {
	s.r.section("internal packages: none imported across modules")
	clean := true
	for _, m := range s.ws.Modules {
		found, err := s.internalImports(m)
		if err != nil {
			s.r.failf("%s: %v", m.RelDir, err)
			clean = false
			continue
		}
		for _, f := range found {
			s.r.failf("%s", f)
			clean = false
		}
	}
	if clean {
		s.r.okf("no module imports another module's internal packages")
	}
}

// listedPackage is what go list says of a package, for checkInternals.
type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// internalImports returns the imports by m's packages of internal
// packages of the repository's other modules, as findings.
func (s *session) internalImports(m *Module) ([]string, error) {
	args := []string{"list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports"}
	if s.o.tags != "" {
		args = append(args, "-tags", s.o.tags)
	}
	res, err := runCmd(s.ctx, m.Dir, workspaceModeEnv(s.o.env), "go", append(args, "./...")...)
	if err != nil {
		return nil, err
	}
	var found []string
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %v", err)
		}
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if owner := s.ws.owner(imp); owner != nil && owner != m && isInternal(imp) {
				found = append(found, fmt.Sprintf("%s imports %s, internal to module %s", p.ImportPath, imp, owner.Path))
			}
		}
	}
	slices.Sort(found)
	return slices.Compact(found), nil
}

// owner returns the module of go.work that holds the package with import
// path pkg: the one with the longest path that is pkg or leads it.
func (ws *Workspace) owner(pkg string) *Module {
	var best *Module
	for _, m := range ws.Modules {
		if (pkg == m.Path || strings.HasPrefix(pkg, m.Path+"/")) && (best == nil || len(m.Path) > len(best.Path)) {
			best = m
		}
	}
	return best
}

// isInternal reports whether the import path pkg has an element
// "internal".
func isInternal(pkg string) bool {
	return slices.Contains(strings.Split(pkg, "/"), "internal")
}

// workspaceModeEnv is env for a go command in workspace mode, which
// refuses GOFLAGS' -mod=mod: without it.
func workspaceModeEnv(env []string) []string {
	flags := strings.Fields(envValue(env, "GOFLAGS"))
	flags = slices.DeleteFunc(flags, func(f string) bool { return strings.HasPrefix(f, "-mod=") })
	return append(slices.Clone(env), "GOFLAGS="+strings.Join(flags, " "))
}
