package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// userGoEnv is the part of the user's go environment that check builds on.
type userGoEnv struct {
	GOPROXY    string
	GOFLAGS    string
	GONOSUMDB  string
	GOMODCACHE string
}

// readGoEnv reads the go environment that env gives, go env -w settings
// included.
func readGoEnv(ctx context.Context, env []string) (userGoEnv, error) {
	cmd := exec.CommandContext(ctx, "go", "env", "-json", "GOPROXY", "GOFLAGS", "GONOSUMDB", "GOMODCACHE")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return userGoEnv{}, fmt.Errorf("go env: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var e userGoEnv
	if err := json.Unmarshal(out, &e); err != nil {
		return userGoEnv{}, fmt.Errorf("go env: %w", err)
	}
	return e, nil
}

// moduleEnv returns env set up so that the go command sees the
// repository's modules as a user would once they are published, served by
// the disk proxies, with the module cache modCache:
//
//   - GOWORK=off: a user has no go.work.
//   - GOPROXY: the disk proxies first, then the user's module cache (its
//     download directory has the proxy layout, so what the user has
//     downloaded comes without the network), then the user's GOPROXY. A
//     file proxy without a file answers "not found", which sends the go
//     command on to the next entry; so the repository's modules come from
//     the disk proxies and everything else from where a user gets it.
//   - GONOSUMDB: the repository's modules are not in the checksum database
//     (or, once published, hold other content there than the work tree):
//     they skip it, and everything else is checked against it.
//   - GOPRIVATE and GONOPROXY empty: a module they match would bypass the
//     proxies, the disk proxies included. A published module can require
//     no private module anyway.
//   - GOMODCACHE: a cache of the check's own. The go command trusts what
//     its cache holds, so a module cache that has seen the disk proxy's
//     unreleased v0.1.0 would serve it long after the real v0.1.0 is out;
//     and a cache that has not seen it yet is what tells whether a module
//     resolves.
//   - GOFLAGS: -mod=mod lets go build and go list add the go.sum lines of a
//     fresh module; -modcacherw lets the check remove its cache; -trimpath
//     keeps the cache's directory, new in each run, out of the build cache's
//     keys, so that a run reuses the builds of the one before.
//
// There is no GONOSUMCHECK: GONOSUMDB is the setting that skips the checksum
// database for some modules, and GOSUMDB stays as the user has it.
func moduleEnv(env []string, user userGoEnv, prefix, modCache string, proxies ...string) []string {
	urls := append([]string(nil), proxies...)
	if user.GOMODCACHE != "" {
		urls = append(urls, fileURL(filepath.Join(user.GOMODCACHE, "cache", "download")))
	}
	if user.GOPROXY != "" {
		urls = append(urls, user.GOPROXY)
	} else {
		urls = append(urls, "off")
	}
	noSumDB := prefix
	if user.GONOSUMDB != "" {
		noSumDB += "," + user.GONOSUMDB
	}
	return append(append([]string(nil), env...),
		"GOWORK=off",
		"GOPROXY="+strings.Join(urls, ","),
		"GONOSUMDB="+noSumDB,
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOMODCACHE="+modCache,
		"GOFLAGS="+strings.TrimSpace(user.GOFLAGS+" -mod=mod -modcacherw -trimpath"),
	)
}

// envValue returns the last value of the variable key in env, as exec
// applies it.
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// runResult is what a command printed.
type runResult struct {
	stdout, stderr string
}

// output is what the command printed, standard output first.
func (r runResult) output() string {
	return strings.TrimSpace(strings.TrimSpace(r.stdout) + "\n" + strings.TrimSpace(r.stderr))
}

// runCmd runs name with args in dir with the environment env.
func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) (runResult, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := runResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		return res, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, res.output())
	}
	return res, nil
}
