package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Index is what a document may name in the repository: every file and
// directory, and the declarations of every Go package in all of its modules,
// tests included.
type Index struct {
	// Root is the repository's directory.
	Root string
	// files and dirs hold every path below Root, slash-separated and
	// relative to it (.git and hidden directories other than .ci left out).
	files map[string]bool
	dirs  map[string]bool
	// pkgs holds the Go packages by directory; byName lists the directories
	// of the packages a short name may mean (the package clause, and the
	// directory's base name when it differs), main packages left out.
	pkgs   map[string]*pkg
	byName map[string][]string
	// types lists, for a type name, its declarations in every package;
	// decls, every name declared anywhere (top level, method, field).
	types map[string][]*typeDecl
	decls map[string]bool
	// fileDecls holds the names declared at the top level of each Go file
	// and the methods whose receivers it declares, by file path.
	fileDecls map[string]map[string]bool
	// rules holds the names of the mutation rules (the string constants
	// named ...Rule... or rule... that EDICT_MUTATE takes), as written and
	// prefixed as the mutation runner names them: accept-reign,
	// log/accept-reign.
	rules map[string]bool
}

// rulePrefix is the prefix the mutation runner (internal/sim's
// TestMutations) gives a package's rules: the package's name, but for the
// replicated log's, which it names for what they guard.
func rulePrefix(pkg string) string {
	if pkg == "replog" {
		return "log"
	}
	return pkg
}

type pkg struct {
	dir   string
	name  string
	top   map[string]bool
	types map[string]*typeDecl
}

// typeDecl is one declared type: its fields and methods (interface methods
// included), and the types it embeds, as written (T or pkg.T).
type typeDecl struct {
	pkg     *pkg
	members map[string]bool
	embeds  []string
}

// skipDir reports whether a directory of the repository holds nothing a
// document names: git's own, hidden ones other than CI's.
func skipDir(name string) bool {
	return name == ".git" || (strings.HasPrefix(name, ".") && name != ".ci" && name != ".")
}

// NewIndex walks the repository at root and parses every Go file in it.
func NewIndex(root string) (*Index, error) {
	ix := &Index{
		Root:      root,
		files:     map[string]bool{},
		dirs:      map[string]bool{},
		pkgs:      map[string]*pkg{},
		byName:    map[string][]string{},
		types:     map[string][]*typeDecl{},
		decls:     map[string]bool{},
		fileDecls: map[string]map[string]bool{},
		rules:     map[string]bool{},
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(d.Name()) {
				return filepath.SkipDir
			}
			ix.dirs[rel] = true
			return nil
		}
		ix.files[rel] = true
		if !strings.HasSuffix(rel, ".go") || strings.Contains("/"+rel, "/testdata/") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", rel, err)
		}
		ix.add(rel, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for dir, p := range ix.pkgs {
		if p.name == "main" {
			continue
		}
		names := []string{p.name}
		if b := path.Base(dir); b != p.name {
			names = append(names, b)
		}
		for _, n := range names {
			ix.byName[n] = append(ix.byName[n], dir)
		}
	}
	for _, dirs := range ix.byName {
		slices.Sort(dirs)
	}
	return ix, nil
}

func (ix *Index) add(rel string, f *ast.File) {
	dir := path.Dir(rel)
	name := strings.TrimSuffix(f.Name.Name, "_test")
	key := dir
	if name != f.Name.Name {
		// An external test package (package x_test) is its own package;
		// a document names it by its file, never as x.
		key = dir + " (" + f.Name.Name + ")"
	}
	p := ix.pkgs[key]
	if p == nil {
		p = &pkg{dir: dir, name: f.Name.Name, top: map[string]bool{}, types: map[string]*typeDecl{}}
		ix.pkgs[key] = p
	}
	fd := map[string]bool{}
	ix.fileDecls[rel] = fd
	declare := func(n string) {
		fd[n] = true
		ix.decls[n] = true
	}
	typeOf := func(n string) *typeDecl {
		t := p.types[n]
		if t == nil {
			t = &typeDecl{pkg: p, members: map[string]bool{}}
			p.types[n] = t
			ix.types[n] = append(ix.types[n], t)
		}
		return t
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				p.top[d.Name.Name] = true
				declare(d.Name.Name)
				continue
			}
			if recv := typeName(d.Recv.List[0].Type); recv != "" {
				typeOf(recv).members[d.Name.Name] = true
				declare(d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for i, n := range s.Names {
						p.top[n.Name] = true
						declare(n.Name)
						if d.Tok == token.CONST && (strings.Contains(n.Name, "Rule") || strings.HasPrefix(n.Name, "rule")) && i < len(s.Values) {
							if lit, ok := s.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								if v, err := strconv.Unquote(lit.Value); err == nil {
									ix.rules[v] = true
									ix.rules[rulePrefix(p.name)+"/"+v] = true
								}
							}
						}
					}
				case *ast.TypeSpec:
					p.top[s.Name.Name] = true
					declare(s.Name.Name)
					t := typeOf(s.Name.Name)
					ix.addMembers(t, s.Type, declare)
				}
			}
		}
	}
	// Subtests are named by t.Run("Name", ...): a document may name one as
	// it names a test.
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Run" {
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					ix.decls[v] = true
				}
			}
		}
		return true
	})
}

// addMembers records the fields and methods of a struct or interface type.
func (ix *Index) addMembers(t *typeDecl, e ast.Expr, declare func(string)) {
	var fields *ast.FieldList
	switch x := e.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	default:
		return
	}
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			embedded := typeName(f.Type)
			if embedded == "" {
				continue
			}
			t.embeds = append(t.embeds, embedded)
			short := embedded[strings.LastIndex(embedded, ".")+1:]
			t.members[short] = true
			continue
		}
		for _, n := range f.Names {
			t.members[n.Name] = true
			declare(n.Name)
		}
	}
}

// typeName is the type an embedded field or a method's receiver names, as
// written: T or pkg.T, of T, *T, T[K] or *pkg.T[K].
func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return typeName(x.X)
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.IndexListExpr:
		return typeName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return id.Name + "." + x.Sel.Name
		}
	}
	return ""
}

// hasMember reports whether type t has a field or method named m, its
// embedded types' promoted ones included.
func (ix *Index) hasMember(t *typeDecl, m string, seen map[*typeDecl]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	if t.members[m] {
		return true
	}
	for _, e := range t.embeds {
		var owners []*typeDecl
		if i := strings.LastIndex(e, "."); i >= 0 {
			for _, dir := range ix.byName[e[:i]] {
				if et := ix.pkgs[dir].types[e[i+1:]]; et != nil {
					owners = append(owners, et)
				}
			}
		} else if et := t.pkg.types[e]; et != nil {
			owners = append(owners, et)
		}
		for _, et := range owners {
			if ix.hasMember(et, m, seen) {
				return true
			}
		}
	}
	return false
}

// Files returns the repository's files, sorted.
func (ix *Index) Files() []string {
	out := make([]string, 0, len(ix.files))
	for f := range ix.files {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// readFile reads a document of the repository.
func (ix *Index) readFile(rel string) ([]byte, error) {
	return os.ReadFile(filepath.Join(ix.Root, filepath.FromSlash(rel)))
}
