package mercure_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// The package's shape, guarded: an API that grows past what a user can
// hold in their head, or a function past a screen, is a decision to take
// on purpose (issue 38 found 155 names and functions of 122 lines that
// had grown unchecked).
const (
	maxTopLevelNames = 110 // exported funcs, methods of exported types, types, consts, vars
	maxFunctionLines = 80
)

// rootFiles parses the package's non-test files for this platform.
func rootFiles(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Name != "mercure" || len(pkg.GoFiles) == 0 {
		t.Fatalf("no file of package mercure found (package %q, %d files): the guard cannot measure", pkg.Name, len(pkg.GoFiles))
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

func TestPublicAPIStaysSmall(t *testing.T) {
	t.Parallel()
	_, files := rootFiles(t)
	var names []string
	for _, f := range files {
		for _, d := range f.Decls {
			names = append(names, exportedNames(d)...)
		}
	}
	t.Logf("%d top-level names", len(names))
	if len(names) > maxTopLevelNames {
		t.Errorf("the package exports %d top-level names, more than %d: %s", len(names), maxTopLevelNames, strings.Join(names, " "))
	}
}

// exportedNames returns the exported top-level names d declares: funcs,
// methods of exported types, types, consts and vars.
func exportedNames(d ast.Decl) []string {
	var names []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv != nil {
			t := d.Recv.List[0].Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			if id, ok := t.(*ast.Ident); !ok || !id.IsExported() {
				return nil
			}
		}
		names = append(names, d.Name.Name)
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() {
					names = append(names, s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

func TestFunctionsFitAScreen(t *testing.T) {
	t.Parallel()
	fset, files := rootFiles(t)
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFunctionLines {
				t.Errorf("%s: %s is %d lines long, more than %d: name its phases", fset.Position(fd.Pos()), fd.Name.Name, n, maxFunctionLines)
			}
		}
	}
}
