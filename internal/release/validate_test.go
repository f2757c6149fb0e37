package main

import (
	"fmt"
	"strings"
	"testing"
)

const (
	rootMod    = "module example.com/x\n\ngo 1.25.0\n"
	harnessMod = "module example.com/x/internal/harness\n\ngo 1.25.0\n\nrequire example.com/x v0.1.0\n"
)

// requirementTests are go.mod texts of sub beside a root module and a
// harness that requires it, and what checkRequirements finds in them.
var requirementTests = []struct {
	name        string
	subMod      string // go.mod of sub; the root and internal/harness are as above
	want        string // -version
	wantVersion string
	// findings as "file:line: part of the message"
	wantFindings []string
}{{
	name:        "lockstep",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire example.com/x v0.1.0\n",
	wantVersion: "v0.1.0",
}, {
	name:        "replace",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire example.com/x v0.1.0\n\nreplace example.com/x => ../\n",
	wantVersion: "v0.1.0",
	wantFindings: []string{
		"sub/go.mod:7: replace of example.com/x",
	},
}, {
	name:        "replace block of a repository module and of another",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire example.com/x v0.1.0\n\nreplace (\n\texample.com/y => ../y\n\texample.com/x v0.1.0 => ../\n)\n",
	wantVersion: "v0.1.0",
	wantFindings: []string{
		"sub/go.mod:9: replace of example.com/x",
	},
}, {
	name:        "zero pseudo-version",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire example.com/x v0.0.0-00010101000000-000000000000\n",
	wantVersion: "v0.1.0",
	wantFindings: []string{
		"sub/go.mod:5: requires example.com/x v0.0.0-00010101000000-000000000000, a pseudo-version",
	},
}, {
	name:        "releasable requires harness",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire (\n\texample.com/x v0.1.0\n\texample.com/x/internal/harness v0.1.0\n)\n",
	wantVersion: "v0.1.0",
	wantFindings: []string{
		"sub/go.mod:7: releasable module example.com/x/sub requires example.com/x/internal/harness, which is never published",
	},
}, {
	name:        "not lockstep",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire example.com/x v0.2.0\n",
	wantVersion: "v0.2.0", // the tie goes to the highest
	wantFindings: []string{
		"internal/harness/go.mod:5: requires example.com/x v0.1.0, but the release version is v0.2.0",
	},
}, {
	name:        "version named",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire example.com/x v0.1.0\n",
	want:        "v0.2.0",
	wantVersion: "v0.2.0",
	wantFindings: []string{
		"internal/harness/go.mod:5: requires example.com/x v0.1.0, but the release version is v0.2.0",
		"sub/go.mod:5: requires example.com/x v0.1.0, but the release version is v0.2.0",
	},
}, {
	name:        "unknown repository module",
	subMod:      "module example.com/x/sub\n\ngo 1.25.0\n\nrequire (\n\texample.com/x v0.1.0\n\texample.com/x/gone v0.1.0\n\texample.com/y v1.0.0\n)\n",
	wantVersion: "v0.1.0",
	wantFindings: []string{
		"sub/go.mod:7: requires example.com/x/gone, which is not a module of go.work",
	},
}, {
	name:        "path does not match directory",
	subMod:      "module example.com/x/other\n\ngo 1.25.0\n\nrequire example.com/x v0.1.0\n",
	wantVersion: "v0.1.0",
	wantFindings: []string{
		"sub/go.mod:1: module path example.com/x/other does not match its directory",
	},
}}

func TestCheckRequirements(t *testing.T) {
	for _, tt := range requirementTests {
		t.Run(tt.name, func(t *testing.T) {
			ws := testWorkspace(t, map[string]string{".": rootMod, "internal/harness": harnessMod, "sub": tt.subMod})
			version, findings := checkRequirements(ws, tt.want)
			if version != tt.wantVersion {
				t.Errorf("version %q, want %q", version, tt.wantVersion)
			}
			if len(findings) != len(tt.wantFindings) {
				t.Fatalf("findings:\n%s\nwant:\n%s", joinFindings(findings), strings.Join(tt.wantFindings, "\n"))
			}
			for i, f := range findings {
				where, msg, _ := strings.Cut(tt.wantFindings[i], ": ")
				if got := fmt.Sprintf("%s:%d", f.File, f.Line); got != where || !strings.Contains(f.Msg, msg) {
					t.Errorf("finding %q, want %q", f, tt.wantFindings[i])
				}
			}
		})
	}
}

func TestCheckRequirementsNoVersion(t *testing.T) {
	ws := testWorkspace(t, map[string]string{".": rootMod,
		"sub": "module example.com/x/sub\n\nrequire example.com/x v0.0.0-00010101000000-000000000000\n"})
	version, findings := checkRequirements(ws, "")
	if version != "" || len(findings) != 1 {
		t.Errorf("version %q, findings:\n%s\nwant no version and the pseudo-version", version, joinFindings(findings))
	}
}

func joinFindings(findings []Finding) string {
	var b strings.Builder
	for _, f := range findings {
		fmt.Fprintln(&b, f)
	}
	return b.String()
}
