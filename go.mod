module github.com/mercurekit/mercure

go 1.26

require (
	github.com/dunglas/go-urlpattern v1.0.0
	github.com/google/uuid v1.6.0
	github.com/nlnwa/whatwg-url v0.6.2
	github.com/tmaxmax/go-sse v0.12.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	golang.org/x/exp v0.0.0-20260410095643-746e56fc9e2f // indirect
	golang.org/x/net v0.53.0 // indirect
	golang.org/x/text v0.36.0 // indirect
)
