package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/module"
)

// A session is one run of check or tidy: the disk proxies and the module
// caches, in directories of its own.
type session struct {
	ctx     context.Context
	ws      *Workspace
	o       options
	r       *reporter
	version string              // the release version
	top     string              // git top directory
	tags    map[string][]string // module path to its tagged versions, ascending
	tmp     string              // removed by close
	user    userGoEnv

	// publish serves the releasable modules, as the real proxy will;
	// unreleased serves the others at the release version, for what only
	// the modules of go.work need (tidy), never for a user's view.
	publish, unreleased *diskProxy
	// publishEnv is the go environment of a user of the published
	// modules; workspaceEnv also has the unreleased ones. Each has a module
	// cache of its own, so that what one has downloaded never serves the
	// other.
	publishEnv, workspaceEnv []string
	sources                  map[string]string // module path to its unpacked release content
}

// runCheck runs check. It returns false when the check failed, and an
// error when it could not run.
func runCheck(ctx context.Context, o options) (bool, error) {
	s, err := startSession(ctx, o)
	if s == nil || err != nil {
		return false, err
	}
	defer s.close()
	s.checkWork()
	s.checkInternals()
	if err := s.layout(); err != nil {
		return false, err
	}
	s.checkConsumers()
	s.checkCompat()
	s.checkTidy()
	return s.done(), nil
}

// startSession loads the workspace and checks the go.mod requirements. It
// returns a nil session, after reporting why, when there is no release
// version to check at.
func startSession(ctx context.Context, o options) (*session, error) {
	ws, err := loadWorkspace(o.root)
	if err != nil {
		return nil, err
	}
	r := &reporter{w: o.stdout, verbose: o.verbose}
	r.section(fmt.Sprintf("go.mod requirements (%d modules in go.work, %d releasable)", len(ws.Modules), len(ws.releasableModules())))
	version, findings := checkRequirements(ws, o.version)
	for _, f := range findings {
		r.failf("%s", f)
	}
	if version == "" {
		r.failf("no release version: no go.mod requires another module of %s at a release version; pass -version", ws.Prefix)
		r.done()
		return nil, nil
	}
	if len(findings) == 0 {
		r.okf("every module requires the repository's others at %s, without replace", version)
	}
	s := &session{ctx: ctx, ws: ws, o: o, r: r, version: version, sources: make(map[string]string)}
	if err := s.setup(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// setup makes the session's directories and reads the tags.
func (s *session) setup() error {
	var err error
	if s.tmp, err = os.MkdirTemp("", "release-check-"); err != nil {
		return err
	}
	proxyRoot := filepath.Join(s.tmp, "proxy")
	if s.o.keep != "" {
		if proxyRoot, err = emptyDir(s.o.keep); err != nil {
			return err
		}
	}
	s.publish = newDiskProxy(filepath.Join(proxyRoot, "publish"))
	s.unreleased = newDiskProxy(filepath.Join(proxyRoot, "unreleased"))
	if s.user, err = readGoEnv(s.ctx, s.o.env); err != nil {
		return err
	}
	s.publishEnv = moduleEnv(s.o.env, s.user, s.ws.Prefix, filepath.Join(s.tmp, "modcache-publish"), s.publish.url())
	s.workspaceEnv = moduleEnv(s.o.env, s.user, s.ws.Prefix, filepath.Join(s.tmp, "modcache-workspace"), s.publish.url(), s.unreleased.url())
	for _, key := range []string{"GOWORK", "GOPROXY", "GONOSUMDB", "GOPRIVATE", "GONOPROXY", "GOFLAGS", "GOMODCACHE"} {
		s.r.verbosef("consumers: %s=%s", key, envValue(s.publishEnv, key))
	}
	s.r.verbosef("tidy: GOPROXY=%s GOMODCACHE=%s", envValue(s.workspaceEnv, "GOPROXY"), envValue(s.workspaceEnv, "GOMODCACHE"))
	if s.top, err = gitToplevel(s.ws.Root); err != nil {
		return err
	}
	tags, err := listTags(s.ctx, s.top)
	if err != nil {
		return err
	}
	s.tags = make(map[string][]string)
	for _, m := range s.ws.Modules {
		s.tags[m.Path] = moduleTags(tags, m)
	}
	return nil
}

// emptyDir makes dir if it does not exist and returns its absolute path; an
// existing dir must be empty, so that no version of an earlier run lingers.
func emptyDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("-keep %s: the directory is not empty; remove it or name another", dir)
	}
	return dir, nil
}

