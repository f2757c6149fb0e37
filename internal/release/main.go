package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

// options are the flags of a subcommand.
type options struct {
	root      string    // repository root: the directory of go.work
	version   string    // release version, "" for the one the go.mod files require
	keep      string    // directory to keep the disk proxies in, "" for a temporary one
	gorelease string    // gorelease binary, "" to install the pinned one
	tags      string    // build tags for go list, comma-separated
	verbose   bool      // print the commands run
	stdout    io.Writer // where the report goes
	env       []string  // environment of the commands run
}

const usage = `usage: go run ./internal/release <subcommand> [flags]

subcommands:
  check   check the modules as a user meets them (see go doc)
  tidy    make each module's go.mod and go.sum what check wants
  plan    print the release procedure

Run "go run ./internal/release <subcommand> -h" for its flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the subcommand that args name, its commands in the environment
// env, and returns the exit code: 0 for success, 1 for a failed check, 2 for
// a usage error.
func run(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	o := options{stdout: stdout, env: env}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", ".", "repository root: the directory of go.work")
	fs.StringVar(&o.version, "version", "", "release version (default: the version that the go.mod files require)")
	switch args[0] {
	case "check":
		fs.StringVar(&o.keep, "keep", "", "keep the module proxy on disk in this `directory` (empty or absent)")
		fs.StringVar(&o.gorelease, "gorelease", "", "gorelease `binary` (default: install "+goreleasePkg+")")
		fs.BoolVar(&o.verbose, "v", false, "print every command run")
		fs.StringVar(&o.tags, "tags", "", "build `tags` that select more files for the check of internal imports")
	case "tidy":
		fs.BoolVar(&o.verbose, "v", false, "print every command run")
	case "plan":
	default:
		fmt.Fprintf(stderr, "unknown subcommand %q\n\n%s", args[0], usage)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s takes no arguments, only flags\n", args[0])
		return 2
	}
	if o.version != "" && !isReleaseVersion(o.version) {
		fmt.Fprintf(stderr, "-version %s: not a release version (vMAJOR.MINOR.PATCH, canonical, no pseudo-version)\n", o.version)
		return 2
	}
	var ok bool
	var err error
	switch args[0] {
	case "check":
		ok, err = runCheck(ctx, o)
	case "tidy":
		ok, err = runTidy(ctx, o)
	case "plan":
		ok, err = runPlan(o)
	}
	if err != nil {
		fmt.Fprintf(stderr, "release %s: %v\n", args[0], err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}
