package main

import (
	"reflect"
	"testing"
)

// testSession is a session over a workspace of go.mod texts, with tags.
func testSession(t *testing.T, tags map[string][]string) *session {
	ws := testWorkspace(t, map[string]string{".": rootMod, "internal/harness": harnessMod,
		"sub": "module example.com/x/sub\n\nrequire example.com/x v0.2.0\n"})
	return &session{ws: ws, tags: tags}
}

func TestUnreleasedSum(t *testing.T) {
	s := testSession(t, map[string][]string{"example.com/x": {"v0.1.0"}})
	tests := []struct {
		line string
		want bool
	}{
		{"example.com/x v0.2.0 h1:abc=", true},
		{"example.com/x v0.2.0/go.mod h1:abc=", true},
		{"example.com/x/internal/harness v0.1.0/go.mod h1:abc=", true},
		{"example.com/x/gone v0.1.0 h1:abc=", true}, // not in go.work: never tagged
		{"example.com/x v0.1.0 h1:abc=", false},     // tagged: its published hash
		{"example.com/x v0.1.0/go.mod h1:abc=", false},
		{"example.com/xy v0.2.0 h1:abc=", false}, // another module
		{"golang.org/x/mod v0.40.0 h1:abc=", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := s.unreleasedSum(tt.line); got != tt.want {
			t.Errorf("unreleasedSum(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

func TestSplitSums(t *testing.T) {
	s := testSession(t, map[string][]string{"example.com/x": {"v0.1.0"}})
	data := "example.com/x v0.1.0 h1:a=\nexample.com/x v0.2.0 h1:b=\nexample.com/x v0.2.0/go.mod h1:c=\ngolang.org/x/mod v0.40.0 h1:d=\n"
	kept, dropped := s.splitSums([]byte(data))
	if want := "example.com/x v0.1.0 h1:a=\ngolang.org/x/mod v0.40.0 h1:d=\n"; string(kept) != want {
		t.Errorf("kept %q, want %q", kept, want)
	}
	want := []sumLine{{2, "example.com/x v0.2.0 h1:b="}, {3, "example.com/x v0.2.0/go.mod h1:c="}}
	if !reflect.DeepEqual(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
}

func TestTidyChanges(t *testing.T) {
	s := testSession(t, nil)
	tests := []struct {
		name string
		diff string
		want []string
	}{{
		name: "unreleased hashes only",
		diff: `diff current/go.sum tidy/go.sum
--- current/go.sum
+++ tidy/go.sum
@@ -0,0 +1,2 @@
+example.com/x v0.2.0 h1:ZLAXFxcQyUksSfAisI8r3J4tuiEbt575aFBi/2JbGhU=
+example.com/x v0.2.0/go.mod h1:jfb3wKGqSAAgmWVEi/E/4GmwyM6576/4qZQ78hp/HEM=
`,
	}, {
		name: "a requirement and a hash missing",
		diff: `diff current/go.mod tidy/go.mod
--- current/go.mod
+++ tidy/go.mod
@@ -3,3 +3,5 @@
 go 1.25.0
 
 require example.com/x v0.2.0
+
+require golang.org/x/mod v0.40.0
diff current/go.sum tidy/go.sum
--- current/go.sum
+++ tidy/go.sum
@@ -1 +1,3 @@
-golang.org/x/mod v0.39.0 h1:old=
+example.com/x v0.2.0 h1:ZLAXFxcQyUksSfAisI8r3J4tuiEbt575aFBi/2JbGhU=
+golang.org/x/mod v0.40.0 h1:new=
`,
		want: []string{
			"go.mod: +",
			"go.mod: +require golang.org/x/mod v0.40.0",
			"go.sum: -golang.org/x/mod v0.39.0 h1:old=",
			"go.sum: +golang.org/x/mod v0.40.0 h1:new=",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tidyChanges(tt.diff, s.unreleasedSum); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("changes %q, want %q", got, tt.want)
			}
		})
	}
}
