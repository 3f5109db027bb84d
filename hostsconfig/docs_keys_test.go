package hostsconfig

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// configPage is the page that documents every key of both files.
const configPage = "../docs/configuration.md"

// keyTable is a table of a configuration file: "hosts" or "job", and its
// dotted path there ("" for the file's root).
type keyTable struct{ file, path string }

// readerTables says which tables each function that checks a table's
// keys (t.unknown) reads. A new such function must be added here, and
// its keys to the page.
var readerTables = map[string][]keyTable{
	"readHosts":     {{"hosts", ""}},
	"readSlurm":     {{"hosts", "slurm"}},
	"readSSH":       {{"hosts", "ssh"}},
	"readLocal":     {{"hosts", "local"}},
	"readBus":       {{"hosts", "bus"}},
	"readShip":      {{"hosts", "ship"}},
	"readHealth":    {{"hosts", "health"}},
	"readJob":       {{"job", ""}},
	"readSPMD":      {{"job", "spmd"}},
	"readLog":       {{"job", "log"}},
	"readDashboard": {{"job", "dashboard"}},
	"readArray":     {{"job", "array"}},
	"offAt":         {{"job", "exec"}, {"job", "feed"}}, // readExec, readFeed
}

// TestConfigPageNamesEveryKey keeps docs/configuration.md key by key:
// every key the parser accepts (the keys its t.unknown calls allow) has a
// row in the page's table of its file, and every key the page gives is
// one the parser accepts.
func TestConfigPageNamesEveryKey(t *testing.T) {
	known := parserKeys(t)
	page, err := os.ReadFile(configPage)
	if err != nil {
		t.Fatal(err)
	}
	documented := pageKeys(string(page))
	for _, file := range []string{"hosts", "job"} {
		if len(documented[file]) < 8 {
			t.Fatalf("%s: found %d keys of the %s file; the pattern no longer finds its table", configPage, len(documented[file]), file)
		}
		for _, k := range known[file] {
			if !slices.Contains(documented[file], k) {
				t.Errorf("%s: the %s file's key %s has no row: add one, with its default and meaning", configPage, file, k)
			}
		}
		for _, k := range documented[file] {
			if !slices.Contains(known[file], k) && !isTable(file, k) {
				t.Errorf("%s: documents %s in the %s file, a key the parser does not know", configPage, k, file)
			}
		}
	}
}

func isTable(file, path string) bool {
	for _, tables := range readerTables {
		if slices.Contains(tables, keyTable{file, path}) {
			return true
		}
	}
	return false
}

// parserKeys returns the full dotted keys of each file that the package's
// t.unknown calls allow, tables that have keys of their own left out.
func parserKeys(t *testing.T) map[string][]string {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var decls []ast.Decl
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	consts := map[string]string{}  // a string constant's value
	lists := map[string]ast.Expr{} // a function that returns one composite literal: its literal
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if vs, ok := s.(*ast.ValueSpec); ok && d.Tok == token.CONST {
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[n.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		case *ast.FuncDecl:
			if d.Body != nil && len(d.Body.List) == 1 {
				if r, ok := d.Body.List[0].(*ast.ReturnStmt); ok && len(r.Results) == 1 {
					if cl, ok := r.Results[0].(*ast.CompositeLit); ok {
						lists[d.Name.Name] = cl
					}
				}
			}
		}
	}
	var strs func(e ast.Expr) []string
	strs = func(e ast.Expr) []string {
		switch e := e.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
				return []string{s}
			}
		case *ast.Ident:
			if s, ok := consts[e.Name]; ok {
				return []string{s}
			}
		case *ast.CallExpr:
			if id, ok := e.Fun.(*ast.Ident); ok && len(e.Args) == 0 && lists[id.Name] != nil {
				return strs(lists[id.Name])
			}
		case *ast.CompositeLit:
			var out []string
			for _, el := range e.Elts {
				s := strs(el)
				if s == nil {
					return nil
				}
				out = append(out, s...)
			}
			return out
		}
		return nil
	}
	known := map[string][]string{}
	for _, d := range decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "unknown" {
				return true
			}
			tables, ok := readerTables[fn.Name.Name]
			if !ok {
				t.Errorf("%s checks the keys of a table (t.unknown at %s) that readerTables does not name: add it there, and its keys to %s",
					fn.Name.Name, fset.Position(call.Pos()), configPage)
				return true
			}
			for _, a := range call.Args {
				keys := strs(a)
				if keys == nil {
					t.Fatalf("%s: cannot read the keys of t.unknown's argument in %s: a string literal, a string constant or a function returning a []string literal", fset.Position(a.Pos()), fn.Name.Name)
				}
				for _, tb := range tables {
					for _, k := range keys {
						if tb.path != "" {
							k = tb.path + "." + k
						}
						if !isTable(tb.file, k) && !slices.Contains(known[tb.file], k) {
							known[tb.file] = append(known[tb.file], k)
						}
					}
				}
			}
			return true
		})
	}
	return known
}

// pageKeys returns the keys of each file's table on the page ("hosts":
// the table headed "MONARCH_HOSTS key", "job": "job key"), in full: a
// row's `slurm.gpus_per_node`, `partition` is slurm.gpus_per_node and
// slurm.partition; `[procs]` is procs.
func pageKeys(page string) map[string][]string {
	keys := map[string][]string{}
	file := ""
	for _, line := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(line, "| MONARCH_HOSTS key |"):
			file = "hosts"
			continue
		case strings.HasPrefix(line, "| job key |"):
			file = "job"
			continue
		case !strings.HasPrefix(line, "|"):
			file = ""
		}
		cells := strings.Split(line, "|")
		if file == "" || len(cells) < 3 || strings.HasPrefix(cells[1], "---") {
			continue
		}
		prefix := ""
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			k := strings.Trim(m[1], "[]")
			if i := strings.LastIndex(k, "."); i >= 0 {
				prefix = k[:i]
			} else if prefix != "" {
				k = prefix + "." + k
			}
			keys[file] = append(keys[file], k)
		}
	}
	return keys
}
