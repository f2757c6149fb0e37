package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path"
	"strings"
	"time"

	modzip "golang.org/x/mod/zip"
)

// gitFiles returns the files of directory subdir (relative to top, "" for
// the top) at commit rev, paths relative to subdir, for a module zip.
//
// Why not modzip.CreateFromVCS, which does the same: it refuses a linked
// work tree (git worktree add), whose .git is a file, and several of this
// repository's checkouts are such. Why not modzip.CreateFromDir on the work
// tree: it takes every file on disk, built test binaries and other untracked
// files included, which no tag would publish. What is published is what git
// archive gives for the tagged commit, so the files come from git archive, as
// the go command and CreateFromVCS take them, and modzip.Create then applies
// the module zip rules (no nested module, no vendor directory, no symbolic
// link, size limits).
func gitFiles(ctx context.Context, top, rev, subdir string) ([]modzip.File, error) {
	// As the go command does: no line ending conversion on the way out.
	args := []string{"-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", rev}
	if subdir != "" {
		args = append(args, subdir)
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = top
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git archive %s %s: %v: %s", rev, subdir, err, strings.TrimSpace(stderr.String()))
	}
	zr, err := zip.NewReader(bytes.NewReader(stdout.Bytes()), int64(stdout.Len()))
	if err != nil {
		return nil, fmt.Errorf("git archive %s %s: %w", rev, subdir, err)
	}
	var files []modzip.File
	haveLicense := false
	for _, zf := range zr.File {
		name := zf.Name
		if subdir != "" {
			var ok bool
			if name, ok = strings.CutPrefix(name, subdir+"/"); !ok {
				continue
			}
		}
		if name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		files = append(files, archiveFile{name: name, f: zf})
		haveLicense = haveLicense || name == "LICENSE"
	}
	// The go command gives a module in a subdirectory without a LICENSE of
	// its own the one at the top of the repository.
	if !haveLicense && subdir != "" {
		license, err := gitOutputRaw(ctx, top, "cat-file", "blob", rev+":LICENSE")
		if err == nil {
			files = append(files, dataFile{name: "LICENSE", data: license})
		}
	}
	return files, nil
}

// gitOutputRaw runs git in dir and returns its standard output as it is.
func gitOutputRaw(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	return cmd.Output()
}

// archiveFile is a file of a git archive.
type archiveFile struct {
	name string
	f    *zip.File
}

func (f archiveFile) Path() string                 { return f.name }
func (f archiveFile) Lstat() (fs.FileInfo, error)  { return f.f.FileInfo(), nil }
func (f archiveFile) Open() (io.ReadCloser, error) { return f.f.Open() }

// dataFile is a file held in memory.
type dataFile struct {
	name string
	data []byte
}

func (f dataFile) Path() string                 { return f.name }
func (f dataFile) Lstat() (fs.FileInfo, error)  { return dataFileInfo{f}, nil }
func (f dataFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type dataFileInfo struct{ f dataFile }

func (fi dataFileInfo) Name() string       { return path.Base(fi.f.name) }
func (fi dataFileInfo) Size() int64        { return int64(len(fi.f.data)) }
func (fi dataFileInfo) Mode() fs.FileMode  { return 0o644 }
func (fi dataFileInfo) ModTime() time.Time { return time.Time{} }
func (fi dataFileInfo) IsDir() bool        { return false }
func (fi dataFileInfo) Sys() any           { return nil }