// close removes the session's temporary directories.
func (s *session) close() {
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
}

// done prints the outcome and reports whether there was no failure.
func (s *session) done() bool { return s.r.done() }

func (r *reporter) done() bool {
	if r.failures > 0 {
		fmt.Fprintf(r.w, "\nFAIL: %d problems\n", r.failures)
		return false
	}
	fmt.Fprintf(r.w, "\nPASS\n")
	return true
}

// tagged reports whether modPath has a tag for version v.
func (s *session) tagged(modPath, v string) bool { return slices.Contains(s.tags[modPath], v) }

// layout fills the disk proxies: each releasable module at the release
// version (from its tag if it has one, else from the work tree) and at each
// of its tagged versions, and the other modules at the release version.
func (s *session) layout() error {
	s.r.section("module proxy on disk")
	work, err := snapshot(s.ctx, s.top)
	if err != nil {
		return err
	}
	fromWork := false
	for _, m := range s.ws.Modules {
		proxy, rev, from := s.unreleased, work, "work tree"
		if m.Releasable {
			proxy = s.publish
			if s.tagged(m.Path, s.version) {
				rev = m.TagPrefix + s.version
				from = "tag " + rev
			}
		}
		fromWork = fromWork || rev == work
		if err := proxy.add(s.ctx, s.top, m, s.version, rev); err != nil {
			s.r.failf("%s %s: %v", m.Path, s.version, err)
			continue
		}
		var older []string
		for _, v := range s.tags[m.Path] {
			if v == s.version || !m.Releasable {
				continue
			}
			if err := proxy.add(s.ctx, s.top, m, v, m.TagPrefix+v); err != nil {
				s.r.failf("%s %s: %v", m.Path, v, err)
				continue
			}
			older = append(older, v)
		}
		s.r.verbosef("%s %s from the %s%s", m.Path, s.version, from, tagNote(m, older))
	}
	if err := s.publish.writeLists(); err != nil {
		return err
	}
	if err := s.unreleased.writeLists(); err != nil {
		return err
	}
	s.r.okf("releasable modules in %s, the others in %s", s.publish.dir, s.unreleased.dir)
	if fromWork {
		return s.noteUntracked()
	}
	return nil
}

// tagNote says which tagged versions of m the proxy serves too.
func tagNote(m *Module, versions []string) string {
	switch {
	case !m.Releasable:
		return " (not released)"
	case len(versions) == 0:
		return ""
	}
	return "; tagged: " + strings.Join(versions, " ")
}

// noteUntracked names the files that the work tree has but git does not
// track: the modules taken from the work tree leave them out.
func (s *session) noteUntracked() error {
	files, err := untracked(s.ctx, s.top)
	if err != nil || len(files) == 0 {
		return err
	}
	const most = 10
	s.r.notef("%d untracked files are left out, as a commit would leave them out (git add what is to be published):", len(files))
	for i, f := range files {
		if i == most {
			s.r.notef("  and %d more", len(files)-most)
			break
		}
		s.r.notef("  %s", f)
	}
	return nil
}

// source returns a directory holding the release content of m, unpacked
// from the disk proxy.
func (s *session) source(m *Module) (string, error) {
	if dir, ok := s.sources[m.Path]; ok {
		return dir, nil
	}
	dir, err := os.MkdirTemp(s.tmp, "src-")
	if err != nil {
		return "", err
	}
	mv := module.Version{Path: m.Path, Version: s.version}
	if err := s.publish.extract(mv, filepath.Join(dir, "m")); err != nil {
		return "", err
	}
	s.sources[m.Path] = filepath.Join(dir, "m")
	return s.sources[m.Path], nil
}

// run runs name in dir with env, and prints the command under -v.
func (s *session) run(dir string, env []string, name string, args ...string) (runResult, error) {
	s.r.verbosef("$ (cd %s && %s %s)", dir, name, strings.Join(args, " "))
	return runCmd(s.ctx, dir, env, name, args...)
}
