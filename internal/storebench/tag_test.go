//go:build !storebench

package storebench

import "testing"

// BenchmarkNeedsTag says how to run the benchmarks, which build only with
// the tag storebench: without it, go test work skips the package instead
// of linking a binary of every store's driver to run no test.
func BenchmarkNeedsTag(b *testing.B) {
	b.Fatal("the store benchmarks build with the tag storebench: go test -tags storebench -run '^$' -bench . -benchmem ./internal/storebench/")
}
