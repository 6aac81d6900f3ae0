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

// The operations' functions (F).
const (
	FRead      = "read"       // register: read Key; Value is what was read (nil: missing)
	FWrite     = "write"      // register: write Value to Key
	FCAS       = "cas"        // register: set Key to Value if it is Prev
	FAdd       = "add"        // set: add Value
	FFinalRead = "final-read" // set or register: what one node holds at the end (Values, or Value)
	FStart     = "start"      // nemesis: fault Nemesis began (Detail says what)
	FStop      = "stop"       // nemesis: fault Nemesis ended
	FEvent     = "event"      // nemesis: one step of fault Nemesis, while it is in force (Detail says what)
)

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
	// Nemesis names a fault (partition, kill, pause, clock, membership,
	// transfer, delay, bounce, snapshot-install); Detail describes it.
	Nemesis string `json:"nemesis,omitempty"`
	Detail  string `json:"detail,omitempty"`
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
	// Start and End are ns since the test began; End is the history's end
	// if the fault never stopped.
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
			out = append(out, Interval{Nemesis: op.Nemesis, Detail: op.Detail, Start: op.Time, End: -1})
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
