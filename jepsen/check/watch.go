package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/edictlog/edictlog/jepsen/history"
)

// The kinds of WatchAnomaly. A watcher's:
const (
	// WatchGap: events of its keys it was never sent, though it was sent
	// a later one, or told (a progress notification) that everything up
	// to a later revision was sent.
	WatchGap = "gap"
	// WatchDuplicate: an event it had been sent already.
	WatchDuplicate = "duplicate"
	// WatchReorder: an event sent after a later one.
	WatchReorder = "reorder"
	// WatchWrongValue: an event at a revision and key of the committed
	// history, but not that change (type, value, create_revision or
	// version differ).
	WatchWrongValue = "wrong-value"
	// WatchInvented: an event the committed history does not have (or of
	// a key the watcher does not watch, or below its start revision).
	WatchInvented = "invented"
	// WatchStalled: after the final heal, the watcher was not sent the
	// last changes of its keys within the drain's time.
	WatchStalled = "stalled"
	// WatchMalformed: its stream sent what is not a watch line.
	WatchMalformed = "malformed"
)

// The kinds of WatchAnomaly of the committed history itself.
const (
	// WatchLostWrite: an acknowledged put or delete that is not in the
	// committed history.
	WatchLostWrite = "lost-write"
	// WatchFailedPresent: a put whose failure edictkv answered, or a value
	// applied twice, in the committed history.
	WatchFailedPresent = "failed-write-present"
	WatchAppliedTwice  = "applied-twice"
	// WatchUnattempted: a change no writer attempted.
	WatchUnattempted = "unattempted"
	// WatchWrongRevision: an acknowledged write at another revision than
	// its answer named.
	WatchWrongRevision = "wrong-revision"
	// WatchInconsistent: the history contradicts itself: revisions that
	// go back, a create_revision or version that does not follow from the
	// key's earlier changes, a delete of a missing key.
	WatchInconsistent = "inconsistent"
	// WatchReplayDiffers: two members replayed different histories.
	WatchReplayDiffers = "replay-differs"
	// WatchFinalRead: a key's final (linearizable) read is not what the
	// committed history leaves it.
	WatchFinalRead = "final-read-differs"
)

// maxWatchAnomalies is how many anomalies a WatchResult lists (it counts
// them all).
const maxWatchAnomalies = 200

// WatchAnomaly is one thing wrong with what a watcher was sent, or with
// the committed history.
type WatchAnomaly struct {
	Kind string `json:"kind"`
	// Watcher (0: the committed history), its API and what it watches.
	Watcher int    `json:"watcher,omitempty"`
	API     string `json:"api,omitempty"`
	// Member is the member whose stream showed it.
	Member int `json:"member,omitempty"`
	// Revision and Key: where (for a gap, the first revision missed).
	Revision int64  `json:"revision,omitempty"`
	Key      string `json:"key,omitempty"`
	// Time is when the record that showed it was made (ns since the test
	// began).
	Time   int64  `json:"time_ns,omitempty"`
	Detail string `json:"detail"`
}

func (a WatchAnomaly) String() string {
	who := "the committed history"
	if a.Watcher != 0 {
		who = fmt.Sprintf("watcher %d (%s)", a.Watcher, a.API)
	}
	at := ""
	if a.Member != 0 {
		at = fmt.Sprintf(" on member %d", a.Member)
	}
	return fmt.Sprintf("%s: %s%s at revision %d, t=%.1fs: %s", a.Kind, who, at, a.Revision, float64(a.Time)/1e9, a.Detail)
}

// ReplaySummary is one member's replay of the whole history after the
// final heal.
type ReplaySummary struct {
	Member int `json:"member"`
	Events int `json:"events"`
	// Covered is the revision up to which it replayed; Error why it
	// stopped short of the final read's revision.
	Covered         int64  `json:"covered"`
	Error           string `json:"error,omitempty"`
	CompactRevision int64  `json:"compact_revision,omitempty"`
	// Agrees: its events are the committed history's, up to Covered.
	Agrees bool `json:"agrees"`
}

