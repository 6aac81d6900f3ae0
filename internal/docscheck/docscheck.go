// Package docscheck keeps the repository's documents true to its code: every
// Go identifier, package, file and directory that README.md and docs/*.md
// name in backquotes must exist in one of the repository's four modules,
// and no source file or document may cite a document outside the
// repository (OutsideCitations).
//
// What a span is taken to name, and so what is checked (anything else is
// prose in code type, or another project's name, and is left alone):
//
//   - pkg.Name, pkg.Type.Member, dir/pkg.Name and the module's import path
//     with a name, where pkg is a package of the repository by its package
//     name or directory (log, elect, kvservice, route, elect/gossip): the
//     package must declare Name, and Type must have the field or method
//     Member (promoted ones included). A short name that two packages
//     answer to is refused as ambiguous; the document must give the path.
//   - Type.Member, where Type is a type declared somewhere in the
//     repository: a type of that name must have that member.
//   - a path with a slash (internal/replog/leader.go, bench/etcd/compare.sh,
//     internal/replog/testdata/, cmd/edictkv/internal): a file or directory of the
//     repository, from its root or, as documents name them inside a module
//     or a package tree, from any directory (route/stream.go). A path whose
//     first element is no directory of the repository is another project's
//     (etcd's server/storage/mvcc/...) and is not checked.
//   - a Go file followed by identifiers (`internal/replog/leader.go` `startReign`,
//     `onAppend`): each must be declared in that file.
//   - a test, benchmark, fuzz target or example (TestLog,
//     TestNegativeControl/drift-beyond-rho): a function of that name must
//     be declared.
//   - an identifier in camel case (maybeCommit, hearEpoch, LeaseAcquired):
//     something of that name must be declared somewhere in the repository,
//     unless it is one of the names of other projects listed in
//     foreignNames.
//
// A document also cites no issue by number ("issue 16"): it says what is
// true now, and the history is in git.
//
// In fenced code blocks (commands, diagrams, sketches of the API) only the
// exported names that a repository package qualifies (edictlog.Start,
// storage.OpenBolt) are checked: the rest is other programs' text. The
// runnable examples (example_test.go) keep the API itself compiling.
package docscheck

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Problem is a backquoted name in a document that the repository does not
// have.
type Problem struct {
	Doc  string // the document, relative to the repository's root
	Line int    // 1-based
	Span string // the backquoted text
	Why  string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: `%s`: %s", p.Doc, p.Line, p.Span, p.Why)
}

// span is one backquoted piece of a document, with the text between it and
// the span before it in the same paragraph; or, with fenced set, one
// qualified name (pkg.Name) from a fenced code block.
type span struct {
	line   int
	text   string
	before string
	fenced bool
}

// Spans returns the backquoted spans of a markdown document outside fenced
// code blocks. A span may cross a line break but not a blank line.
func Spans(doc string) []span {
	var out []span
	lines := strings.Split(doc, "\n")
	fenced := false
	var para []string
	paraStart := 0
	flush := func() {
		out = append(out, paragraphSpans(para, paraStart)...)
		para = nil
	}
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			flush()
			fenced = !fenced
			continue
		}
		if fenced {
			for _, m := range qualified.FindAllString(l, -1) {
				out = append(out, span{line: i + 1, text: m, fenced: true})
			}
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if para == nil {
			paraStart = i + 1
		}
		para = append(para, l)
	}
	flush()
	return out
}

func paragraphSpans(para []string, first int) []span {
	var out []span
	var before strings.Builder
	var cur strings.Builder
	in := false
	start := 0
	for i, l := range para {
		for _, r := range l {
			switch {
			case r == '`' && !in:
				in, start = true, first+i
				cur.Reset()
			case r == '`':
				in = false
				out = append(out, span{line: start, text: cur.String(), before: before.String()})
				before.Reset()
			case in:
				cur.WriteRune(r)
			default:
				before.WriteRune(r)
			}
		}
		if in {
			cur.WriteRune(' ')
		} else {
			before.WriteRune('\n')
		}
	}
	return out
}

