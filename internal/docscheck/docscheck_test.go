package docscheck

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func repoIndex(t *testing.T) *Index {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The documents speak of all four modules; outside a checkout (the
	// library module alone, as a dependency) they are not all there.
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Skipf("not a checkout of the repository (%v): the documents' names cannot be checked", err)
	}
	ix, err := NewIndex(root)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// Every package, identifier, file and test that README.md and docs/*.md
// name in backquotes exists in the repository.
func TestDocsNameWhatExists(t *testing.T) {
	ix := repoIndex(t)
	docs := []string{"README.md"}
	for _, f := range ix.Files() {
		if path.Dir(f) == "docs" && strings.HasSuffix(f, ".md") {
			docs = append(docs, f)
		}
	}
	if len(docs) < 2 {
		t.Fatalf("found no docs/*.md under %s", ix.Root)
	}
	problems, err := ix.Check(docs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// The repository's code and documents cite no document outside it, so
// that they stand alone.
func TestNothingCitesOutsideTheRepository(t *testing.T) {
	problems, err := repoIndex(t).OutsideCitations()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
