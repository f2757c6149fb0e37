// Package storebench holds only benchmarks: the publish throughput and the
// publish → deliver latency of a hub on each history store (the default
// memory store, boltstore, redisstore and pgstore, the last two also with
// two hub instances sharing one Redis stream or one table), and pgstore's
// transactional publish; the time a whole replay of 64 updates of 1, 100
// and 400 KiB takes (BenchmarkReplay); and the heap one replaying reader
// holds of a history of large updates (BenchmarkReplayHeldHeap, run with
// -benchtime 1x). It has no code of its own.
//
// The benchmarks build only with the tag storebench, so that go test work
// does not link a test binary of every store's driver to run no test (a
// tenth of the suite's link time). Run them with
//
//	MERCURE_TEST_REDIS=localhost:6399 \
//	MERCURE_TEST_POSTGRES='postgres://postgres@localhost:6432/postgres?sslmode=disable' \
//	go test -tags storebench -run '^$' -bench . -benchmem ./internal/storebench/
//
// Without MERCURE_TEST_REDIS the Redis benchmarks are skipped, without
// MERCURE_TEST_POSTGRES the PostgreSQL ones; these write only to tables
// of their own, named "bench_…", and drop them when they end. The Redis
// benchmarks write only to stream keys of their own, named
// "mercure-bench:…", and delete them when they end.
package storebench
