package dtensor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryExportedIdentifierHasDoc: every exported function, method,
// type, constant and variable of the package (its non-test files) has a
// doc comment of its own, or its group's; every exported field of an
// exported struct has a comment.
func TestEveryExportedIdentifierHasDoc(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
					continue
				}
				if d.Doc == nil {
					t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), d.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					var names []*ast.Ident
					var doc *ast.CommentGroup
					switch s := s.(type) {
					case *ast.TypeSpec:
						names, doc = []*ast.Ident{s.Name}, s.Doc
						if st, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
							for _, fl := range st.Fields.List {
								for _, n := range fl.Names {
									if n.IsExported() && fl.Doc == nil && fl.Comment == nil {
										t.Errorf("%s: field %s.%s has no comment", fset.Position(n.Pos()), s.Name, n)
									}
								}
							}
						}
					case *ast.ValueSpec:
						names, doc = s.Names, s.Doc
					}
					for _, n := range names {
						if n.IsExported() && doc == nil && d.Doc == nil {
							t.Errorf("%s: %s has no doc comment", fset.Position(n.Pos()), n)
						}
					}
				}
			}
		}
	}
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(r *ast.FieldList) bool {
	typ := r.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
		case *ast.IndexExpr:
			typ = x.X
		case *ast.IndexListExpr:
			typ = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return true
		}
	}
}