// WatcherSummary says what one watcher was sent and how it was judged.
type WatcherSummary struct {
	Watcher int    `json:"watcher"`
	API     string `json:"api"`
	Key     string `json:"key"`
	Prefix  bool   `json:"prefix,omitempty"`
	// Start is the revision it watched from; Covered the last it was told
	// of (an event or a progress notification): it is judged on every
	// change of its keys in [Start, Covered]. Target is the last change of
	// its keys in the committed history.
	Start   int64 `json:"start"`
	Covered int64 `json:"covered"`
	Target  int64 `json:"target"`
	// Events and Progress count what it recorded; Expected, the committed
	// history's events of its keys in [Start, Covered].
	Events   int `json:"events"`
	Expected int `json:"expected"`
	Progress int `json:"progress"`
	// Reconnects counts its streams after the first; Members, the members
	// it watched through.
	Reconnects int   `json:"reconnects"`
	Members    []int `json:"members"`
	// CompactRevision: a compaction ended it; it is judged up to there.
	CompactRevision int64 `json:"compact_revision,omitempty"`
	// Beyond counts events past the final read's revision (not judged).
	Beyond    int `json:"beyond,omitempty"`
	Anomalies int `json:"anomalies"`
}

// WatchResult is Watch's verdict.
type WatchResult struct {
	Valid Validity `json:"valid"`
	// Error says why the check could not decide.
	Error string `json:"error,omitempty"`
	// Writes counts the writers' puts ("write") and deletes ("delete") by
	// outcome.
	Writes Counts `json:"writes"`
	// FinalRevision is the final read's revision: the committed history
	// is judged up to it.
	FinalRevision int64 `json:"final_revision"`
	// TruthMember is the member whose replay is the committed history;
	// TruthEvents, its events.
	TruthMember int              `json:"truth_member"`
	TruthEvents int              `json:"truth_events"`
	Replays     []ReplaySummary  `json:"replays"`
	Watchers    []WatcherSummary `json:"watchers"`
	// Events and Reconnects sum the watchers'.
	Events     int `json:"events"`
	Reconnects int `json:"reconnects"`
	// Compacted lists the watchers a compaction ended.
	Compacted    []int          `json:"compacted,omitempty"`
	AnomalyCount int            `json:"anomaly_count"`
	AnomalyKinds map[string]int `json:"anomaly_kinds,omitempty"`
	// Anomalies are the first 200.
	Anomalies []WatchAnomaly `json:"anomalies,omitempty"`
	// Anomaly describes the first few, a line each.
	Anomaly string `json:"anomaly,omitempty"`
}

// Summary is the result in one line.
func (r WatchResult) Summary() string {
	s := fmt.Sprintf("%d watchers sent %d events, %d reconnects; committed history %d events to revision %d (member %d's replay)",
		len(r.Watchers), r.Events, r.Reconnects, r.TruthEvents, r.FinalRevision, r.TruthMember)
	if len(r.Compacted) > 0 {
		s += fmt.Sprintf("; compacted: watchers %v, judged up to their compaction", r.Compacted)
	}
	if r.AnomalyCount > 0 {
		kinds := slices.Sorted(maps.Keys(r.AnomalyKinds))
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%d %s", r.AnomalyKinds[k], k))
		}
		s += fmt.Sprintf("; %d anomalies (%s)", r.AnomalyCount, strings.Join(parts, ", "))
	}
	return s
}

// wevent is an event of a watch stream.
type wevent struct {
	rev     int64
	key     string
	put     bool
	value   *int64
	raw     string // a value that is not an integer
	create  int64
	version int64
	op      history.Op
}

func eventOf(op history.Op) wevent {
	return wevent{rev: op.Revision, key: op.Key, put: op.Watch.Event == "put", value: op.Value, raw: op.Detail,
		create: op.Watch.CreateRevision, version: op.Watch.Version, op: op}
}

// same: the same change (the revision aside).
func (e wevent) same(o wevent) bool {
	return e.key == o.key && e.put == o.put && e.raw == o.raw && e.create == o.create && e.version == o.version &&
		(e.value == nil) == (o.value == nil) && (e.value == nil || *e.value == *o.value)
}

