package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// A diskProxy is a module proxy laid out in a directory, the way the go
// command reads one from GOPROXY=file://dir: <escaped module path>/@v/ holds
// list, and <escaped version>.info, .mod and .zip for each version.
type diskProxy struct {
	dir      string
	versions map[string][]string // module path to the versions it serves
}

func newDiskProxy(dir string) *diskProxy {
	return &diskProxy{dir: dir, versions: make(map[string][]string)}
}

// url is the proxy's GOPROXY entry.
func (p *diskProxy) url() string { return fileURL(p.dir) }

// fileURL is the file URL of the directory dir.
func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// files returns the paths of the .mod and .zip files of mv.
func (p *diskProxy) files(mv module.Version) (mod, zip string, err error) {
	escPath, err := module.EscapePath(mv.Path)
	if err != nil {
		return "", "", err
	}
	escVers, err := module.EscapeVersion(mv.Version)
	if err != nil {
		return "", "", err
	}
	base := filepath.Join(p.dir, filepath.FromSlash(escPath), "@v", escVers)
	return base + ".mod", base + ".zip", nil
}

// add serves module m at version v with the files that its directory has at
// the git commit rev of the repository at top.
func (p *diskProxy) add(ctx context.Context, top string, m *Module, v, rev string) error {
	mv := module.Version{Path: m.Path, Version: v}
	modFile, zipFile, err := p.files(mv)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(modFile), 0o777); err != nil {
		return err
	}
	files, err := gitFiles(ctx, top, rev, strings.TrimSuffix(m.TagPrefix, "/"))
	if err != nil {
		return err
	}
	goMod, err := fileData(files, "go.mod")
	if err != nil {
		return fmt.Errorf("%s at %s: %w", m.GoMod(), rev, err)
	}
	if got := modfile.ModulePath(goMod); got != m.Path {
		return fmt.Errorf("%s at %s declares module %q, not %s", m.GoMod(), rev, got, m.Path)
	}
	if err := os.WriteFile(modFile, goMod, 0o666); err != nil {
		return err
	}
	if err := writeZip(zipFile, mv, files); err != nil {
		return fmt.Errorf("module zip of %s from %s: %w", mv, rev, err)
	}
	t, err := commitTime(ctx, top, rev)
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, t.UTC()})
	if err != nil {
		return err
	}
	infoFile := strings.TrimSuffix(modFile, ".mod") + ".info"
	if err := os.WriteFile(infoFile, info, 0o666); err != nil {
		return err
	}
	p.versions[m.Path] = append(p.versions[m.Path], v)
	return nil
}

// writeLists writes the list of versions of each module the proxy serves.
func (p *diskProxy) writeLists() error {
	for modPath, versions := range p.versions {
		if err := writeList(p.dir, modPath, versions); err != nil {
			return err
		}
	}
	return nil
}

// writeList writes the version list of modPath in the proxy directory dir.
func writeList(dir, modPath string, versions []string) error {
	escPath, err := module.EscapePath(modPath)
	if err != nil {
		return err
	}
	versions = append([]string(nil), versions...)
	semver.Sort(versions)
	var b strings.Builder
	for _, v := range versions {
		b.WriteString(v + "\n")
	}
	listDir := filepath.Join(dir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(listDir, 0o777); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(listDir, "list"), []byte(b.String()), 0o666)
}

// sums returns the go.sum lines of mv as the proxy serves it.
func (p *diskProxy) sums(mv module.Version) ([]string, error) {
	modFile, zipFile, err := p.files(mv)
	if err != nil {
		return nil, err
	}
	zipHash, err := dirhash.HashZip(zipFile, dirhash.Hash1)
	if err != nil {
		return nil, err
	}
	modHash, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) { return os.Open(modFile) })
	if err != nil {
		return nil, err
	}
	return []string{
		fmt.Sprintf("%s %s %s", mv.Path, mv.Version, zipHash),
		fmt.Sprintf("%s %s/go.mod %s", mv.Path, mv.Version, modHash),
	}, nil
}

// extract unpacks the zip of mv into the new directory dir.
func (p *diskProxy) extract(mv module.Version, dir string) error {
	_, zipFile, err := p.files(mv)
	if err != nil {
		return err
	}
	return modzip.Unzip(dir, mv, zipFile)
}

// writeZip writes the module zip of mv with files to the file name.
func writeZip(name string, mv module.Version, files []modzip.File) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := modzip.Create(f, mv, files); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fileData returns the content of the file with path name among files.
func fileData(files []modzip.File, name string) ([]byte, error) {
	for _, f := range files {
		if f.Path() != name {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		var b bytes.Buffer
		_, err = io.Copy(&b, r)
		return b.Bytes(), err
	}
	return nil, fmt.Errorf("no %s", name)
}
