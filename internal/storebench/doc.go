// Package storebench holds only benchmarks: the publish throughput and the
// publish → deliver latency of a hub on each history store (the default
// memory store, boltstore and redisstore, the latter also with two hub
// instances sharing one Redis stream). It has no code of its own.
//
// Run them with
//
//	MERCURE_TEST_REDIS=localhost:6399 go test -run '^$' -bench . -benchmem ./internal/storebench/
//
// Without MERCURE_TEST_REDIS the Redis benchmarks are skipped. The Redis
// benchmarks write only to stream keys of their own, named
// "mercure-bench:…", and delete them when they end.
package storebench
