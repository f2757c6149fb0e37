package main

import (
	"fmt"
	"io"
	"strings"
)

// A reporter prints what check finds and counts the failures.
type reporter struct {
	w        io.Writer
	verbose  bool
	failures int
}

func (r *reporter) section(title string) { fmt.Fprintf(r.w, "\n== %s\n", title) }

// okf reports a step that passed.
func (r *reporter) okf(format string, args ...any) {
	fmt.Fprintf(r.w, "ok   %s\n", indent(fmt.Sprintf(format, args...)))
}

// failf reports a failure.
func (r *reporter) failf(format string, args ...any) {
	r.failures++
	fmt.Fprintf(r.w, "FAIL %s\n", indent(fmt.Sprintf(format, args...)))
}

// notef reports what is neither a pass nor a failure.
func (r *reporter) notef(format string, args ...any) {
	fmt.Fprintf(r.w, "     %s\n", indent(fmt.Sprintf(format, args...)))
}

// verbosef reports what only -v shows.
func (r *reporter) verbosef(format string, args ...any) {
	if r.verbose {
		r.notef(format, args...)
	}
}

// indent indents the lines of s after the first, to stand under its first.
func indent(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n       ")
}
