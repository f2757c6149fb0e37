// Command release checks the repository's modules the way a user meets them,
// from published versions and without go.work, and prints the release
// procedure.
//
// Run it from the repository root:
//
//	go run ./internal/release check [-root DIR] [-version V] [-keep DIR] [-gorelease PATH] [-tags T] [-v]
//	go run ./internal/release tidy  [-root DIR] [-version V] [-v]
//	go run ./internal/release plan  [-root DIR] [-version V]
//
// # Modules
//
// The modules are those that go.work uses. The repository's modules are the
// root module (the one in go.work's own directory) and every module whose path
// starts with the root module's path and a slash; the check is not tied to one
// module path, so its tests run it on a throwaway repository.
//
// A module is releasable, that is tagged and published, unless its module path
// has an element "internal" or its directory is examples or lies below it.
// Those others (test harnesses, benchmarks, demo programs) are never tagged,
// so no user can download them.
//
// Releasable modules are versioned in lockstep: every go.mod requires the
// repository's other modules at one version V, the release to come, and
// holds no replace of them (a user's build ignores replace directives; local
// development uses go.work). A module in directory D is tagged D/V, the root
// module V.
//
// # check
//
// check fails when any of these fails, and reports every failure it finds:
//
//   - go.mod requirements: every require of a repository module, in every
//     module, names the same release version V (no pseudo-version), no go.mod
//     replaces a repository module, and no releasable module requires one
//     that is not releasable.
//   - go.work: it replaces each required version that is not published yet
//     (or never is, as a harness) with the module's directory, at that
//     version: the go command in workspace mode still reads the go.mod of
//     every required version, even of the modules go.work uses.
//   - internal packages: no package of a module (its tests included)
//     imports an internal package of another repository module. Go allows
//     it by path, since every module's path lies below the root's, but an
//     internal package promises nothing across module versions. -tags
//     selects the files that build tags would leave out.
//   - consumers: each releasable module, served at V by a module proxy on disk
//     that holds only the releasable modules, is what a new program gets with
//     go get: a scratch module that imports each of its public packages
//     builds, and its module graph holds no unreleasable repository module
//     and no pseudo-version of one.
//   - compatibility: where a module has a tag older than V, gorelease compares
//     the two. A v0 release may break its API; the changes are reported and
//     do not fail the check.
//   - tidy: each module's go.mod and go.sum are what go mod tidy makes of them
//     without go.work, except for go.sum lines of repository modules at
//     versions not tagged yet (see tidy.go).
//
// The proxy serves a module at V from its tag when the tag exists, and from
// the working tree otherwise (tracked files only, as a commit of the working
// tree would publish them); older tagged versions come from their tags. -keep
// keeps that proxy; -v prints every command that check runs.
//
// # tidy
//
// tidy rewrites each module's go.mod and go.sum the way check wants them
// (go mod tidy against the proxy on disk, less the go.sum lines of
// repository modules at untagged versions). The modules that are not
// released need it after a release: without go.work their requirements of
// the unreleased harnesses do not resolve, so plain go mod tidy fails there.
//
// # plan
//
// plan prints the release procedure for V (by default the version that the
// go.mod files require): the releasable modules in dependency order, the tag
// of each, and for those that require others, the go get and go mod tidy to
// run against the just-published versions before tagging them.
package main
