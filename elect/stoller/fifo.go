package stoller

import (
	"maps"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
)

// fifo restores the FIFO links §4 assumes ("Communication is FIFO"):
// the simulator, like a datagram network, reorders messages, and without
// FIFO a leader's first Norm? can overtake its Ldr, draw a NotNorm and
// restart the election for nothing. Each message carries a per-link sequence
// number (Message.Link, from 1 per incarnation); the receiver delivers in
// order, holding a message that arrives early until the ones before it
// arrive or Hold passes. A message missing after Hold is taken as lost
// (possible only in asynchronous runs: in a synchronous system it arrives
// within δ, so Hold = δ never gives up on one) and one arriving after its
// successors were delivered is dropped, so delivery stays in order. A
// sender numbers its links per its own incarnation, not the receiver's,
// so a restarted receiver waits Hold on the first message of each link;
// the FDs' timeouts allow for that.
type fifo struct {
	hold  time.Duration
	next  map[edict.ProcessID]uint64 // per destination: last Link sent
	links map[edict.ProcessID]*inLink
}

type inLink struct {
	inc      uint64
	expected uint64
	held     map[uint64]heldMsg
}

type heldMsg struct {
	m     Message
	until edict.Time
}

func newFIFO(hold time.Duration) fifo {
	return fifo{hold: hold, next: map[edict.ProcessID]uint64{}, links: map[edict.ProcessID]*inLink{}}
}

func (f *fifo) stamp(to edict.ProcessID, m *Message) {
	f.next[to]++
	m.Link = f.next[to]
}

// arrive takes a message from `from` and returns those now deliverable,
// in order.
func (f *fifo) arrive(now edict.Time, from edict.ProcessID, m Message) []Message {
	l := f.links[from]
	if l == nil || m.Inc > l.inc {
		l = &inLink{inc: m.Inc, expected: 1, held: map[uint64]heldMsg{}}
		f.links[from] = l
	}
	if m.Inc < l.inc || m.Link < l.expected {
		return nil // an earlier incarnation's, or overtaken: lost
	}
	if _, dup := l.held[m.Link]; dup {
		return nil
	}
	l.held[m.Link] = heldMsg{m: m, until: now.Add(f.hold)}
	return l.drain()
}

func (l *inLink) drain() []Message {
	var out []Message
	for {
		h, ok := l.held[l.expected]
		if !ok {
			return out
		}
		delete(l.held, l.expected)
		l.expected++
		out = append(out, h.m)
	}
}

// expire gives up on the gaps whose held successors waited Hold, and
// returns what that releases, per sender in id order.
func (f *fifo) expire(now edict.Time) (from []edict.ProcessID, msgs [][]Message) {
	for _, id := range slices.Sorted(maps.Keys(f.links)) {
		l := f.links[id]
		for len(l.held) > 0 {
			// Some held message waited Hold: the gaps before the
			// first held one are lost.
			first, due := uint64(0), false
			for s, h := range l.held {
				if first == 0 || s < first {
					first = s
				}
				due = due || !now.Before(h.until)
			}
			if !due {
				break
			}
			l.expected = first
			from = append(from, id)
			msgs = append(msgs, l.drain())
		}
	}
	return from, msgs
}

// nextTick is the earliest Hold deadline.
func (f *fifo) nextTick() edict.Time {
	var next edict.Time
	for _, l := range f.links {
		for _, h := range l.held {
			next = minTime(next, h.until)
		}
	}
	return next
}
