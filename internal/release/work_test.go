package main

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

func TestCheckWork(t *testing.T) {
	const use = "go 1.25.0\n\nuse (\n\t.\n\t./internal/harness\n\t./sub\n)\n"
	tests := []struct {
		name   string
		work   string
		tagged []string // versions of example.com/x with a tag
		want   []string // findings as "file:line: part of the message"
	}{{
		name: "replaced",
		work: use + "\nreplace example.com/x v0.1.0 => ./\n",
	}, {
		name: "none",
		work: use,
		want: []string{"go.work:0: no replace of example.com/x v0.1.0, which is not published"},
	}, {
		name:   "none needed once tagged",
		work:   use,
		tagged: []string{"v0.1.0"},
	}, {
		name: "another version",
		work: use + "\nreplace example.com/x v0.0.9 => ./\n",
		want: []string{"go.work:0: no replace of example.com/x v0.1.0"},
	}, {
		name: "wrong directory",
		work: use + "\nreplace example.com/x v0.1.0 => ./sub\n",
		want: []string{"go.work:9: replaces example.com/x v0.1.0 with ./sub, not its directory ./."},
	}, {
		name: "a module version",
		work: use + "\nreplace example.com/x v0.1.0 => example.com/fork v0.1.0\n",
		want: []string{"go.work:9: replaces example.com/x v0.1.0 with example.com/fork@v0.1.0"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := testWorkspace(t, map[string]string{".": rootMod, "internal/harness": harnessMod,
				"sub": "module example.com/x/sub\n\nrequire example.com/x v0.1.0\n"})
			var err error
			if ws.Work, err = modfile.ParseWork("go.work", []byte(tt.work), nil); err != nil {
				t.Fatal(err)
			}
			tagged := func(modPath, v string) bool {
				for _, tv := range tt.tagged {
					if modPath == "example.com/x" && v == tv {
						return true
					}
				}
				return false
			}
			findings := checkWork(ws, "v0.1.0", tagged)
			if len(findings) != len(tt.want) {
				t.Fatalf("findings:\n%s\nwant:\n%s", joinFindings(findings), strings.Join(tt.want, "\n"))
			}
			for i, f := range findings {
				where, msg, _ := strings.Cut(tt.want[i], ": ")
				if got := f.File + ":" + strconv.Itoa(f.Line); got != where || !strings.Contains(f.Msg, msg) {
					t.Errorf("finding %q, want %q", f, tt.want[i])
				}
			}
		})
	}
}
