module github.com/mercurekit/mercure/internal/release

go 1.25.0

require golang.org/x/mod v0.40.0
