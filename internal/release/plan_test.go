package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestReleaseLevels(t *testing.T) {
	tests := []struct {
		name    string
		nodes   []string
		deps    map[string][]string
		want    [][]string
		wantErr string
	}{{
		name:  "the stores after the root",
		nodes: []string{"x", "x/redis", "x/bolt", "x/prom"},
		deps:  map[string][]string{"x/bolt": {"x"}, "x/redis": {"x"}, "x/prom": {"x"}},
		want:  [][]string{{"x"}, {"x/bolt", "x/prom", "x/redis"}},
	}, {
		name:  "chain",
		nodes: []string{"x/c", "x/b", "x"},
		deps:  map[string][]string{"x/c": {"x/b", "x"}, "x/b": {"x"}},
		want:  [][]string{{"x"}, {"x/b"}, {"x/c"}},
	}, {
		name:  "requirements of other modules and of itself left out",
		nodes: []string{"x", "x/a"},
		deps:  map[string][]string{"x": {"x"}, "x/a": {"x", "x/internal/harness", "example.com/y"}},
		want:  [][]string{{"x"}, {"x/a"}},
	}, {
		name:    "cycle",
		nodes:   []string{"x", "x/a", "x/b", "x/c"},
		deps:    map[string][]string{"x/a": {"x", "x/b"}, "x/b": {"x/a"}, "x/c": {"x/b"}},
		wantErr: "cycle, so none can be tagged first: x/a, x/b, x/c",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := releaseLevels(tt.nodes, tt.deps)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("levels %q, want %q", got, tt.want)
			}
		})
	}
}
