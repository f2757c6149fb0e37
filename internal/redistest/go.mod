module github.com/mercurekit/mercure/internal/redistest

go 1.25.0

require (
	github.com/mercurekit/mercure v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

// This repository's modules come from the checkout (go.work says the same;
// these serve builds with GOWORK=off).
replace github.com/mercurekit/mercure => ../..
