package mvcc

import (
	"errors"
	"fmt"
	"slices"
)

// errRevisionNotFound is a keyIndex's answer for a key that does not exist
// at the asked revision.
var errRevisionNotFound = errors.New("mvcc: revision not found")

// keyIndex is the history of one key, as etcd keeps it: a list of
// generations, each the revisions of one life of the key from its creation
// to its deletion. A deletion appends its tombstone revision to the current
// generation and opens a new, empty one; a put after it starts that
// generation, with version 1. The last generation is the current one (empty
// when the key is deleted); every other ends with a tombstone.
//
// For example put(1.0); put(2.0); tombstone(3.0); put(4.0); tombstone(5.0)
// gives
//
//	{1.0, 2.0, 3.0(t)} {4.0, 5.0(t)} {}
//
// Compacting at rev keeps, of the revisions at or below rev, only the
// newest, and drops generations that ended at or before rev:
//
//	compact(2): {2.0, 3.0(t)} {4.0, 5.0(t)} {}
//	compact(4): {4.0, 5.0(t)} {}
//	compact(5): {5.0(t)} {}
//	compact(6): {}   — the key leaves the index
//
// Most keys are put once and never changed (etcd's benchmark writes no
// other): their history is one generation of one revision, modified, that
// created the key with version 1, and the keyIndex holds it in modified
// alone, hist nil — a third of the memory of a list of generations. The
// first change after it, or a compaction or a reopen that leaves a key so
// again, switches between the two forms; the methods answer the same for
// both, the sub revision of a creation aside (callers read its main
// revision alone, all a reopened store knows of it).
type keyIndex struct {
	key []byte
	// modified is the key's newest revision, its tombstone if deleted.
	modified Revision
	// hist holds the generations; nil: one generation, {modified}, created
	// at modified, version 1.
	hist *keyHistory
}

// keyHistory is the generations of a key whose history is more than its
// creating put.
type keyHistory struct {
	generations []generation
}

type generation struct {
	// ver is the number of revisions the generation has had, compacted
	// ones included: the version of its last revision.
	ver     int64
	created Revision
	revs    []Revision
}

func (g *generation) isEmpty() bool { return g == nil || len(g.revs) == 0 }

// newKeyIndex is the index of key, which the index does not hold, created
// by a put at rev, with its own copy of the key.
func newKeyIndex(key []byte, rev Revision) (*keyIndex, error) {
	if !rev.GreaterThan(Revision{}) {
		return nil, fmt.Errorf("key %q: revision %d.%d is not after 0.0", key, rev.Main, rev.Sub)
	}
	return &keyIndex{key: slices.Clone(key), modified: rev}, nil
}

func (ki *keyIndex) isEmpty() bool {
	return ki.hist != nil && len(ki.hist.generations) == 1 && ki.hist.generations[0].isEmpty()
}

// grow gives a key held in modified alone its list of generations, with
// room for one more revision and gens generations.
func (ki *keyIndex) grow(gens int) {
	if ki.hist != nil {
		return
	}
	revs := make([]Revision, 1, 2)
	revs[0] = ki.modified
	h := &keyHistory{generations: make([]generation, 1, gens)}
	h.generations[0] = generation{ver: 1, created: ki.modified, revs: revs}
	ki.hist = h
}

// after refuses a change at rev unless rev follows the key's newest one.
func (ki *keyIndex) after(rev Revision) error {
	if !rev.GreaterThan(ki.modified) {
		return fmt.Errorf("key %q: revision %d.%d is not after its last one %d.%d", ki.key, rev.Main, rev.Sub, ki.modified.Main, ki.modified.Sub)
	}
	return nil
}

// put appends rev to the current generation, starting it if it is empty.
func (ki *keyIndex) put(rev Revision) error {
	if err := ki.after(rev); err != nil {
		return err
	}
	ki.grow(1)
	h := ki.hist
	if len(h.generations) == 0 {
		h.generations = append(h.generations, generation{})
	}
	g := &h.generations[len(h.generations)-1]
	if len(g.revs) == 0 {
		g.created = rev
	}
	g.revs = append(g.revs, rev)
	g.ver++
	ki.modified = rev
	return nil
}

