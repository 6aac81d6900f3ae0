// Package history records what a Jepsen-style test did: every client
// operation's invocation and completion, and every fault the nemesis
// injected, in one ordered list written as JSON lines as it happens.
//
// The completion of an operation says what is known of it: OK (it took
// effect, with the value it returned), Fail (it certainly did not), or Info
// (unknown: it may have taken effect at any time after its invocation, or
// never). The checkers rely on that distinction: treating an Info as a Fail
// would make a correct system look broken, and treating a Fail as an Info
// would hide lost writes.
package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Type is what an event is.
type Type string

// The event types.
const (
	Invoke Type = "invoke" // an operation begins
	OK     Type = "ok"     // it took effect
	Fail   Type = "fail"   // it certainly did not take effect
	Info   Type = "info"   // unknown outcome; for the nemesis: a fault began or ended
)

// NemesisProcess is the Process of the nemesis's events.
const NemesisProcess = -1

// MonitorProcess is the Process of what the harness observed of the
// cluster itself rather than did to it or through it: which node led, as
// polled throughout the test (FLeader), and each node's readiness after
// the final heal (FReady). Its events are neither client operations nor
// faults; and processes that could not start or exited on their own
// (FNotStarted, FCrashed). (Process -2 is the final reads'.)
const MonitorProcess = -3

// WatchProcess is the Process of every watcher's records (the FWatch*
// functions; Op.Watch names the watcher): what a watch stream delivered,
// not operations with an invocation and a completion.
const WatchProcess = -4

// Client reports whether op is a client operation's invocation or
// completion: not the nemesis's, not the monitor's, not a watcher's.
func (op Op) Client() bool {
	return op.Process != NemesisProcess && op.Process != MonitorProcess && op.Process != WatchProcess
}

// The operations' functions (F).
const (
	FRead      = "read"       // register: read Key; Value is what was read (nil: missing)
	FWrite     = "write"      // register: write Value to Key
	FCAS       = "cas"        // register: set Key to Value if it is Prev
	FAdd       = "add"        // set: add Value
	FDelete    = "delete"     // watch: delete Key (Revision: the deletion's, when OK)
	FFinalRead = "final-read" // set or register: what one node holds at the end (Values, or Value)
	FStart     = "start"      // nemesis: fault Nemesis began (Detail says what)
	FStop      = "stop"       // nemesis: fault Nemesis ended
	FEvent     = "event"      // nemesis: one step of fault Nemesis, while it is in force (Detail says what)
	FHeal      = "heal"       // nemesis: the final heal, after the last fault, undid everything still in force
	FLeader    = "leader"     // monitor: from now on Node leads (0: no node leads; Error says why)
	FReady     = "ready"      // monitor: after the final heal, Node is ready (OK) or never was (Fail; Error says why)
	// FNotStarted and FCrashed are the monitor's records of a process
	// that failed, always Fail: Node's process could not start (it exited
	// before it ever answered, or ran without answering within the start's
	// limit), or exited on its own after it had answered. The harness
	// kills processes only with SIGKILL of its own; any other exit is the
	// product's. Error says how, and what the process's log said last.
	FNotStarted = "not-started"
	FCrashed    = "crashed"
	// The records of a watcher (WatchProcess, Type Info), in the order its
	// streams delivered them. FWatchOpen: it (re)connects to Node to be
	// sent every change of its keys from Revision on (Detail says why);
	// FWatchEvent: a change (Key, Value, nil for a delete, Revision its
	// mod_revision, Watch its type, create_revision and version);
	// FWatchProgress: Node says every change up to Revision was sent;
	// FWatchEnd: the stream ended (Error says why; Watch.CompactRevision
	// when a compaction cancelled it).
	FWatchOpen     = "watch-open"
	FWatchEvent    = "watch-event"
	FWatchProgress = "watch-progress"
	FWatchEnd      = "watch-end"
)

// WatchMalformed starts the Error of a FWatchEnd whose stream sent what
// is not a watch line: the server's fault, which the checker reports.
const WatchMalformed = "a malformed watch line"

