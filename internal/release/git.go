package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// gitToplevel returns the top directory of the git work tree holding dir.
func gitToplevel(dir string) (string, error) {
	out, err := gitOutput(context.Background(), dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("%s is not in a git work tree: %w", dir, err)
	}
	return out, nil
}

// gitOutput runs git in dir with extra environment variables env and
// returns its standard output, trimmed.
func gitOutput(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(cmd.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// moduleTags returns the versions of module m that the tags name, in
// ascending order. Tags that are no canonical release version of m (such as
// v2.0.0 for a module path without /v2) publish nothing and are left out.
func moduleTags(tags []string, m *Module) []string {
	var versions []string
	for _, tag := range tags {
		v, ok := strings.CutPrefix(tag, m.TagPrefix)
		if !ok || strings.Contains(v, "/") || !isReleaseVersion(v) || module.Check(m.Path, v) != nil {
			continue
		}
		versions = append(versions, v)
	}
	semver.Sort(versions)
	return versions
}

// listTags returns the repository's tags.
func listTags(ctx context.Context, top string) ([]string, error) {
	out, err := gitOutput(ctx, top, nil, "tag", "--list")
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(out, "\n"), nil
}

// snapshot returns a commit whose tree is the work tree's tracked files as
// they are on disk: HEAD when nothing tracked has changed, else a commit that
// git stash create makes without touching the work tree, the index or any
// ref. Untracked files are not in it, as they would not be in a commit.
func snapshot(ctx context.Context, top string) (string, error) {
	// A stash is a commit: it needs an author, which CI may not configure.
	ident := []string{
		"GIT_AUTHOR_NAME=release check", "GIT_AUTHOR_EMAIL=release-check@localhost",
		"GIT_COMMITTER_NAME=release check", "GIT_COMMITTER_EMAIL=release-check@localhost",
	}
	rev, err := gitOutput(ctx, top, ident, "stash", "create", "release check: the work tree")
	if err != nil {
		return "", err
	}
	if rev == "" {
		rev = "HEAD"
	}
	return gitOutput(ctx, top, nil, "rev-parse", "--verify", rev+"^{commit}")
}

// commitTime returns the committer time of rev.
func commitTime(ctx context.Context, top, rev string) (time.Time, error) {
	out, err := gitOutput(ctx, top, nil, "log", "-1", "--format=%cI", rev)
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339, out)
}

// untracked returns the files of the work tree that git neither tracks nor
// ignores: check leaves them out, as a commit would.
func untracked(ctx context.Context, top string) ([]string, error) {
	out, err := gitOutput(ctx, top, nil, "ls-files", "--others", "--exclude-standard")
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(out, "\n"), nil
}