// tombstone ends the current generation at rev.
func (ki *keyIndex) tombstone(rev Revision) error {
	if ki.hist != nil && (len(ki.hist.generations) == 0 || ki.hist.generations[len(ki.hist.generations)-1].isEmpty()) {
		return fmt.Errorf("key %q: deleted at revision %d.%d while it does not exist", ki.key, rev.Main, rev.Sub)
	}
	if err := ki.after(rev); err != nil {
		return err
	}
	ki.grow(2) // room for the empty generation that follows
	if err := ki.put(rev); err != nil {
		return err
	}
	ki.hist.generations = append(ki.hist.generations, generation{})
	return nil
}

// nextPut returns the create_revision and version that a put at rev, above
// every revision of the key, gives it.
func (ki *keyIndex) nextPut(rev int64) (created, ver int64) {
	if _, c, v, err := ki.get(rev); err == nil {
		return c.Main, v + 1
	}
	return rev, 1
}

// restore starts the index of a key whose older revisions are compacted
// away: its oldest remaining revision is modified, of a generation created
// at created, with version ver. A key bucket entry tells only the main
// revision of its key's creation (created.Sub is 0), so a put that created
// its key is known by version 1 and its own main revision.
func (ki *keyIndex) restore(created, modified Revision, ver int64) {
	ki.modified = modified
	if created.Main == modified.Main && ver == 1 {
		return
	}
	ki.hist = &keyHistory{generations: []generation{{created: created, ver: ver, revs: []Revision{modified}}}}
}

// restoreTombstone starts the index of a key whose oldest remaining
// revision is a tombstone; its generation's creation is compacted away.
func (ki *keyIndex) restoreTombstone(rev Revision) {
	ki.modified = rev
	ki.hist = &keyHistory{generations: []generation{{ver: 1, revs: []Revision{rev}}, {}}}
}

// get returns the key's revision, creation and version at atRev, or
// errRevisionNotFound when it does not exist then.
func (ki *keyIndex) get(atRev int64) (modified, created Revision, ver int64, err error) {
	if ki.hist == nil {
		if ki.modified.Main <= atRev {
			return ki.modified, ki.modified, 1, nil
		}
		return Revision{}, Revision{}, 0, errRevisionNotFound
	}
	g := ki.findGeneration(atRev)
	if g.isEmpty() {
		return Revision{}, Revision{}, 0, errRevisionNotFound
	}
	for n := len(g.revs) - 1; n >= 0; n-- {
		if g.revs[n].Main <= atRev {
			return g.revs[n], g.created, g.ver - int64(len(g.revs)-n-1), nil
		}
	}
	return Revision{}, Revision{}, 0, errRevisionNotFound
}

// findGeneration returns the generation the key is in at rev, or nil if
// the key does not exist at rev (before its first revision, or between a
// tombstone and the next put). The key has its list of generations.
func (ki *keyIndex) findGeneration(rev int64) *generation {
	gens := ki.hist.generations
	last := len(gens) - 1
	for cg := last; cg >= 0; cg-- {
		g := &gens[cg]
		if len(g.revs) == 0 {
			continue
		}
		if cg != last {
			if tomb := g.revs[len(g.revs)-1].Main; tomb <= rev {
				return nil
			}
		}
		if g.revs[0].Main <= rev {
			return g
		}
	}
	return nil
}