func (e wevent) String() string {
	if !e.put {
		return fmt.Sprintf("delete %s at %d", e.key, e.rev)
	}
	v := e.raw
	if e.value != nil {
		v = fmt.Sprint(*e.value)
	}
	return fmt.Sprintf("put %s=%s at %d (created %d, version %d)", e.key, v, e.rev, e.create, e.version)
}

type revKey struct {
	rev int64
	key string
}

// stream is one watcher's records, in order.
type stream struct {
	info    history.WatchInfo
	records []history.Op
}

// Watch checks a watch workload: writers' puts (FWrite of a unique Value
// to Key) and deletes (FDelete of Key), each acknowledged one with the
// revision its answer named; a final linearizable read of every key
// (FFinalRead, with Value, the mod_revision as Revision and the read's
// revision as Watch.Header); the members' replays of the whole history
// after the final heal; and what every watcher recorded (history's FWatch*
// records).
//
// The committed history is the first member's replay that reached the
// final read's revision. It must be consistent (revisions increase, each
// put's create_revision and version follow from the key's earlier
// changes), agree with every other member's replay, leave every key as
// the final read found it, hold every acknowledged put and delete once at
// the revision its answer named, no failed put, and nothing no writer
// attempted (a put or delete whose outcome is unknown may be there or
// not, once).
//
// Each watcher, from its start revision to the last revision it was told
// of (an event, or a progress notification: everything up to it sent),
// must have been sent exactly the committed history's changes of its
// keys, in revision order, across all its reconnects: none missing
// (gap), none twice (duplicate), none after a later one (reorder), none
// different (wrong value), none made up (invented); and after the final
// heal it must have been sent its keys' last change, unless a compaction
// ended it (then it is judged up to there, and Compacted says so).
//
// Without a final read or a replay that reached it the verdict is
// Unknown.
func Watch(ops []history.Op) WatchResult {
	res := WatchResult{Writes: Counts{}, AnomalyKinds: map[string]int{}, Replays: []ReplaySummary{}, Watchers: []WatcherSummary{}}
	c := &watchCheck{res: &res}
	if err := c.read(ops); err != nil {
		res.Valid, res.Error = Unknown, err.Error()
		return res
	}
	truth, err := c.truth()
	if err != nil {
		res.Valid, res.Error = Unknown, err.Error()
		c.watchers(nil) // what they were sent is still worth listing
		return res
	}
	c.checkTruth(truth)
	c.watchers(truth)
	res.Valid = Valid
	if res.AnomalyCount > 0 {
		res.Valid = Invalid
	}
	var lines []string
	for _, a := range res.Anomalies[:min(len(res.Anomalies), 10)] {
		lines = append(lines, a.String())
	}
	if res.AnomalyCount > len(lines) {
		lines = append(lines, fmt.Sprintf("... and %d more (results.json lists %d)", res.AnomalyCount-len(lines), len(res.Anomalies)))
	}
	res.Anomaly = strings.Join(lines, "\n")
	return res
}

type watchCheck struct {
	res      *WatchResult
	puts     map[int64]operation    // value → its put
	deletes  map[string][]operation // key → its deletes
	finals   map[string]history.Op  // key → its final read
	replays  map[int]*stream        // member → its replay
	streams  map[int]*stream        // watcher → its records
	finalRev int64
}

func (c *watchCheck) anomaly(a WatchAnomaly) {
	c.res.AnomalyCount++
	c.res.AnomalyKinds[a.Kind]++
	if len(c.res.Anomalies) < maxWatchAnomalies {
		c.res.Anomalies = append(c.res.Anomalies, a)
	}
}

