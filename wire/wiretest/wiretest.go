// Package wiretest builds values of package wire for tests: stamps,
// appends, lease messages, one valid message of every kind and invalid ones
// that each break one rule. The tests of wire's message rules and of
// transport, which encodes and carries the messages, share it.
package wiretest

import (
	"bytes"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// QT returns a well-formed QT over processes 1..n read at base.
func QT(n int, base int64) edict.QT {
	rs := make([]edict.Reading, n)
	for i := range rs {
		rs[i] = edict.Reading{Process: edict.ProcessID(i + 1), T: edict.Time{Incarnation: 1, Nanos: base + int64(i)}}
	}
	qt, err := edict.NewQT(rs...)
	if err != nil {
		panic(err)
	}
	return qt
}

// Stamp returns a stamp of epoch whose QT is QT(3, base).
func Stamp(epoch uint64, base int64, counter uint64) edict.Stamp {
	return edict.Stamp{Epoch: epoch, QT: QT(3, base), Counter: counter}
}

// Append returns an Append of n entries of size bytes each.
func Append(prev uint64, n, size int) *wire.Append {
	reign := Stamp(1, 1000, 0)
	a := &wire.Append{Epoch: 1, Reign: reign, LeaderCommit: prev, PrevIndex: prev, PrevStamp: Stamp(1, 1000, prev)}
	for i := range n {
		data := bytes.Repeat([]byte{byte(i)}, size)
		a.Entries = append(a.Entries, wire.Entry{Index: prev + 1 + uint64(i), Reign: reign, Stamp: Stamp(1, 2000, prev+1+uint64(i)), Kind: 1, Data: data})
	}
	return a
}

// Lease returns a valid grant request from → to.
func Lease(from, to edict.ProcessID) wire.Lease {
	return wire.Lease{Type: wire.LeaseGrantRequest, From: from, To: to, Epoch: 1,
		Start: edict.Time{Incarnation: 2, Nanos: 12345}, Delta: 3 * time.Second}
}

// Messages returns one valid message of every kind, from 1 to 2.
func Messages() []wire.Message {
	reign := Stamp(1, 1000, 0)
	grant := wire.Lease{Type: wire.LeaseGrant, From: 1, To: 2, Epoch: 1, Start: edict.Time{Incarnation: 2, Nanos: 12345},
		T: edict.Time{Incarnation: 1, Nanos: 999}, LastIndex: 41, LastStamp: Stamp(1, 700, 41),
		Newest: 2, NewestMembers: []edict.ProcessID{1, 2, 4}, NewestRan: true, NewestStopIndex: 11, NewestStopStamp: Stamp(1, 900, 11)}
	return []wire.Message{
		wire.LeaseMessage(Lease(1, 2)),
		wire.LeaseMessage(grant),
		{From: 1, To: 2, Append: Append(7, 3, 16)},
		{From: 1, To: 2, Append: &wire.Append{Epoch: 1, Reign: reign}},
		{From: 1, To: 2, AppendReply: &wire.AppendReply{Epoch: 1, Reign: reign, Accepted: Stamp(1, 1200, 0), Success: true, LastIndex: 10}},
		{From: 1, To: 2, AppendReply: &wire.AppendReply{Epoch: 1, Reign: reign, LastIndex: 10, HintIndex: 4, HintStamp: Stamp(1, 500, 4)}},
		{From: 1, To: 2, ReadIndex: &wire.ReadIndexRequest{Epoch: 1, ID: 99, Sent: edict.Time{Incarnation: 3, Nanos: 777}}},
		{From: 1, To: 2, ReadIndexReply: &wire.ReadIndexReply{Epoch: 1, ID: 99, Sent: edict.Time{Incarnation: 3, Nanos: 777}, Reign: reign, OK: true, Index: 42}},
		{From: 1, To: 2, ReadIndexReply: &wire.ReadIndexReply{Epoch: 1, ID: 99, Leader: 3}},
		{From: 1, To: 2, TimeoutNow: &wire.TimeoutNow{Epoch: 1, Reign: reign}},
		{From: 1, To: 2, Fetch: &wire.Fetch{Epoch: 1, ID: 5, Attempt: edict.Time{Incarnation: 2, Nanos: 4242}, PrevIndex: 9, PrevStamp: Stamp(1, 600, 9), Max: 64}},
		{From: 1, To: 2, FetchReply: &wire.FetchReply{Epoch: 1, ID: 5, Attempt: edict.Time{Incarnation: 2, Nanos: 4242}, LastIndex: 12, LastStamp: Stamp(1, 600, 12), OK: true, Entries: Append(9, 3, 20).Entries}},
		{From: 1, To: 2, FetchReply: &wire.FetchReply{Epoch: 1, ID: 6, LastIndex: 12, LastStamp: Stamp(1, 600, 12), Compacted: true}},
		{From: 1, To: 2, Fetch: &wire.Fetch{Epoch: 2, ID: 7, PrevIndex: 9, PrevStamp: Stamp(1, 600, 9), Max: 64, Committed: true, UpToIndex: 11, UpToStamp: Stamp(1, 900, 11)}},
		{From: 1, To: 2, FetchReply: &wire.FetchReply{Epoch: 2, ID: 7, LastIndex: 12, LastStamp: Stamp(1, 600, 12), OK: true, Entries: Append(9, 2, 20).Entries, Committed: true, Commit: 11}},
	}
}

// Invalid is a message that breaks one structural rule, with a fragment of
// the error Message.Validate gives for it.
type Invalid struct {
	M    wire.Message
	Want string
}

// InvalidMessages returns one message per structural rule of
// Message.Validate, each breaking it: wire's tests check Validate's
// reasons, transport's that the encoder refuses them all.
func InvalidMessages() []Invalid {
	reign := Stamp(1, 1000, 0)
	badQT := edict.Stamp{Epoch: 1, QT: edict.QT{{Process: 2}, {Process: 1}}, Counter: 1}
	gap := Append(5, 3, 1)
	gap.Entries[1].Index = 9
	badKind := Append(5, 2, 1)
	badKind.Entries[1].Kind = 0
	lease := Lease(1, 2)
	lease.Delta = 0
	return []Invalid{
		{wire.Message{From: 1, To: 2}, "exactly one payload"},
		{wire.Message{From: 1, To: 2, ReadIndex: &wire.ReadIndexRequest{ID: 1}, TimeoutNow: &wire.TimeoutNow{Reign: reign}}, "exactly one payload"},
		{wire.Message{To: 2, ReadIndex: &wire.ReadIndexRequest{ID: 1}}, "without a sender"},
		{wire.Message{From: 1, ReadIndex: &wire.ReadIndexRequest{ID: 1}}, "without a receiver"},
		{wire.Message{From: 1, To: 2, ReadIndex: &wire.ReadIndexRequest{}}, "without an id"},
		{wire.Message{From: 1, To: 2, Append: &wire.Append{}}, "without a reign"},
		{wire.Message{From: 1, To: 2, Append: gap}, "contiguously"},
		{wire.Message{From: 1, To: 2, Append: badKind}, "unknown kind"},
		{wire.Message{From: 1, To: 2, Append: &wire.Append{Reign: badQT}}, "not sorted"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Reign: reign, Success: true, HintIndex: 3}}, "rejection hint"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Reign: reign, LastIndex: 3, HintIndex: 3}}, "not below"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Success: true, LastIndex: 3}}, "without the reign it answers"},
		{wire.Message{From: 1, To: 2, AppendReply: &wire.AppendReply{Reign: reign, Accepted: badQT}}, "not sorted"},
		{wire.Message{From: 1, To: 2, TimeoutNow: &wire.TimeoutNow{}}, "without a reign"},
		{wire.Message{From: 1, To: 2, Lease: &lease}, "δ = 0"},
		{wire.Message{From: 3, To: 2, Lease: &wire.Lease{Type: wire.LeaseRelease, From: 1, To: 2}}, "envelope"},
		{wire.Message{From: 1, To: 2, Fetch: &wire.Fetch{}}, "without an id"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, Entries: Append(0, 1, 1).Entries}}, "without OK"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, OK: true, Entries: gap.Entries}}, "contiguous"},
		{wire.Message{From: 1, To: 2, Fetch: &wire.Fetch{ID: 1, UpToIndex: 4, UpToStamp: reign}}, "not a committed fetch"},
		{wire.Message{From: 1, To: 2, Fetch: &wire.Fetch{ID: 1, Committed: true, UpToIndex: 4}}, "both or neither"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, Commit: 4}}, "answers no committed fetch"},
		{wire.Message{From: 1, To: 2, FetchReply: &wire.FetchReply{ID: 1, OK: true, Committed: true, Commit: 1, Entries: Append(0, 2, 1).Entries}}, "beyond its commit index"},
	}
}
