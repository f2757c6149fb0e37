// Package guides runs the snippets of the guides under docs/ that need
// modules the root module does not require (chi, gorilla/mux, the stores'
// drivers, Prometheus), and the walk-through (docs/walkthrough.md). Its
// code is all in tests: each snippet appears verbatim in an Example here,
// and docs_test.go in the root package fails when a snippet of the docs is
// found in no test file.
package guides