// read sorts the history's records.
func (c *watchCheck) read(ops []history.Op) error {
	c.puts, c.deletes, c.finals = map[int64]operation{}, map[string][]operation{}, map[string]history.Op{}
	c.replays, c.streams = map[int]*stream{}, map[int]*stream{}
	paired, err := pair(ops)
	if err != nil {
		return err
	}
	for _, o := range paired {
		switch o.f() {
		case history.FWrite:
			if o.invoke.Value == nil {
				return fmt.Errorf("check: event %d: a put without a value", o.invoke.Index)
			}
			if prev, ok := c.puts[*o.invoke.Value]; ok {
				return fmt.Errorf("check: event %d: value %d put twice (event %d): values must be unique", o.invoke.Index, *o.invoke.Value, prev.invoke.Index)
			}
			c.puts[*o.invoke.Value] = o
		case history.FDelete:
			c.deletes[o.invoke.Key] = append(c.deletes[o.invoke.Key], o)
		case history.FFinalRead:
			if o.outcome == history.OK && o.complete.Watch != nil {
				c.finals[o.invoke.Key] = *o.complete
				c.finalRev = max(c.finalRev, o.complete.Watch.Header)
			}
			continue
		default:
			continue
		}
		if c.res.Writes[o.f()] == nil {
			c.res.Writes[o.f()] = map[string]int{}
		}
		c.res.Writes[o.f()][string(o.outcome)]++
	}
	for _, op := range ops {
		if op.Process != history.WatchProcess || op.Watch == nil {
			continue
		}
		m := c.streams
		if op.Watch.Replay {
			m = c.replays
		}
		s := m[op.Watch.Watcher]
		if s == nil {
			s = &stream{info: *op.Watch}
			m[op.Watch.Watcher] = s
		}
		s.records = append(s.records, op)
	}
	c.res.FinalRevision = c.finalRev
	return nil
}

// truth picks the committed history: the first member's replay that
// reached the final read's revision, its events up to that revision. The
// other replays must agree with it as far as they went.
func (c *watchCheck) truth() ([]wevent, error) {
	if len(c.finals) == 0 {
		return nil, fmt.Errorf("check: no final read: the committed history cannot be told")
	}
	members := slices.Sorted(maps.Keys(c.replays))
	events := map[int][]wevent{}
	truthMember := 0
	for _, m := range members {
		rs := ReplaySummary{Member: m}
		for _, op := range c.replays[m].records {
			switch op.F {
			case history.FWatchEvent:
				if op.Revision <= c.finalRev {
					events[m] = append(events[m], eventOf(op))
				}
			case history.FWatchEnd:
				rs.Covered, rs.Error, rs.CompactRevision = op.Revision, op.Error, op.Watch.CompactRevision
			}
		}
		rs.Events = len(events[m])
		if truthMember == 0 && rs.Error == "" && rs.Covered >= c.finalRev {
			truthMember = m
		}
		c.res.Replays = append(c.res.Replays, rs)
	}
	if truthMember == 0 {
		return nil, fmt.Errorf("check: no member replayed the history up to the final read's revision %d: %+v", c.finalRev, c.res.Replays)
	}
	truth := events[truthMember]
	c.res.TruthMember, c.res.TruthEvents = truthMember, len(truth)
	for i, rs := range c.res.Replays {
		c.res.Replays[i].Agrees = true
		if rs.Member == truthMember {
			continue
		}
		if d, rev, ok := differ(truth, events[rs.Member], rs.Covered); !ok {
			c.res.Replays[i].Agrees = false
			c.anomaly(WatchAnomaly{Kind: WatchReplayDiffers, Member: rs.Member, Revision: rev,
				Detail: fmt.Sprintf("member %d's replay differs from member %d's: %s", rs.Member, truthMember, d)})
		}
	}
	return truth, nil
}

// differ compares two replays up to revision upTo: the first difference,
// and its revision.
func differ(a, b []wevent, upTo int64) (string, int64, bool) {
	for i := 0; ; i++ {
		ea, eb := i < len(a) && a[i].rev <= upTo, i < len(b) && b[i].rev <= upTo
		switch {
		case !ea && !eb:
			return "", 0, true
		case !eb:
			return fmt.Sprintf("it lacks %v", a[i]), a[i].rev, false
		case !ea:
			return fmt.Sprintf("it has %v, which the other lacks", b[i]), b[i].rev, false
		case a[i].rev != b[i].rev || !a[i].same(b[i]):
			return fmt.Sprintf("it has %v where the other has %v", b[i], a[i]), min(a[i].rev, b[i].rev), false
		}
	}
}

