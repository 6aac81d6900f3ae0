package mvcc

import (
	"errors"
	"fmt"
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
type keyIndex struct {
	key         []byte
	modified    Revision
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

func (ki *keyIndex) isEmpty() bool {
	return len(ki.generations) == 1 && ki.generations[0].isEmpty()
}

// put appends rev to the current generation, starting it if it is empty.
func (ki *keyIndex) put(rev Revision) error {
	if !rev.GreaterThan(ki.modified) {
		return fmt.Errorf("key %q: revision %d.%d is not after its last one %d.%d", ki.key, rev.Main, rev.Sub, ki.modified.Main, ki.modified.Sub)
	}
	if len(ki.generations) == 0 {
		ki.generations = append(ki.generations, generation{})
	}
	g := &ki.generations[len(ki.generations)-1]
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
	if len(ki.generations) == 0 || ki.generations[len(ki.generations)-1].isEmpty() {
		return fmt.Errorf("key %q: deleted at revision %d.%d while it does not exist", ki.key, rev.Main, rev.Sub)
	}
	if err := ki.put(rev); err != nil {
		return err
	}
	ki.generations = append(ki.generations, generation{})
	return nil
}

// restore starts the index of a key whose older revisions are compacted
// away: its oldest remaining revision is modified, of a generation created
// at created, with version ver.
func (ki *keyIndex) restore(created, modified Revision, ver int64) {
	ki.modified = modified
	ki.generations = append(ki.generations, generation{created: created, ver: ver, revs: []Revision{modified}})
}

// restoreTombstone starts the index of a key whose oldest remaining
// revision is a tombstone; its generation's creation is compacted away.
func (ki *keyIndex) restoreTombstone(rev Revision) {
	ki.restore(Revision{}, rev, 1)
	ki.generations = append(ki.generations, generation{})
}

// get returns the key's revision, creation and version at atRev, or
// errRevisionNotFound when it does not exist then.
func (ki *keyIndex) get(atRev int64) (modified, created Revision, ver int64, err error) {
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
// tombstone and the next put).
func (ki *keyIndex) findGeneration(rev int64) *generation {
	last := len(ki.generations) - 1
	for cg := last; cg >= 0; cg-- {
		g := &ki.generations[cg]
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
	for genIdx < len(ki.generations)-1 {
		g := &ki.generations[genIdx]
		tomb := g.revs[len(g.revs)-1].Main
		if tomb > atRev {
			break
		}
		if next := &ki.generations[genIdx+1]; tomb == atRev && (next.isEmpty() || next.revs[0].Main > atRev) {
			break
		}
		genIdx++
	}
	g := &ki.generations[genIdx]
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
// added to available.
func (ki *keyIndex) compact(atRev int64, available map[Revision]struct{}) {
	genIdx, revIdx := ki.doCompact(atRev, available)
	g := &ki.generations[genIdx]
	if mutated(RuleCompactKeepsNewest) && revIdx != -1 && revIdx+1 < len(g.revs) {
		delete(available, g.revs[revIdx]) // the newest at or below atRev goes too
		revIdx++
	}
	if !g.isEmpty() && revIdx != -1 {
		g.revs = g.revs[revIdx:]
	}
	ki.generations = ki.generations[genIdx:]
}

// keep adds to available what compact at atRev would keep at or below it,
// without changing the index; a tombstone that ends its generation is left
// out, as etcd's hash leaves it out.
func (ki *keyIndex) keep(atRev int64, available map[Revision]struct{}) {
	if ki.isEmpty() {
		return
	}
	genIdx, revIdx := ki.doCompact(atRev, available)
	g := &ki.generations[genIdx]
	if !g.isEmpty() && revIdx == len(g.revs)-1 && genIdx != len(ki.generations)-1 {
		delete(available, g.revs[revIdx])
	}
}

func (ki *keyIndex) String() string {
	s := fmt.Sprintf("%q:", ki.key)
	for _, g := range ki.generations {
		s += fmt.Sprintf(" {created %d.%d ver %d revs %v}", g.created.Main, g.created.Sub, g.ver, g.revs)
	}
	return s
}
