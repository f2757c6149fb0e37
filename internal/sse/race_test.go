//go:build race

package sse_test

const raceDetector = true