var (
	// identRef is a dotted Go reference, with an optional path before it
	// and an optional call after it: pkg.Name, dir/pkg.Type.Member(args).
	identRef = regexp.MustCompile(`^((?:[A-Za-z0-9_.-]+/)*)([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\(.*\))?$`)
	// pathRef is a slash-separated path of the repository's kind.
	pathRef = regexp.MustCompile(`^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?$`)
	// testRef is a Go test, benchmark, fuzz target or example, with an
	// optional subtest.
	testRef = regexp.MustCompile(`^((?:Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*)(?:/\S*)?$`)
	// camel is an identifier with a lower-case letter before an upper-case
	// one: a Go name, not a word.
	camel = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*[a-z][A-Z][A-Za-z0-9_]*$`)
	// qualified is an exported name qualified by a package name, as code
	// writes it.
	qualified = regexp.MustCompile(`\b[a-z][a-z0-9]*\.[A-Z][A-Za-z0-9_]*`)
	// listSep is what may stand between a Go file and the names it
	// declares: spaces, commas, "and".
	listSep = regexp.MustCompile(`^[\s,]*(?:and\s+)?$`)
)

// fileExts are the extensions that make a dotted name a file (compare.sh,
// state.db), not a Go reference.
var fileExts = map[string]bool{
	"go": true, "sh": true, "md": true, "txt": true, "json": true, "yaml": true, "yml": true,
	"mod": true, "sum": true, "work": true, "db": true, "staged": true, "proto": true,
	"py": true, "toml": true, "csv": true, "tsv": true, "jsonl": true, "html": true, "svg": true,
	"png": true, "prof": true, "pprof": true, "out": true,
}

// foreignNames are camel-case names that the documents take from other
// projects (etcd, etcd's raft, hashicorp/raft, Kubernetes, Go's runtime) and
// from the protocol's papers; they are not the repository's to declare.
var foreignNames = map[string]bool{
	// etcd's API: gRPC services and methods, messages, client options.
	"Cluster.MemberList": true, "Cluster.MemberUpdate": true, "KV.Put": true, "KV.DeleteRange": true, "KV.Txn": true,
	"RaftKV": true, "PutRequest": true, "PutResponse": true, "DeleteRangeRequest": true,
	"TxnRequest": true, "CompactionRequest": true, "AlarmRequest": true,
	"WithRequireLeader": true, "WithRev": true,
	// etcd's server: its backend, watch and channel sizes, the strict
	// reconfiguration check.
	"backend.Defrag": true, "chanBufLen": true, "watchBatchMaxRevs": true,
	"isConnectedToQuorumSince": true,
	// etcd's raft, and Raft's paper.
	"stepLeader": true, "MsgAppResp": true, "currentTerm": true,
	// Go's runtime.
	"HeapAlloc": true,
}

// Check reads the named documents and returns every backquoted name in them
// that the repository lacks.
func (ix *Index) Check(docs ...string) ([]Problem, error) {
	var out []Problem
	for _, d := range docs {
		b, err := ix.readFile(d)
		if err != nil {
			return nil, err
		}
		out = append(out, ix.CheckDoc(d, string(b))...)
	}
	return out, nil
}

// issueRef is a reference to the project's issue tracker: history, which a
// document that says what is true now does not need.
var issueRef = regexp.MustCompile(`\b[Ii]ssues? #?[0-9]+`)

// CheckDoc checks one document's text; doc names it in the problems.
func (ix *Index) CheckDoc(doc, text string) []Problem {
	var out []Problem
	for i, line := range strings.Split(text, "\n") {
		if m := issueRef.FindString(line); m != "" {
			out = append(out, Problem{Doc: doc, Line: i + 1, Span: m,
				Why: "cites an issue: say what the text is about, not which issue it served"})
		}
	}
	goFile := "" // the Go file that the spans after it name declarations of
	for _, s := range Spans(text) {
		t := strings.TrimSpace(s.text)
		if s.fenced {
			if name := t[:strings.Index(t, ".")]; len(ix.byName[name]) > 0 {
				if why := ix.checkRef("", name, strings.Split(t[len(name)+1:], ".")); why != "" {
					out = append(out, Problem{Doc: doc, Line: s.line, Span: t, Why: why})
				}
			}
			goFile = ""
			continue
		}
		if goFile != "" && !listSep.MatchString(s.before) {
			goFile = ""
		}
		why, file := ix.checkSpan(t, goFile)
		if why != "" {
			out = append(out, Problem{Doc: doc, Line: s.line, Span: t, Why: why})
		}
		if file != "" || !isIdent(t) {
			goFile = file
		}
	}
	slices.SortStableFunc(out, func(a, b Problem) int { return a.Line - b.Line })
	return out
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// checkSpan judges one span. It returns why the span names nothing the
// repository has (empty if it does, or names nothing of the repository's),
// and the repository path of the Go file it names, if it names one.
func (ix *Index) checkSpan(t, goFile string) (why, file string) {
	if foreignNames[t] {
		return "", ""
	}
	if m := testRef.FindStringSubmatch(t); m != nil {
		if !ix.decls[m[1]] {
			return fmt.Sprintf("no test, benchmark, fuzz target or example %s in the repository", m[1]), ""
		}
		return "", ""
	}
	if goFile != "" && isIdent(t) && len(ix.byName[t]) == 0 {
		if !ix.fileDecls[goFile][t] {
			return fmt.Sprintf("%s declares no %s", goFile, t), ""
		}
		return "", ""
	}
	if isIdent(t) {
		if camel.MatchString(t) && !ix.decls[t] {
			return fmt.Sprintf("nothing named %s is declared in the repository", t), ""
		}
		return "", ""
	}
	if strings.HasPrefix(t, "github.com/edictlog/edictlog") {
		rest := strings.TrimPrefix(strings.TrimPrefix(t, "github.com/edictlog/edictlog"), "/")
		if rest == "" {
			return "", ""
		}
		return ix.checkSpan(rest, "")
	}
	if m := identRef.FindStringSubmatch(t); m != nil && (m[1] != "" || m[3] != "") {
		dir, name, rest := strings.TrimSuffix(m[1], "/"), m[2], m[3]
		ext := ""
		if i := strings.LastIndex(rest, "."); i >= 0 {
			ext = rest[i+1:]
		}
		if fileExts[ext] && !strings.Contains(t, "(") {
			return ix.checkPath(t)
		}
		if rest == "" {
			return ix.checkPath(t)
		}
		if dir != "" && strings.Contains(strings.SplitN(dir, "/", 2)[0], ".") {
			return "", "" // another module's import path: golang.org/x/sys/unix.ClockGettime
		}
		return ix.checkRef(dir, name, strings.Split(rest[1:], ".")), ""
	}
	if pathRef.MatchString(t) && strings.Contains(t, "/") && !strings.HasPrefix(t, "/") {
		return ix.checkPath(t)
	}
	return "", ""
}

// checkPath checks a path that a span names, and returns the Go file it
// names, if it is one.
func (ix *Index) checkPath(p string) (why, file string) {
	if !strings.Contains(p, "/") {
		// A file by its name alone (compare.sh, granter.go): checked only
		// as the file of the names after it, if the repository has exactly
		// one of that name.
		if strings.HasSuffix(p, ".go") {
			if found := ix.findPath(p, false); len(found) == 1 {
				return "", found[0]
			}
		}
		return "", ""
	}
	first := strings.SplitN(p, "/", 2)[0]
	if strings.Contains(first, ".") && first != "." && first != ".." && !ix.dirs[first] {
		return "", "" // another module's path: go.etcd.io/etcd/api/v3
	}
	wantDir := strings.HasSuffix(p, "/")
	found := ix.findPath(strings.TrimSuffix(p, "/"), wantDir)
	switch {
	case len(found) == 1:
		if strings.HasSuffix(found[0], ".go") {
			return "", found[0]
		}
		return "", ""
	case len(found) > 1:
		return "", "" // exists; which one names after a Go file mean is unknown
	}
	if ix.rules[p] {
		return "", "" // a mutation rule: log/accept-reign
	}
	if !ix.dirNamed(first) {
		return "", "" // another project's path: server/etcdserver/txn
	}
	if strings.Contains(path.Base(p), "-") {
		return fmt.Sprintf("no mutation rule %s (nor file or directory) in the repository", p), ""
	}
	return fmt.Sprintf("no file or directory %s in the repository", p), ""
}

// findPath returns the repository's paths that p names: p itself from the
// root, or a path ending in /p.
func (ix *Index) findPath(p string, dirOnly bool) []string {
	var found []string
	look := func(set map[string]bool) {
		if set[p] {
			found = append(found, p)
			return
		}
		for q := range set {
			if strings.HasSuffix(q, "/"+p) {
				found = append(found, q)
			}
		}
	}
	look(ix.dirs)
	if !dirOnly && len(found) == 0 {
		look(ix.files)
	}
	return found
}

// dirNamed reports whether some directory of the repository has the name.
func (ix *Index) dirNamed(name string) bool {
	for d := range ix.dirs {
		if path.Base(d) == name {
			return true
		}
	}
	return false
}

// checkRef checks a Go reference: name.rest[0].rest[1] with name a package
// (dir, if given, is the path before it) or a type.
func (ix *Index) checkRef(dir, name string, rest []string) string {
	var pkgDirs []string
	if dir != "" {
		for _, q := range ix.findPath(dir+"/"+name, true) {
			if _, ok := ix.pkgs[q]; ok {
				pkgDirs = append(pkgDirs, q)
			}
		}
		if len(pkgDirs) == 0 {
			if ix.dirNamed(strings.SplitN(dir, "/", 2)[0]) {
				return fmt.Sprintf("no package %s/%s in the repository", dir, name)
			}
			return "" // another project's package
		}
	} else {
		pkgDirs = ix.byName[name]
	}
	switch len(pkgDirs) {
	case 0:
		// Not a package: Type.Member, if Type is one of the repository's.
		decls := ix.types[name]
		if len(decls) == 0 {
			return ""
		}
		for _, t := range decls {
			if ix.hasMember(t, rest[0], map[*typeDecl]bool{}) {
				return ""
			}
		}
		return fmt.Sprintf("no type %s in the repository has a field or method %s (%s)", name, rest[0], ix.typeHomes(name))
	case 1:
	default:
		return fmt.Sprintf("%s is ambiguous: it names the packages %s; write the path", name, strings.Join(pkgDirs, ", "))
	}
	p := ix.pkgs[pkgDirs[0]]
	if !p.top[rest[0]] {
		return fmt.Sprintf("package %s (%s) declares no %s", p.name, p.dir, rest[0])
	}
	if len(rest) == 1 {
		return ""
	}
	t := p.types[rest[0]]
	if t == nil {
		return "" // a function's or variable's member: not checked
	}
	if !ix.hasMember(t, rest[1], map[*typeDecl]bool{}) {
		return fmt.Sprintf("%s.%s (%s) has no field or method %s", p.name, rest[0], p.dir, rest[1])
	}
	return ""
}

// typeHomes lists the packages that declare a type of the name.
func (ix *Index) typeHomes(name string) string {
	var dirs []string
	for _, t := range ix.types[name] {
		dirs = append(dirs, t.pkg.dir)
	}
	return "declared in " + strings.Join(dirs, ", ")
}

// outsideCites are the ways the code and documents once cited documents
// that are not in the repository: the design notes by section, and the
// papers and reference figures by a path on the machine they were written
// on (each written in two pieces so that this file does not match).
var outsideCites = []string{"DESIGN " + "§", "DESIGN" + ".md", "/work/" + "shared", "shared/" + "papers", "shared/" + "anchors"}

// OutsideCitations returns every line of the repository's source and
// documents that cites a document outside it: the design notes (what they
// hold that a reader needs is in docs/, and a citation must name that), or
// a file of the machine a paper or a figure was read on (a paper is cited
// by its authors and title).
func (ix *Index) OutsideCitations() ([]Problem, error) {
	var out []Problem
	for _, f := range ix.Files() {
		switch path.Ext(f) {
		case ".go", ".md", ".sh", ".txt", ".yaml", ".yml", "":
		default:
			continue
		}
		full := filepath.Join(ix.Root, filepath.FromSlash(f))
		if fi, err := os.Stat(full); err != nil || fi.Size() > 4<<20 {
			continue // gone since the walk, or a build's output, not a document
		}
		b, err := os.ReadFile(full)
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // a binary: a built program, not a document
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			for _, c := range outsideCites {
				if bytes.Contains(line, []byte(c)) {
					out = append(out, Problem{Doc: f, Line: i + 1, Span: c,
						Why: "cites a document that is not in the repository"})
				}
			}
		}
	}
	return out, nil
}