// checkTruth checks the committed history against itself, the writers'
// operations and the final reads.
func (c *watchCheck) checkTruth(truth []wevent) {
	type keyState struct {
		present         bool
		create, version int64
		value           *int64
		raw             string
		rev             int64
	}
	state := map[string]*keyState{}
	seenValue := map[int64]int64{}    // value → the revision it was put at
	deletesAt := map[string][]int64{} // key → the revisions of its deletions
	var last wevent
	for i, e := range truth {
		bad := func(kind, format string, args ...any) {
			c.anomaly(WatchAnomaly{Kind: kind, Member: c.res.TruthMember, Revision: e.rev, Key: e.key, Time: e.op.Time,
				Detail: fmt.Sprintf(format, args...)})
		}
		if i > 0 && (e.rev < last.rev || e.rev == last.rev && e.key == last.key) {
			bad(WatchInconsistent, "%v after %v", e, last)
		}
		last = e
		st := state[e.key]
		if st == nil {
			st = &keyState{}
			state[e.key] = st
		}
		if !e.put {
			if !st.present {
				bad(WatchInconsistent, "%v, a key that did not exist", e)
			}
			*st = keyState{rev: e.rev}
			deletesAt[e.key] = append(deletesAt[e.key], e.rev)
			continue
		}
		wantCreate, wantVersion := e.rev, int64(1)
		if st.present {
			wantCreate, wantVersion = st.create, st.version+1
		}
		if e.create != wantCreate || e.version != wantVersion {
			bad(WatchInconsistent, "%v, where the key's earlier changes make it created %d, version %d", e, wantCreate, wantVersion)
		}
		*st = keyState{present: true, create: e.create, version: e.version, value: e.value, raw: e.raw, rev: e.rev}
		if e.value == nil {
			bad(WatchUnattempted, "%v: no writer puts such a value", e)
			continue
		}
		v := *e.value
		if at, ok := seenValue[v]; ok {
			bad(WatchAppliedTwice, "%v: value %d was put at revision %d already", e, v, at)
			continue
		}
		seenValue[v] = e.rev
		w, ok := c.puts[v]
		switch {
		case !ok || w.invoke.Key != e.key:
			bad(WatchUnattempted, "%v: no writer put %d to %s", e, v, e.key)
		case w.outcome == history.Fail:
			bad(WatchFailedPresent, "%v: the put of %d (process %d, through member %d) failed: %s", e, v, w.invoke.Process, w.invoke.Node, w.complete.Error)
		case w.outcome == history.OK && w.complete.Revision != 0 && w.complete.Revision != e.rev:
			bad(WatchWrongRevision, "%v: the put of %d was acknowledged at revision %d", e, v, w.complete.Revision)
		}
	}
	// Every acknowledged put is there.
	for _, v := range slices.Sorted(maps.Keys(c.puts)) {
		w := c.puts[v]
		if w.outcome != history.OK {
			continue
		}
		if _, ok := seenValue[v]; !ok {
			c.anomaly(WatchAnomaly{Kind: WatchLostWrite, Revision: w.complete.Revision, Key: w.invoke.Key, Time: w.end,
				Detail: fmt.Sprintf("the put of %d to %s (process %d, through member %d) was acknowledged at revision %d, but is not in the committed history",
					v, w.invoke.Key, w.invoke.Process, w.invoke.Node, w.complete.Revision)})
		}
	}
	// Every acknowledged delete is there at its revision; the other
	// deletions are those of deletes whose outcome is unknown, one each.
	keys := slices.Collect(maps.Keys(c.deletes))
	for key := range deletesAt {
		if _, ok := c.deletes[key]; !ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		at := map[int64]bool{}
		for _, r := range deletesAt[key] {
			at[r] = true
		}
		unknown := 0
		for _, d := range c.deletes[key] {
			switch {
			case d.outcome == history.Info:
				unknown++
			case d.outcome == history.OK && d.complete.Revision != 0:
				if !at[d.complete.Revision] {
					c.anomaly(WatchAnomaly{Kind: WatchLostWrite, Revision: d.complete.Revision, Key: key, Time: d.end,
						Detail: fmt.Sprintf("the delete of %s (process %d, through member %d) was acknowledged at revision %d, but the committed history has no deletion of it there",
							key, d.invoke.Process, d.invoke.Node, d.complete.Revision)})
				}
				delete(at, d.complete.Revision)
			case d.outcome == history.OK:
				unknown++ // acknowledged, revision not said
			}
		}
		if extra := len(at) - unknown; extra > 0 {
			revs := slices.Sorted(maps.Keys(at))
			c.anomaly(WatchAnomaly{Kind: WatchUnattempted, Revision: revs[0], Key: key,
				Detail: fmt.Sprintf("%d deletion(s) of %s at revisions %v that no acknowledged delete made, and only %d delete(s) with an unknown outcome", len(at), key, revs, unknown)})
		}
	}
	// Every key is as the final read found it.
	for _, key := range slices.Sorted(maps.Keys(c.finals)) {
		f := c.finals[key]
		st := state[key]
		if st == nil {
			st = &keyState{}
		}
		got := "missing"
		if f.Value != nil || f.Detail != "" {
			got = fmt.Sprintf("%s (mod_revision %d)", valueText(f.Value, f.Detail), f.Revision)
		}
		want := "missing"
		if st.present {
			want = fmt.Sprintf("%s (mod_revision %d)", valueText(st.value, st.raw), st.rev)
		}
		if got != want {
			c.anomaly(WatchAnomaly{Kind: WatchFinalRead, Member: f.Node, Revision: f.Watch.Header, Key: key, Time: f.Time,
				Detail: fmt.Sprintf("the final read of %s through member %d found %s; the committed history leaves it %s", key, f.Node, got, want)})
		}
	}
}