// Op is one event.
type Op struct {
	Index int `json:"index"`
	// Time is when the event was recorded, in nanoseconds since the test
	// began.
	Time int64 `json:"time"`
	// Process is the client that ran the operation (one operation in
	// flight per client), or NemesisProcess.
	Process int    `json:"process"`
	Type    Type   `json:"type"`
	F       string `json:"f"`
	Key     string `json:"key,omitempty"`
	// Value: written, or read (nil on a read of a missing key).
	Value *int64 `json:"value,omitempty"`
	// Prev: the value a CAS expects.
	Prev *int64 `json:"prev,omitempty"`
	// Values: a set's final read.
	Values []int64 `json:"values,omitempty"`
	// Level is the read level asked for (lease, follower, stale).
	Level string `json:"level,omitempty"`
	// Node is the process id of the edictkv node the client asked.
	Node int `json:"node,omitempty"`
	// Error says why an operation failed or has an unknown outcome.
	Error string `json:"error,omitempty"`
	// Nemesis names a fault (partition, kill, pause, clock, membership or
	// member-*, transfer, delay, bounce, snapshot-install; heal for the
	// final heal); Detail describes it.
	Nemesis string `json:"nemesis,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Began is, on a fault's start (FStart), when the nemesis began to
	// inject it (ns since the test began); Time is when it was in force.
	// Injecting can take a while (killing every node, rules in every
	// namespace), and the fault acts from the first step. Zero: at Time.
	Began int64 `json:"began,omitempty"`
	// Revision is a revision of edictkv's state: the one an acknowledged
	// write made (its answer's index), a final read's key's mod_revision,
	// or a watch record's (see FWatchOpen).
	Revision int64 `json:"revision,omitempty"`
	// Watch details a watch record, or a final read's revision.
	Watch *WatchInfo `json:"watch,omitempty"`
}

// WatchInfo is what a watch record says beyond Op's fields.
type WatchInfo struct {
	// Watcher is the watcher's id (from 1); Replay marks the final
	// replays of the whole history after the last fault was healed.
	Watcher int  `json:"watcher"`
	Replay  bool `json:"replay,omitempty"`
	// API is how it watches: grpc (etcd's Watch) or http (GET /v1/watch).
	API string `json:"api,omitempty"`
	// Key is what it watches: Key alone, or every key that starts with it
	// if Prefix.
	Key    string `json:"key,omitempty"`
	Prefix bool   `json:"prefix,omitempty"`
	// Event is an event's type (put or delete), CreateRevision and
	// Version the key's as the event left it (0 after a delete).
	Event          string `json:"event,omitempty"`
	CreateRevision int64  `json:"create_revision,omitempty"`
	Version        int64  `json:"version,omitempty"`
	// CompactRevision: a compaction ended the stream; the oldest revision
	// kept.
	CompactRevision int64 `json:"compact_revision,omitempty"`
	// Header is a final read's revision (the state's when it was read).
	Header int64 `json:"header,omitempty"`
}

// Int returns a pointer to v, for Op.Value and Op.Prev.
func Int(v int64) *int64 { return &v }

// Recorder collects a history. It is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []Op
	w     *bufio.Writer
	err   error
}

// NewRecorder starts a history now; each event is also written to w as a
// JSON line, if w is not nil.
func NewRecorder(w io.Writer) *Recorder {
	r := &Recorder{start: time.Now()}
	if w != nil {
		r.w = bufio.NewWriter(w)
	}
	return r
}

// Start is when the history began.
func (r *Recorder) Start() time.Time { return r.start }

// Now is the time an event added now would get (ns since the start).
func (r *Recorder) Now() int64 { return time.Since(r.start).Nanoseconds() }

// Add records op, setting its Index and Time, and returns it.
func (r *Recorder) Add(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Index = len(r.ops)
	op.Time = time.Since(r.start).Nanoseconds()
	r.ops = append(r.ops, op)
	if r.w != nil && r.err == nil {
		b, err := json.Marshal(op)
		if err == nil {
			b = append(b, '\n')
			_, err = r.w.Write(b)
		}
		r.err = err
	}
	return op
}

// Ops returns a copy of the events so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Flush writes buffered lines out and reports the first write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil && r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Read parses a history written by a Recorder.
func Read(rd io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	for {
		var op Op
		err := dec.Decode(&op)
		if errors.Is(err, io.EOF) {
			return ops, nil
		}
		if err != nil {
			return nil, fmt.Errorf("history: event %d: %w", len(ops), err)
		}
		if op.Index != len(ops) {
			return nil, fmt.Errorf("history: event %d has index %d", len(ops), op.Index)
		}
		ops = append(ops, op)
	}
}

// Interval is one fault's span.
type Interval struct {
	Nemesis string `json:"nemesis"`
	Detail  string `json:"detail"`
	// Start and End are ns since the test began: Start when the nemesis
	// began to inject it (Op.Began, or the start's Time), End the history's
	// end if the fault never stopped.
	Start int64 `json:"start_ns"`
	End   int64 `json:"end_ns"`
}

// Intervals pairs the nemesis's start and stop events, in order of start.
func Intervals(ops []Op) []Interval {
	var out []Interval
	open := map[string][]int{} // nemesis → indexes into out
	var end int64
	for _, op := range ops {
		end = max(end, op.Time)
		if op.Process != NemesisProcess {
			continue
		}
		switch op.F {
		case FStart:
			open[op.Nemesis] = append(open[op.Nemesis], len(out))
			start := op.Time
			if op.Began > 0 {
				start = min(op.Began, op.Time)
			}
			out = append(out, Interval{Nemesis: op.Nemesis, Detail: op.Detail, Start: start, End: -1})
		case FStop:
			if q := open[op.Nemesis]; len(q) > 0 {
				out[q[0]].End = op.Time
				open[op.Nemesis] = q[1:]
			}
		}
	}
	for i := range out {
		if out[i].End < 0 {
			out[i].End = end
		}
	}
	return out
}

// Gap is a span of the test in which no node led, as far as the history
// shows.
type Gap struct {
	// Start and End are ns since the test began.
	Start, End int64
	// Open: the history ended within the gap (End is the history's end).
	Open bool
	// Why is the monitor's reason at the gap's start.
	Why string
}

// LeaderEvidence reports whether op proves that some node led when it was
// recorded: a client's write, compare-and-set or add that completed OK,
// or a read at the lease or follower level that completed OK (only a
// leader, or a follower that asked the leader, answers those). Stale
// reads and a set's final reads prove nothing.
func LeaderEvidence(op Op) bool {
	if !op.Client() || op.Type != OK {
		return false
	}
	switch op.F {
	case FWrite, FCAS, FAdd, FDelete:
		return true
	case FRead:
		return op.Level == "lease" || op.Level == "follower"
	}
	return false
}

// Leaderless returns the spans in which no node led. The monitor's FLeader
// events say who led when it polled: a gap opens at an event with Node 0
// (the monitor records one at every poll that finds no leader) and closes
// at the next event naming a leader, or earlier at a client operation
// that proves one (LeaderEvidence) at its completion; the monitor's next
// poll without a leader opens another. Before the monitor's first event
// nothing is known and no gap is reported.
func Leaderless(ops []Op) []Gap {
	var out []Gap
	open := false
	var end int64
	for _, op := range ops {
		end = max(end, op.Time)
		switch {
		case op.Process == MonitorProcess && op.F == FLeader:
			switch {
			case op.Node == 0 && !open:
				out = append(out, Gap{Start: op.Time, Why: op.Error})
				open = true
			case op.Node != 0 && open:
				out[len(out)-1].End = op.Time
				open = false
			}
		case open && LeaderEvidence(op):
			out[len(out)-1].End = op.Time
			open = false
		}
	}
	if open {
		out[len(out)-1].End, out[len(out)-1].Open = end, true
	}
	return out
}
