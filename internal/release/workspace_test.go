package main

import (
	"strings"
	"testing"
)

func TestReleasable(t *testing.T) {
	tests := []struct {
		modPath, relDir string
		want            bool
	}{
		{"github.com/mercurekit/mercure", ".", true},
		{"github.com/mercurekit/mercure/boltstore", "boltstore", true},
		{"github.com/mercurekit/mercure/promhub", "promhub", true},
		{"github.com/mercurekit/mercure/internal/pgtest", "internal/pgtest", false},
		{"github.com/mercurekit/mercure/internal/release", "internal/release", false},
		{"github.com/mercurekit/mercure/x/internal", "x/internal", false},
		{"github.com/mercurekit/mercure/examples", "examples", false},
		{"github.com/mercurekit/mercure/examples/chat", "examples/chat", false},
		// Only an element "internal" counts, and only the directory examples.
		{"github.com/mercurekit/mercure/internals", "internals", true},
		{"github.com/mercurekit/mercure/moreexamples", "moreexamples", true},
		{"github.com/mercurekit/mercure/docs/examples", "docs/examples", true},
	}
	for _, tt := range tests {
		if got := releasable(tt.modPath, tt.relDir); got != tt.want {
			t.Errorf("releasable(%q, %q) = %v, want %v", tt.modPath, tt.relDir, got, tt.want)
		}
	}
}

// testWorkspace makes a workspace of go.mod texts, keyed by directory.
func testWorkspace(t *testing.T, goMods map[string]string) *Workspace {
	t.Helper()
	var mods []*Module
	for dir, text := range goMods {
		m, err := newModule(dir, []byte(strings.TrimLeft(text, "\n")))
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
	}
	ws, err := newWorkspace("/repo", mods)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func TestNewWorkspace(t *testing.T) {
	tests := []struct {
		name    string
		goMods  map[string]string
		wantErr string
	}{
		{"root and sub", map[string]string{".": "module example.com/x\n", "sub": "module example.com/x/sub\n"}, ""},
		{"no root", map[string]string{"sub": "module example.com/x/sub\n"}, "no module in its own directory"},
		{"foreign module", map[string]string{".": "module example.com/x\n", "y": "module example.com/y\n"}, "not below the root module"},
		{"twice", map[string]string{".": "module example.com/x\n", "a": "module example.com/x/a\n", "b": "module example.com/x/a\n"}, "both declare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mods []*Module
			for _, dir := range []string{".", "a", "b", "sub", "y"} {
				if text, ok := tt.goMods[dir]; ok {
					m, err := newModule(dir, []byte(text))
					if err != nil {
						t.Fatal(err)
					}
					mods = append(mods, m)
				}
			}
			_, err := newWorkspace("/repo", mods)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("newWorkspace: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("newWorkspace: error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}