// doCompact finds the generation and position from which compact at atRev
// keeps revisions, adding the newest revision at or below atRev to
// available.
//
// It skips the generations that ended before atRev, as etcd's does, and
// also one that ended at atRev when the next one starts at atRev too (the
// key deleted and put again by one transaction): the key lives at atRev,
// in the next generation. etcd stops at the ended generation and keeps
// only its tombstone, so its physical compaction would then remove the
// put that a read at atRev needs; etcd's API cannot reach that case (a
// Txn refuses a put and a delete of one key), but this store's callers
// can.
func (ki *keyIndex) doCompact(atRev int64, available map[Revision]struct{}) (genIdx, revIdx int) {
	gens := ki.hist.generations
	for genIdx < len(gens)-1 {
		g := &gens[genIdx]
		tomb := g.revs[len(g.revs)-1].Main
		if tomb > atRev {
			break
		}
		if next := &gens[genIdx+1]; tomb == atRev && (next.isEmpty() || next.revs[0].Main > atRev) {
			break
		}
		genIdx++
	}
	g := &gens[genIdx]
	revIdx = -1
	for n := len(g.revs) - 1; n >= 0; n-- {
		if g.revs[n].Main <= atRev {
			available[g.revs[n]] = struct{}{}
			revIdx = n
			break
		}
	}
	return genIdx, revIdx
}

// compact drops the revisions at or below atRev except the newest, and the
// generations ended at or before atRev. What it keeps at or below atRev is
// added to available. A key left with its creating put alone goes back to
// holding it in modified alone.
func (ki *keyIndex) compact(atRev int64, available map[Revision]struct{}) {
	if ki.hist == nil {
		if ki.modified.Main <= atRev {
			available[ki.modified] = struct{}{}
		}
		return
	}
	ki.compactGenerations(atRev, available)
	if gens := ki.hist.generations; len(gens) == 1 {
		if g := &gens[0]; len(g.revs) == 1 && g.ver == 1 && g.created.Main == g.revs[0].Main {
			ki.hist = nil
		}
	}
}

// compactGenerations is compact of a key's list of generations.
func (ki *keyIndex) compactGenerations(atRev int64, available map[Revision]struct{}) {
	genIdx, revIdx := ki.doCompact(atRev, available)
	h := ki.hist
	g := &h.generations[genIdx]
	if mutated(RuleCompactKeepsNewest) && revIdx != -1 && revIdx+1 < len(g.revs) {
		delete(available, g.revs[revIdx]) // the newest at or below atRev goes too
		revIdx++
	}
	if !g.isEmpty() && revIdx > 0 {
		g.revs = dropFront(g.revs, revIdx)
	}
	if genIdx > 0 {
		h.generations = dropFront(h.generations, genIdx)
	}
}

// dropFront returns s[i:], copied to a slice of its length if that is at
// most half of s's capacity: a compaction that drops most of a history
// frees its memory, and one that drops little copies nothing.
func dropFront[S ~[]E, E any](s S, i int) S {
	if len(s)-i <= cap(s)/2 {
		return slices.Clone(s[i:])
	}
	return s[i:]
}

// keep adds to available what compact at atRev would keep at or below it,
// without changing the index; a tombstone that ends its generation is left
// out, as etcd's hash leaves it out.
func (ki *keyIndex) keep(atRev int64, available map[Revision]struct{}) {
	if ki.hist == nil {
		if ki.modified.Main <= atRev {
			available[ki.modified] = struct{}{}
		}
		return
	}
	if ki.isEmpty() {
		return
	}
	genIdx, revIdx := ki.doCompact(atRev, available)
	gens := ki.hist.generations
	g := &gens[genIdx]
	if !g.isEmpty() && revIdx == len(g.revs)-1 && genIdx != len(gens)-1 {
		delete(available, g.revs[revIdx])
	}
}

func (ki *keyIndex) String() string {
	s := fmt.Sprintf("%q:", ki.key)
	if ki.hist == nil {
		return s + fmt.Sprintf(" {created %d.%d ver 1 revs [%v]}", ki.modified.Main, ki.modified.Sub, ki.modified)
	}
	for _, g := range ki.hist.generations {
		s += fmt.Sprintf(" {created %d.%d ver %d revs %v}", g.created.Main, g.created.Sub, g.ver, g.revs)
	}
	return s
}
