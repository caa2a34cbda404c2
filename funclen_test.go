package tickcast

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines bounds a non-test function's length, from its func line to
// its closing brace.
const maxFuncLines = 100

// longFuncs are the non-test functions allowed over maxFuncLines, each with
// why it stays whole, or that it is still to be split. A new long function
// fails TestFuncLength; one that got short must leave the list.
var longFuncs = map[string]string{
	// The normalizer's dispatch: one case per ITCH message type, in the
	// specification's order, on the path of every message. Split into
	// functions it would cost a call per message and scatter the table.
	"feed/itch.(Source).handle": "hot-path dispatch switch on the ITCH type",
}

// TestFuncLength lists the module's non-test functions longer than
// maxFuncLines and fails on any not in longFuncs, and on an entry of
// longFuncs that is no longer long.
func TestFuncLength(t *testing.T) {
	long := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFuncLines {
				long[funcName(filepath.ToSlash(filepath.Dir(path)), fn)] = n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range long {
			if !yield(k) {
				return
			}
		}
	}) {
		if _, ok := longFuncs[name]; !ok {
			t.Errorf("%s is %d lines, more than %d: split it, or add it to longFuncs saying why it stays whole", name, long[name], maxFuncLines)
		}
	}
	for name := range longFuncs {
		if _, ok := long[name]; !ok {
			t.Errorf("%s is in longFuncs but no longer than %d lines: take it out", name, maxFuncLines)
		}
	}
}

// funcName names fn as DIR.Func or DIR.(Recv).Method.
func funcName(dir string, fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return dir + "." + fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	return fmt.Sprintf("%s.(%s).%s", dir, typ.(*ast.Ident).Name, fn.Name.Name)
}
