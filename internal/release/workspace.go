package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// A Module is one module of go.work.
type Module struct {
	Path       string        // module path
	Dir        string        // absolute directory
	RelDir     string        // directory relative to the repository root, slash-separated, "." for the root
	File       *modfile.File // parsed go.mod, replace directives included
	Releasable bool          // tagged and published; see releasable
	TagPrefix  string        // what precedes the version in its tags: "" or "dir/"
}

// GoMod is the module's go.mod as findings name it.
func (m *Module) GoMod() string { return path.Join(m.RelDir, "go.mod") }

// A Workspace is the repository's set of modules, as go.work lists them.
type Workspace struct {
	Root    string    // absolute directory of go.work
	Prefix  string    // the root module's path: every repository module's path starts with it
	Modules []*Module // in go.work's order
	Work    *modfile.WorkFile
	byPath  map[string]*Module
}

// releasable reports whether the module with path modPath in directory relDir
// (slash-separated, relative to the repository root) is tagged and
// published: not when its path has an element "internal", since Go would let
// nothing outside the repository import it, nor when it is examples or below,
// which hold demo programs.
func releasable(modPath, relDir string) bool {
	for _, elem := range strings.Split(modPath, "/") {
		if elem == "internal" {
			return false
		}
	}
	first, _, _ := strings.Cut(relDir, "/")
	return first != "examples"
}

// isRepoModule reports whether modPath names one of the repository's modules,
// by its path alone: the root module's path or a path below it.
func (ws *Workspace) isRepoModule(modPath string) bool {
	return modPath == ws.Prefix || strings.HasPrefix(modPath, ws.Prefix+"/")
}

// module returns the module of go.work with path modPath, or nil.
func (ws *Workspace) module(modPath string) *Module { return ws.byPath[modPath] }

// loadWorkspace reads go.work in root and the go.mod of each module it uses.
func loadWorkspace(root string) (*Workspace, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, err
	}
	workFile := filepath.Join(root, "go.work")
	data, err := os.ReadFile(workFile)
	if err != nil {
		return nil, fmt.Errorf("reading go.work: %w (run from the repository root or pass -root)", err)
	}
	work, err := modfile.ParseWork(workFile, data, nil)
	if err != nil {
		return nil, err
	}
	var mods []*Module
	for _, use := range work.Use {
		dir := filepath.Clean(filepath.Join(root, filepath.FromSlash(use.Path)))
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("go.work:%d: %s is outside the repository", use.Syntax.Start.Line, use.Path)
		}
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, fmt.Errorf("go.work:%d: %w", use.Syntax.Start.Line, err)
		}
		m, err := newModule(filepath.ToSlash(rel), data)
		if err != nil {
			return nil, err
		}
		m.Dir = dir
		mods = append(mods, m)
	}
	ws, err := newWorkspace(root, mods)
	if err != nil {
		return nil, err
	}
	ws.Work = work
	top, err := gitToplevel(root)
	if err != nil {
		return nil, err
	}
	for _, m := range ws.Modules {
		rel, err := filepath.Rel(top, m.Dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("%s is outside the git repository %s", m.Dir, top)
		}
		if rel != "." {
			m.TagPrefix = filepath.ToSlash(rel) + "/"
		}
	}
	return ws, nil
}

// newModule parses the go.mod text data of the module in directory relDir.
func newModule(relDir string, data []byte) (*Module, error) {
	name := path.Join(relDir, "go.mod")
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil {
		return nil, fmt.Errorf("%s: no module directive", name)
	}
	return &Module{Path: f.Module.Mod.Path, RelDir: relDir, File: f}, nil
}

// newWorkspace gathers mods, one of which is the root module (RelDir ".").
func newWorkspace(root string, mods []*Module) (*Workspace, error) {
	ws := &Workspace{Root: root, Modules: mods, byPath: make(map[string]*Module)}
	for _, m := range mods {
		if other := ws.byPath[m.Path]; other != nil {
			return nil, fmt.Errorf("%s and %s both declare module %s", other.GoMod(), m.GoMod(), m.Path)
		}
		ws.byPath[m.Path] = m
		if m.Dir == "" {
			m.Dir = filepath.Join(root, filepath.FromSlash(m.RelDir))
		}
		if m.RelDir == "." {
			ws.Prefix = m.Path
		}
	}
	if ws.Prefix == "" {
		return nil, fmt.Errorf("go.work uses no module in its own directory: the root module's path is what names the repository's modules")
	}
	for _, m := range mods {
		if !ws.isRepoModule(m.Path) {
			return nil, fmt.Errorf("%s: module %s is not below the root module %s, so its version tags could not be told apart", m.GoMod(), m.Path, ws.Prefix)
		}
		m.Releasable = releasable(m.Path, m.RelDir)
	}
	return ws, nil
}

// releasableModules returns the releasable modules in go.work's order.
func (ws *Workspace) releasableModules() []*Module {
	var rel []*Module
	for _, m := range ws.Modules {
		if m.Releasable {
			rel = append(rel, m)
		}
	}
	return rel
}
