package transport

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
)

// testQT returns a well-formed QT over processes 1..n read at base.
func testQT(n int, base int64) edict.QT {
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

func testStamp(epoch uint64, base int64, counter uint64) edict.Stamp {
	return edict.Stamp{Epoch: epoch, QT: testQT(3, base), Counter: counter}
}

// testAppend returns an Append of n entries of size bytes each.
func testAppend(prev uint64, n, size int) *Append {
	reign := testStamp(1, 1000, 0)
	a := &Append{Epoch: 1, Reign: reign, LeaderCommit: prev, PrevIndex: prev, PrevStamp: testStamp(1, 1000, prev)}
	for i := range n {
		data := bytes.Repeat([]byte{byte(i)}, size)
		a.Entries = append(a.Entries, Entry{Index: prev + 1 + uint64(i), Reign: reign, Stamp: testStamp(1, 2000, prev+1+uint64(i)), Kind: 1, Data: data})
	}
	return a
}

func testLease(from, to edict.ProcessID) elect.Message {
	return elect.Message{Type: elect.MsgGrantRequest, From: from, To: to, Epoch: 1,
		Start: edict.Time{Incarnation: 2, Nanos: 12345}, Delta: 3 * time.Second}
}

// sampleMessages returns one valid message of every kind, from 1 to 2.
func sampleMessages() []Message {
	reign := testStamp(1, 1000, 0)
	grant := elect.Message{Type: elect.MsgGrant, From: 1, To: 2, Epoch: 1, Start: edict.Time{Incarnation: 2, Nanos: 12345},
		T: edict.Time{Incarnation: 1, Nanos: 999}, LastIndex: 41, LastStamp: testStamp(1, 700, 41),
		Newest: 2, NewestMembers: []edict.ProcessID{1, 2, 4}, NewestRan: true, NewestStopIndex: 11, NewestStopStamp: testStamp(1, 900, 11)}
	return []Message{
		LeaseMessage(testLease(1, 2)),
		LeaseMessage(grant),
		{From: 1, To: 2, Append: testAppend(7, 3, 16)},
		{From: 1, To: 2, Append: &Append{Epoch: 1, Reign: reign}},
		{From: 1, To: 2, AppendReply: &AppendReply{Epoch: 1, Reign: reign, Accepted: testStamp(1, 1200, 0), Success: true, LastIndex: 10}},
		{From: 1, To: 2, AppendReply: &AppendReply{Epoch: 1, Reign: reign, LastIndex: 10, HintIndex: 4, HintStamp: testStamp(1, 500, 4)}},
		{From: 1, To: 2, ReadIndex: &ReadIndexRequest{Epoch: 1, ID: 99, Sent: edict.Time{Incarnation: 3, Nanos: 777}}},
		{From: 1, To: 2, ReadIndexReply: &ReadIndexReply{Epoch: 1, ID: 99, Sent: edict.Time{Incarnation: 3, Nanos: 777}, Reign: reign, OK: true, Index: 42}},
		{From: 1, To: 2, ReadIndexReply: &ReadIndexReply{Epoch: 1, ID: 99, Leader: 3}},
		{From: 1, To: 2, TimeoutNow: &TimeoutNow{Epoch: 1, Reign: reign}},
		{From: 1, To: 2, Fetch: &Fetch{Epoch: 1, ID: 5, Attempt: edict.Time{Incarnation: 2, Nanos: 4242}, PrevIndex: 9, PrevStamp: testStamp(1, 600, 9), Max: 64}},
		{From: 1, To: 2, FetchReply: &FetchReply{Epoch: 1, ID: 5, Attempt: edict.Time{Incarnation: 2, Nanos: 4242}, LastIndex: 12, LastStamp: testStamp(1, 600, 12), OK: true, Entries: testAppend(9, 3, 20).Entries}},
		{From: 1, To: 2, FetchReply: &FetchReply{Epoch: 1, ID: 6, LastIndex: 12, LastStamp: testStamp(1, 600, 12), Compacted: true}},
		{From: 1, To: 2, Fetch: &Fetch{Epoch: 2, ID: 7, PrevIndex: 9, PrevStamp: testStamp(1, 600, 9), Max: 64, Committed: true, UpToIndex: 11, UpToStamp: testStamp(1, 900, 11)}},
		{From: 1, To: 2, FetchReply: &FetchReply{Epoch: 2, ID: 7, LastIndex: 12, LastStamp: testStamp(1, 600, 12), OK: true, Entries: testAppend(9, 2, 20).Entries, Committed: true, Commit: 11}},
	}
}

// logBuffer collects slog output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitLog waits until the log holds every one of parts on one line.
func (l *logBuffer) waitLog(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(l.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no log line contains all of %q; log:\n%s", parts, l.String())
	return ""
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
