package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestImportablePackages(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                  "module example.com/x\n",
		"x.go":                    "package x\n",
		"x_test.go":               "package x\n",
		"client/client.go":        "package client\n",
		"internal/engine/e.go":    "package engine\n",
		"sub/internal/i.go":       "package internal\n",
		"cmd/tool/main.go":        "package main\n",
		"onlytests/a_test.go":     "package onlytests\n",
		"tagged/t.go":             "//go:build never\n\npackage tagged\n",
		"testdata/data.go":        "package data\n",
		"client/testdata/x/x.go":  "package x\n",
		"_old/old.go":             "package old\n",
		".hidden/h.go":            "package hidden\n",
		"docs/README.md":          "no Go here\n",
		"sub/pub/pub.go":          "package pub\n",
		"sub/pub/doc_examples.go": "package pub\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	got, err := importablePackages(dir, "example.com/x")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"example.com/x", "example.com/x/client", "example.com/x/sub/pub"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("packages %q, want %q", got, want)
	}
}

func TestGraphProblems(t *testing.T) {
	s := testSession(t, nil)
	list := strings.Join([]string{
		"example.com/consumer",
		"example.com/x v0.2.0",
		"example.com/x/sub v0.2.0",
		"example.com/x/internal/harness v0.2.0",
		"example.com/x/gone v0.0.0-20250101000000-abcdefabcdef",
		"golang.org/x/mod v0.0.0-20250101000000-abcdefabcdef",
	}, "\n") + "\n"
	count, problems := s.graphProblems(list)
	want := []string{
		"the consumer's module graph has example.com/x/internal/harness v0.2.0, which is never published",
		"the consumer's module graph has example.com/x/gone v0.0.0-20250101000000-abcdefabcdef, which is never published",
		"the consumer's module graph has example.com/x/gone at the pseudo-version v0.0.0-20250101000000-abcdefabcdef",
	}
	if count != 5 || !reflect.DeepEqual(problems, want) {
		t.Errorf("graphProblems = %d, %q\nwant 5, %q", count, problems, want)
	}
}
