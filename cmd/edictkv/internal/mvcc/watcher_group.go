package mvcc

import (
	"bytes"
	"slices"
)

// watcherGroup finds, among many watchers, those of one key: watchers of a
// key alone in a map, watchers of a range in an interval treap, so that
// matching a change costs a map lookup and O(log n + matches) in the
// treap, whatever the number of watchers (etcd keeps an interval tree
// likewise). Watchers on the same range share a node. Matches come in a
// deterministic order: the key's watchers, then the ranges in interval
// order, each list in the order its watchers joined.
type watcherGroup struct {
	keys   map[string][]*watcher
	ranges *ivNode
	size   int
}

func (g *watcherGroup) add(w *watcher) {
	g.size++
	if w.end == nil {
		if g.keys == nil {
			g.keys = make(map[string][]*watcher)
		}
		g.keys[string(w.key)] = append(g.keys[string(w.key)], w)
		return
	}
	g.ranges = ivInsert(g.ranges, w, treapPriority(w.seq))
}

// remove takes w out of the group, if it is in it.
func (g *watcherGroup) remove(w *watcher) bool {
	if w.end == nil {
		ws := g.keys[string(w.key)]
		i := slices.Index(ws, w)
		if i < 0 {
			return false
		}
		if len(ws) == 1 {
			delete(g.keys, string(w.key))
		} else {
			g.keys[string(w.key)] = slices.Delete(ws, i, i+1)
		}
		g.size--
		return true
	}
	var ok bool
	g.ranges, ok = ivRemove(g.ranges, w)
	if ok {
		g.size--
	}
	return ok
}

// appendMatches appends to out the watchers whose keys hold key.
func (g *watcherGroup) appendMatches(out []*watcher, key []byte) []*watcher {
	out = append(out, g.keys[string(key)]...)
	return g.ranges.stab(out, key)
}

// appendAll appends every watcher of the group to out, in no particular
// order.
func (g *watcherGroup) appendAll(out []*watcher) []*watcher {
	for _, ws := range g.keys {
		out = append(out, ws...)
	}
	return g.ranges.appendAll(out)
}

// ivNode is a node of the interval treap: the watchers of one range
// [lo, hi) (hi empty: every key from lo on), ordered by lo then hi, a heap
// by prio, each node knowing the highest hi below it so that a stab skips
// the subtrees that end before the key.
type ivNode struct {
	lo, hi      []byte
	maxHi       []byte // the highest hi in the subtree; empty: unbounded
	prio        uint64
	left, right *ivNode
	ws          []*watcher
}

// cmpHi orders range ends, the empty (unbounded) one last.
func cmpHi(a, b []byte) int {
	switch {
	case len(a) == 0 && len(b) == 0:
		return 0
	case len(a) == 0:
		return 1
	case len(b) == 0:
		return -1
	}
	return bytes.Compare(a, b)
}

func cmpInterval(lo, hi []byte, n *ivNode) int {
	if c := bytes.Compare(lo, n.lo); c != 0 {
		return c
	}
	return cmpHi(hi, n.hi)
}

// treapPriority spreads watcher sequence numbers (splitmix64), so that the
// treap is balanced in expectation and still the same on every run.
func treapPriority(seq uint64) uint64 {
	z := seq + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (n *ivNode) fix() {
	n.maxHi = n.hi
	for _, c := range [2]*ivNode{n.left, n.right} {
		if c != nil && cmpHi(c.maxHi, n.maxHi) > 0 {
			n.maxHi = c.maxHi
		}
	}
}

func rotateRight(n *ivNode) *ivNode {
	l := n.left
	n.left = l.right
	n.fix()
	l.right = n
	l.fix()
	return l
}

func rotateLeft(n *ivNode) *ivNode {
	r := n.right
	n.right = r.left
	n.fix()
	r.left = n
	r.fix()
	return r
}

func ivInsert(n *ivNode, w *watcher, prio uint64) *ivNode {
	if n == nil {
		return &ivNode{lo: w.key, hi: w.end, maxHi: w.end, prio: prio, ws: []*watcher{w}}
	}
	switch c := cmpInterval(w.key, w.end, n); {
	case c == 0:
		n.ws = append(n.ws, w)
		return n
	case c < 0:
		n.left = ivInsert(n.left, w, prio)
		if n.left.prio > n.prio {
			return rotateRight(n)
		}
	default:
		n.right = ivInsert(n.right, w, prio)
		if n.right.prio > n.prio {
			return rotateLeft(n)
		}
	}
	n.fix()
	return n
}

func ivRemove(n *ivNode, w *watcher) (*ivNode, bool) {
	if n == nil {
		return nil, false
	}
	var ok bool
	switch c := cmpInterval(w.key, w.end, n); {
	case c < 0:
		n.left, ok = ivRemove(n.left, w)
	case c > 0:
		n.right, ok = ivRemove(n.right, w)
	default:
		i := slices.Index(n.ws, w)
		if i < 0 {
			return n, false
		}
		n.ws = slices.Delete(n.ws, i, i+1)
		if len(n.ws) > 0 {
			return n, true
		}
		return ivMerge(n.left, n.right), true
	}
	n.fix()
	return n, ok
}

// ivMerge joins two treaps, every interval of a before every one of b.
func ivMerge(a, b *ivNode) *ivNode {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.right = ivMerge(a.right, b)
		a.fix()
		return a
	default:
		b.left = ivMerge(a, b.left)
		b.fix()
		return b
	}
}

// stab appends to out the watchers of every range that holds key.
func (n *ivNode) stab(out []*watcher, key []byte) []*watcher {
	for n != nil {
		if len(n.maxHi) > 0 && bytes.Compare(n.maxHi, key) <= 0 {
			return out
		}
		out = n.left.stab(out, key)
		if bytes.Compare(n.lo, key) > 0 {
			return out
		}
		if len(n.hi) == 0 || bytes.Compare(key, n.hi) < 0 {
			out = append(out, n.ws...)
		}
		n = n.right
	}
	return out
}

func (n *ivNode) appendAll(out []*watcher) []*watcher {
	if n == nil {
		return out
	}
	out = n.left.appendAll(out)
	out = append(out, n.ws...)
	return n.right.appendAll(out)
}
