package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// goreleasePkg is the gorelease that check installs when -gorelease names
// none: a version known to work with Go 1.26, pinned so that every run
// judges by the same rules.
const goreleasePkg = "golang.org/x/exp/cmd/gorelease@v0.0.0-20261120182113-8801fbdfac81"

// checkCompat compares each releasable module at the release version with
// its latest older tag, with gorelease.
func (s *session) checkCompat() {
	s.r.section(fmt.Sprintf("compatibility: gorelease against the latest tag older than %s", s.version))
	type job struct {
		m    *Module
		base string
	}
	var jobs []job
	for _, m := range s.ws.releasableModules() {
		if base := latestBelow(s.tags[m.Path], s.version); base != "" {
			jobs = append(jobs, job{m, base})
		}
	}
	if len(jobs) == 0 {
		s.r.okf("no releasable module has a tag older than %s: nothing to compare against", s.version)
		return
	}
	bin, err := s.goreleaseBin()
	if err != nil {
		s.r.failf("%v", err)
		return
	}
	for _, j := range jobs {
		report, err := s.gorelease(bin, j.m, j.base)
		if err != nil {
			s.r.failf("%s %s against %s: %v", j.m.Path, s.version, j.base, err)
			continue
		}
		s.r.okf("%s %s against %s:\n%s", j.m.Path, s.version, j.base, strings.TrimSpace(report))
	}
}

// latestBelow returns the highest of the ascending versions below v, or "".
func latestBelow(versions []string, v string) string {
	latest := ""
	for _, t := range versions {
		if semver.Compare(t, v) < 0 {
			latest = t
		}
	}
	return latest
}

// goreleaseBin returns the gorelease to run: -gorelease, else the pinned
// version, installed in the session's directory.
func (s *session) goreleaseBin() (string, error) {
	if s.o.gorelease != "" {
		return s.o.gorelease, nil
	}
	bin := filepath.Join(s.tmp, "bin")
	env := append(append([]string(nil), s.o.env...), "GOBIN="+bin, "GOWORK=off")
	if _, err := s.run(s.tmp, env, "go", "install", goreleasePkg); err != nil {
		return "", fmt.Errorf("gorelease compares the release with older tags, and installing it failed; install it and pass -gorelease PATH: %v", err)
	}
	return filepath.Join(bin, "gorelease"), nil
}

// gorelease runs gorelease on a copy of m's release content, against the
// tagged version base, and returns its report.
func (s *session) gorelease(bin string, m *Module, base string) (string, error) {
	dir, err := os.MkdirTemp(s.tmp, "gorelease-")
	if err != nil {
		return "", err
	}
	// gorelease refuses a git work tree with changes and would take the
	// tag prefix from it; a copy outside holds the content that check
	// releases, whichever revision it comes from.
	src := filepath.Join(dir, "m")
	if err := s.publish.extract(module.Version{Path: m.Path, Version: s.version}, src); err != nil {
		return "", err
	}
	if err := s.addUnreleasedSums(filepath.Join(src, "go.sum")); err != nil {
		return "", err
	}
	// gorelease fails a version that the proxy lists already; this proxy,
	// first in GOPROXY, lists m's versions below the release only.
	overlay := filepath.Join(dir, "proxy")
	var older []string
	for _, v := range s.publish.versions[m.Path] {
		if semver.Compare(v, s.version) < 0 {
			older = append(older, v)
		}
	}
	if err := writeList(overlay, m.Path, older); err != nil {
		return "", err
	}
	env := moduleEnv(s.o.env, s.user, s.ws.Prefix, envValue(s.publishEnv, "GOMODCACHE"), fileURL(overlay), s.publish.url())
	// gorelease leaves its scratch modules behind when it fails: in the
	// session's directory, they go with it.
	env = append(env, "TMPDIR="+dir)
	res, err := s.run(src, env, bin, "-base="+base, "-version="+s.version)
	if err != nil {
		return "", err
	}
	return res.stdout, nil
}

// addUnreleasedSums adds to the go.sum file name the lines of the
// releasable modules at the untagged release version: the release
// procedure adds them, from the published modules, before it tags a module
// that requires them, and gorelease fails a go.sum that lacks them.
func (s *session) addUnreleasedSums(name string) error {
	data, err := os.ReadFile(name)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var add []string
	for _, m := range s.ws.releasableModules() {
		if s.tagged(m.Path, s.version) {
			continue
		}
		lines, err := s.publish.sums(module.Version{Path: m.Path, Version: s.version})
		if err != nil {
			return err
		}
		add = append(add, lines...)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	data = append(data, strings.Join(add, "\n")+"\n"...)
	return os.WriteFile(name, data, 0o666)
}