func valueText(v *int64, raw string) string {
	if v != nil {
		return fmt.Sprint(*v)
	}
	return raw
}

// watchers judges every watcher's records against the committed history
// (nil: only summarises them).
func (c *watchCheck) watchers(truth []wevent) {
	index := map[revKey]int{}
	for i, e := range truth {
		index[revKey{e.rev, e.key}] = i
	}
	for _, id := range slices.Sorted(maps.Keys(c.streams)) {
		s := c.streams[id]
		sum := c.judge(s, truth, index)
		c.res.Watchers = append(c.res.Watchers, sum)
		c.res.Events += sum.Events
		c.res.Reconnects += sum.Reconnects
		if sum.CompactRevision != 0 {
			c.res.Compacted = append(c.res.Compacted, id)
		}
	}
}

// judge walks one watcher's records. want holds the committed history's
// events of its keys from its start revision on; p is the next one it
// should be sent.
func (c *watchCheck) judge(s *stream, truth []wevent, index map[revKey]int) WatcherSummary {
	info := s.info
	sum := WatcherSummary{Watcher: info.Watcher, API: info.API, Key: info.Key, Prefix: info.Prefix, Members: []int{}}
	var want []wevent
	wantAt := map[revKey]int{}
	start := int64(-1)
	for _, op := range s.records {
		if op.F == history.FWatchOpen {
			start = op.Revision
			break
		}
	}
	if start < 0 {
		start = 1
	}
	sum.Start, sum.Covered = start, start-1
	for _, e := range truth {
		if e.rev >= start && watched(info, e.key) {
			wantAt[revKey{e.rev, e.key}] = len(want)
			want = append(want, e)
			sum.Target = e.rev
		}
	}
	anomalies := 0
	bad := func(kind string, op history.Op, rev int64, key, format string, args ...any) {
		anomalies++
		c.anomaly(WatchAnomaly{Kind: kind, Watcher: info.Watcher, API: info.API, Member: op.Node, Revision: rev, Key: key,
			Time: op.Time, Detail: fmt.Sprintf(format, args...)})
	}
	seen := make([]bool, len(want))
	p := 0 // want[:p] were sent or reported missing
	var lastOpen *history.Op
	sinceOpen := 0
	var lastRev int64
	judging := truth != nil
	// missed reports want[p:q], none of which was sent, as one gap.
	missed := func(q int, op history.Op, why string) {
		var n int
		first := -1
		for i := p; i < q; i++ {
			if !seen[i] {
				n++
				if first < 0 {
					first = i
				}
			}
		}
		if n == 0 {
			return
		}
		ctx := ""
		if lastOpen != nil && sinceOpen == 0 {
			ctx = fmt.Sprintf("; the first it was sent after it watched again through member %d from revision %d (after: %s)",
				lastOpen.Node, lastOpen.Revision, lastOpen.Detail)
		}
		bad(WatchGap, op, want[first].rev, want[first].key, "%d change(s) of its keys never sent, revisions %d to %d (first: %v), %s%s",
			n, want[first].rev, want[q-1].rev, want[first], why, ctx)
	}
	for _, op := range s.records {
		switch op.F {
		case history.FWatchOpen:
			if lastOpen != nil {
				sum.Reconnects++
			}
			o := op
			lastOpen, sinceOpen = &o, 0
			if !slices.Contains(sum.Members, op.Node) {
				sum.Members = append(sum.Members, op.Node)
			}
		case history.FWatchEnd:
			if op.Watch.CompactRevision != 0 {
				sum.CompactRevision = op.Watch.CompactRevision
			}
			if judging && strings.HasPrefix(op.Error, history.WatchMalformed) {
				bad(WatchMalformed, op, op.Revision, "", "%s", op.Error)
			}
		case history.FWatchProgress:
			sum.Progress++
			sum.Covered = max(sum.Covered, op.Revision)
			if !judging {
				continue
			}
			q := p
			for q < len(want) && want[q].rev <= op.Revision {
				q++
			}
			missed(q, op, fmt.Sprintf("though member %d said every change up to revision %d was sent", op.Node, op.Revision))
			p = max(p, q)
		case history.FWatchEvent:
			sum.Events++
			e := eventOf(op)
			if !judging {
				continue
			}
			if e.rev > c.finalRev {
				sum.Beyond++
				continue
			}
			sum.Covered = max(sum.Covered, e.rev)
			q, ok := wantAt[revKey{e.rev, e.key}]
			switch {
			case !ok:
				why := "the committed history has no such change"
				if i, there := index[revKey{e.rev, e.key}]; there {
					why = fmt.Sprintf("the committed history has %v, but the watcher does not watch %s", truth[i], e.key)
					if e.rev < start {
						why = fmt.Sprintf("it watched from revision %d", start)
					}
				}
				bad(WatchInvented, op, e.rev, e.key, "it was sent %v: %s", e, why)
			case seen[q]:
				bad(WatchDuplicate, op, e.rev, e.key, "it was sent %v again (after revision %d)", e, lastRev)
			case q < p:
				seen[q] = true
				bad(WatchReorder, op, e.rev, e.key, "it was sent %v after revision %d", e, lastRev)
			default:
				missed(q, op, fmt.Sprintf("though it was sent %v", e))
				seen[q] = true
				p = q + 1
			}
			if ok && !want[q].same(e) {
				bad(WatchWrongValue, op, e.rev, e.key, "it was sent %v; the committed history has %v", e, want[q])
			}
			lastRev = max(lastRev, e.rev)
			sinceOpen++
		}
	}
	if judging {
		for i := range want {
			if want[i].rev <= sum.Covered {
				sum.Expected++
			}
		}
		if sum.CompactRevision == 0 && sum.Covered < sum.Target && len(s.records) > 0 {
			last := s.records[len(s.records)-1]
			bad(WatchStalled, last, sum.Covered+1, "", "it was told of every change up to revision %d only; its keys changed up to revision %d (%d change(s) it was never sent)",
				sum.Covered, sum.Target, len(want)-sum.Expected)
		}
	}
	sum.Anomalies = anomalies
	return sum
}

// watched reports whether a watcher of info's key sees key's changes.
func watched(info history.WatchInfo, key string) bool {
	if info.Prefix {
		return strings.HasPrefix(key, info.Key)
	}
	return key == info.Key
}
