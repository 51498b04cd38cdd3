package netcode_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update", false, "rewrite api/netcode.txt from the source instead of checking it")

// apiFile records every exported identifier of the library's packages, so
// that a change to the public API shows in review as a change to this file.
const apiFile = "api/netcode.txt"

// TestAPI fails when the exported API of a library package differs from
// api/netcode.txt. After a deliberate change, rewrite the file with
//
//	go test -run TestAPI -update .
//
// and commit it with the change (and a CHANGELOG entry).
func TestAPI(t *testing.T) {
	got, err := apiListing(".")
	if err != nil {
		t.Fatal(err)
	}
	if *updateAPI {
		if err := os.WriteFile(apiFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(apiFile)
	if err != nil {
		t.Fatalf("%v (create it with: go test -run TestAPI -update .)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	var diff strings.Builder
	for _, l := range wantLines {
		if !slices.Contains(gotLines, l) {
			fmt.Fprintf(&diff, "- %s\n", l)
		}
	}
	for _, l := range gotLines {
		if !slices.Contains(wantLines, l) {
			fmt.Fprintf(&diff, "+ %s\n", l)
		}
	}
	t.Errorf("the exported API differs from %s (- recorded, + source); if the change is meant, "+
		"run go test -run TestAPI -update . and add a CHANGELOG entry:\n%s", apiFile, diff.String())
}

// apiListing lists the exported API of every library package under root:
// every directory with non-test Go files outside internal/, cmd/, examples/
// and testdata/ that is not a main package. Each line is one declaration,
// without doc comments, sorted within its package.
func apiListing(root string) ([]byte, error) {
	var out bytes.Buffer
	err := walkLibrary(root, func(dir string) error {
		lines, pkg, err := apiOfDir(dir)
		if err != nil || pkg == "" || pkg == "main" {
			return err
		}
		path := "github.com/gonetcode/netcode"
		if dir != root {
			path += "/" + filepath.ToSlash(dir)
		}
		fmt.Fprintf(&out, "package %s\n", path)
		for _, l := range lines {
			fmt.Fprintf(&out, "\t%s\n", l)
		}
		return nil
	})
	return out.Bytes(), err
}

// walkLibrary calls fn with every directory under root that may hold a
// library package: not internal/, cmd/, examples/, testdata/ or a hidden
// directory, nor anything under them.
func walkLibrary(root string, fn func(dir string) error) error {
	return filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		switch name := d.Name(); {
		case dir != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")),
			name == "internal", name == "cmd", name == "examples", name == "testdata":
			return filepath.SkipDir
		}
		return fn(dir)
	})
}

func apiOfDir(dir string) (lines []string, pkg string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", err
	}
	fset := token.NewFileSet()
	print := func(n any) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			panic(err)
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, "", err
		}
		pkg = f.Name.Name
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv.List[0].Type)) {
					continue
				}
				d.Doc, d.Body = nil, nil
				lines = append(lines, print(d))
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						s.Doc, s.Comment = nil, nil
						st, ok := s.Type.(*ast.StructType)
						if !ok {
							if it, ok := s.Type.(*ast.InterfaceType); ok {
								for _, m := range it.Methods.List {
									m.Doc, m.Comment = nil, nil
								}
							}
							lines = append(lines, "type "+print(s))
							continue
						}
						tparams := ""
						if s.TypeParams != nil {
							tparams = print(&ast.IndexListExpr{X: ast.NewIdent(""), Indices: fieldTypes(s.TypeParams)})
						}
						lines = append(lines, "type "+s.Name.Name+tparams+" struct")
						for _, fl := range st.Fields.List {
							typ := print(fl.Type)
							if len(fl.Names) == 0 && exportedRecv(fl.Type) {
								lines = append(lines, "field "+s.Name.Name+" embeds "+typ)
							}
							for _, n := range fl.Names {
								if n.IsExported() {
									lines = append(lines, "field "+s.Name.Name+"."+n.Name+" "+typ)
								}
							}
						}
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							l := d.Tok.String() + " " + n.Name
							if s.Type != nil {
								l += " " + print(s.Type)
							}
							if d.Tok == token.CONST && i < len(s.Values) {
								l += " = " + print(s.Values[i])
							}
							lines = append(lines, l)
						}
					}
				}
			}
		}
	}
	slices.Sort(lines)
	return slices.Compact(lines), pkg, nil
}

// fieldTypes lists the names of type parameters, for printing T[A, B].
func fieldTypes(fl *ast.FieldList) []ast.Expr {
	var es []ast.Expr
	for _, f := range fl.List {
		for _, n := range f.Names {
			es = append(es, n)
		}
	}
	return es
}

// exportedRecv reports whether a receiver or embedded type names an
// exported type.
func exportedRecv(t ast.Expr) bool {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.SelectorExpr:
			return x.Sel.IsExported()
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// internalInAPI lists the exported declarations known to name a type from
// an internal package, which callers cannot name: each is a defect to mend,
// listed here so that no new one slips in. Remove an entry with its fix.
var internalInAPI = map[string]bool{}

// TestNoInternalTypesInAPI fails when an exported function, method, type,
// field or typed variable of a library package names a type from an
// internal package (constants may take an internal constant's value).
func TestNoInternalTypesInAPI(t *testing.T) {
	found := map[string]bool{}
	err := walkLibrary(".", func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			if f.Name.Name == "main" {
				continue
			}
			internal := map[string]bool{} // import names of internal packages
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				if !strings.Contains(path, "/internal/") {
					continue
				}
				n := path[strings.LastIndex(path, "/")+1:]
				if imp.Name != nil {
					n = imp.Name.Name
				}
				internal[n] = true
			}
			if len(internal) == 0 {
				continue
			}
			uses := func(n ast.Node) bool {
				hit := false
				ast.Inspect(n, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
							hit = true
						}
					}
					return !hit
				})
				return hit
			}
			report := func(what string) { found[f.Name.Name+": "+what] = true }
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() {
						continue
					}
					what := d.Name.Name
					if d.Recv != nil {
						if !exportedRecv(d.Recv.List[0].Type) {
							continue
						}
						what = recvName(d.Recv.List[0].Type) + "." + what
					}
					if uses(d.Type) {
						report(what)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if !s.Name.IsExported() {
								continue
							}
							st, ok := s.Type.(*ast.StructType)
							if !ok {
								if uses(s.Type) {
									report(s.Name.Name)
								}
								continue
							}
							for _, fl := range st.Fields.List {
								exported := len(fl.Names) == 0 && exportedRecv(fl.Type)
								for _, n := range fl.Names {
									exported = exported || n.IsExported()
								}
								if exported && uses(fl.Type) {
									report(s.Name.Name + " field")
								}
							}
						case *ast.ValueSpec:
							if d.Tok != token.VAR || s.Type == nil {
								continue
							}
							for _, n := range s.Names {
								if n.IsExported() && uses(s.Type) {
									report(n.Name)
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for what := range found {
		if !internalInAPI[what] {
			t.Errorf("%s names a type from an internal package in the public API", what)
		}
	}
	for what := range internalInAPI {
		if !found[what] {
			t.Errorf("%s no longer names an internal type: remove it from internalInAPI", what)
		}
	}
}

// recvName returns the name of a receiver's type.
func recvName(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
