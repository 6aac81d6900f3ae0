package transport

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/mpack"
	"github.com/edictlog/edictlog/wire"
)

// The body of a message frame is one msgpack array, written and read by
// hand: the code below is on the path of every append and its reply, and
// go-msgpack's reflective codec spent tens of microseconds and 79
// allocations on a 64-entry append. The bytes are exactly those go-msgpack
// writes for the same layout with structs as arrays (the handle of
// codec.go), so the format did not change with the codec; the tests
// encode every message both ways and compare, and the fuzz targets check
// that both decoders agree (message_oracle_test.go keeps the reflective
// codec as the oracle).
//
//	message  = [kind, from, to, qts, lease, append, appendReply, readIndex,
//	            readIndexReply, timeoutNow, fetch, fetchReply]
//	            (uints; qts; exactly the payload kind names is not nil)
//	qts      = nil | [[reading...]...]   the message's QTs, each once
//	reading  = [process, time]
//	time     = [incarnation uint, nanos int]
//	stamp    = [epoch, qt, counter]      qt: 1-based index into qts, 0 for
//	                                     the zero stamp
//	lease    = [type, from, to, epoch, start time, delta int, wedge bool,
//	            t time, grantee, remaining int, wedged bool, lastIndex,
//	            lastStamp stamp, payload bin|nil, newest,
//	            newestMembers nil|[uint...], newestRan bool,
//	            newestStopIndex, newestStopStamp stamp]
//	entry    = [reign stamp, stamp, kind, data bin|nil]
//	append   = [epoch, reign stamp, commit, prevIndex, prevStamp stamp,
//	            entries nil|[entry...]]   entry i is at prevIndex+1+i
//	appendReply    = [epoch, reign, accepted, success, refused, lastIndex,
//	                  hintIndex, hintStamp]
//	readIndex      = [epoch, id, sent time]
//	readIndexReply = [epoch, id, sent time, reign, ok, index, leader]
//	timeoutNow     = [epoch, reign]
//	fetch          = [epoch, id, attempt time, prevIndex, prevStamp, max,
//	                  committed, upToIndex, upToStamp]
//	fetchReply     = [epoch, id, attempt time, lastIndex, lastStamp,
//	                  compacted, ok, first, entries, committed, commit]
//	                  entry i is at first+i
//
// Integers are in their shortest form, signed ones in signed forms above
// 127 (mpack). A decoder reads exactly this: arrays of exactly these
// lengths, each value of its type; it takes integers in any form that
// holds them, as go-msgpack did. Changing any of it is a new FrameVersion.

// Array lengths of the layout above.
const (
	messageFields        = 12
	leaseFields          = 19
	entryFields          = 4
	appendFields         = 6
	appendReplyFields    = 8
	readIndexFields      = 3
	readIndexReplyFields = 7
	timeoutNowFields     = 2
	fetchFields          = 9
	fetchReplyFields     = 11
	// payloadFields are the message's last eight fields, one per kind.
	payloadFields = messageFields - 4
)

// payloadSlot is the position of each kind's payload among the message's
// eight payload fields.
func payloadSlot(k wire.Kind) int { return int(k - wire.KindLease) }

// appendMessage validates m and appends the body of its frame to dst.
func appendMessage(dst []byte, m wire.Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return dst, err
	}
	k := m.Kind()
	dst = mpack.AppendArrayLen(dst, messageFields)
	dst = mpack.AppendUint(dst, uint64(k))
	dst = mpack.AppendUint(dst, uint64(m.From))
	dst = mpack.AppendUint(dst, uint64(m.To))
	// The QT table precedes the payload but is only known once the
	// payload's stamps have been interned: the payload is written first,
	// then the table is put before it.
	at := len(dst)
	var qts [4]edict.QT // a message has a few
	e := msgEncoder{buf: dst, t: qtTable{qts: qts[:0]}}
	for range payloadSlot(k) {
		e.buf = mpack.AppendNil(e.buf)
	}
	switch k {
	case wire.KindLease:
		e.lease(m.Lease)
	case wire.KindAppend:
		a := m.Append
		e.buf = mpack.AppendArrayLen(e.buf, appendFields)
		e.buf = mpack.AppendUint(e.buf, a.Epoch)
		e.stamp(&a.Reign)
		e.buf = mpack.AppendUint(e.buf, a.LeaderCommit)
		e.buf = mpack.AppendUint(e.buf, a.PrevIndex)
		e.stamp(&a.PrevStamp)
		e.entries(a.Entries)
	case wire.KindAppendReply:
		r := m.AppendReply
		e.buf = mpack.AppendArrayLen(e.buf, appendReplyFields)
		e.buf = mpack.AppendUint(e.buf, r.Epoch)
		e.stamp(&r.Reign)
		e.stamp(&r.Accepted)
		e.buf = mpack.AppendBool(e.buf, r.Success)
		e.buf = mpack.AppendBool(e.buf, r.Refused)
		e.buf = mpack.AppendUint(e.buf, r.LastIndex)
		e.buf = mpack.AppendUint(e.buf, r.HintIndex)
		e.stamp(&r.HintStamp)
	case wire.KindReadIndex:
		r := m.ReadIndex
		e.buf = mpack.AppendArrayLen(e.buf, readIndexFields)
		e.buf = mpack.AppendUint(e.buf, r.Epoch)
		e.buf = mpack.AppendUint(e.buf, r.ID)
		e.time(r.Sent)
	case wire.KindReadIndexReply:
		r := m.ReadIndexReply
		e.buf = mpack.AppendArrayLen(e.buf, readIndexReplyFields)
		e.buf = mpack.AppendUint(e.buf, r.Epoch)
		e.buf = mpack.AppendUint(e.buf, r.ID)
		e.time(r.Sent)
		e.stamp(&r.Reign)
		e.buf = mpack.AppendBool(e.buf, r.OK)
		e.buf = mpack.AppendUint(e.buf, r.Index)
		e.buf = mpack.AppendUint(e.buf, uint64(r.Leader))
	case wire.KindTimeoutNow:
		e.buf = mpack.AppendArrayLen(e.buf, timeoutNowFields)
		e.buf = mpack.AppendUint(e.buf, m.TimeoutNow.Epoch)
		e.stamp(&m.TimeoutNow.Reign)
	case wire.KindFetch:
		f := m.Fetch
		e.buf = mpack.AppendArrayLen(e.buf, fetchFields)
		e.buf = mpack.AppendUint(e.buf, f.Epoch)
		e.buf = mpack.AppendUint(e.buf, f.ID)
		e.time(f.Attempt)
		e.buf = mpack.AppendUint(e.buf, f.PrevIndex)
		e.stamp(&f.PrevStamp)
		e.buf = mpack.AppendUint(e.buf, uint64(f.Max))
		e.buf = mpack.AppendBool(e.buf, f.Committed)
		e.buf = mpack.AppendUint(e.buf, f.UpToIndex)
		e.stamp(&f.UpToStamp)
	case wire.KindFetchReply:
		r := m.FetchReply
		e.buf = mpack.AppendArrayLen(e.buf, fetchReplyFields)
		e.buf = mpack.AppendUint(e.buf, r.Epoch)
		e.buf = mpack.AppendUint(e.buf, r.ID)
		e.time(r.Attempt)
		e.buf = mpack.AppendUint(e.buf, r.LastIndex)
		e.stamp(&r.LastStamp)
		e.buf = mpack.AppendBool(e.buf, r.Compacted)
		e.buf = mpack.AppendBool(e.buf, r.OK)
		var first uint64
		if len(r.Entries) > 0 {
			first = r.Entries[0].Index
		}
		e.buf = mpack.AppendUint(e.buf, first)
		e.entries(r.Entries)
		e.buf = mpack.AppendBool(e.buf, r.Committed)
		e.buf = mpack.AppendUint(e.buf, r.Commit)
	}
	for range payloadFields - 1 - payloadSlot(k) {
		e.buf = mpack.AppendNil(e.buf)
	}
	var table [256]byte
	return slices.Insert(e.buf, at, appendQTs(table[:0], e.t.qts)...), nil
}

// messageSizeHint is about the size of m's encoding, so that a frame is
// allocated once: the entries' data and a little per entry, and room for
// the rest and the QT table.
func messageSizeHint(m wire.Message) int {
	var es []wire.Entry
	switch {
	case m.Append != nil:
		es = m.Append.Entries
	case m.FetchReply != nil:
		es = m.FetchReply.Entries
	}
	n := 512
	for i := range es {
		n += len(es[i].Data) + 32
	}
	return n
}

// appendQTs appends the QT table: nil when empty, as go-msgpack writes a
// nil slice.
func appendQTs(dst []byte, qts []edict.QT) []byte {
	if len(qts) == 0 {
		return mpack.AppendNil(dst)
	}
	dst = mpack.AppendArrayLen(dst, len(qts))
	for _, qt := range qts {
		dst = mpack.AppendArrayLen(dst, len(qt))
		for _, r := range qt {
			dst = append(dst, 0x92) // [process, time]
			dst = mpack.AppendUint(dst, uint64(r.Process))
			dst = appendTime(dst, r.T)
		}
	}
	return dst
}

func appendTime(dst []byte, t edict.Time) []byte {
	dst = append(dst, 0x92) // [incarnation, nanos]
	dst = mpack.AppendUint(dst, t.Incarnation)
	return mpack.AppendInt(dst, t.Nanos)
}

// msgEncoder writes a message's payload and interns its QTs.
type msgEncoder struct {
	buf []byte
	t   qtTable
}

func (e *msgEncoder) time(t edict.Time) { e.buf = appendTime(e.buf, t) }

func (e *msgEncoder) stamp(s *edict.Stamp) {
	e.buf = append(e.buf, 0x93) // [epoch, qt, counter]
	e.buf = mpack.AppendUint(e.buf, s.Epoch)
	e.buf = mpack.AppendUint(e.buf, uint64(e.t.ref(s.QT)))
	e.buf = mpack.AppendUint(e.buf, s.Counter)
}

func (e *msgEncoder) entries(es []wire.Entry) {
	if len(es) == 0 {
		e.buf = mpack.AppendNil(e.buf)
		return
	}
	size := 0
	for i := range es {
		size += len(es[i].Data) + 32
	}
	e.buf = slices.Grow(e.buf, size)
	e.buf = mpack.AppendArrayLen(e.buf, len(es))
	for i := range es {
		x := &es[i]
		e.buf = append(e.buf, 0x90|entryFields)
		e.stamp(&x.Reign)
		e.stamp(&x.Stamp)
		e.buf = mpack.AppendUint(e.buf, uint64(x.Kind))
		e.buf = mpack.AppendBin(e.buf, x.Data)
	}
}

// lease writes an wire.Lease. It and msgDecoder.lease must name every
// field of wire.Lease; TestLeaseWireCoversEveryField fails when one is
// added there and not here.
func (e *msgEncoder) lease(m *wire.Lease) {
	e.buf = mpack.AppendArrayLen(e.buf, leaseFields)
	e.buf = mpack.AppendUint(e.buf, uint64(m.Type))
	e.buf = mpack.AppendUint(e.buf, uint64(m.From))
	e.buf = mpack.AppendUint(e.buf, uint64(m.To))
	e.buf = mpack.AppendUint(e.buf, m.Epoch)
	e.time(m.Start)
	e.buf = mpack.AppendInt(e.buf, int64(m.Delta))
	e.buf = mpack.AppendBool(e.buf, m.Wedge)
	e.time(m.T)
	e.buf = mpack.AppendUint(e.buf, uint64(m.Grantee))
	e.buf = mpack.AppendInt(e.buf, int64(m.Remaining))
	e.buf = mpack.AppendBool(e.buf, m.Wedged)
	e.buf = mpack.AppendUint(e.buf, m.LastIndex)
	e.stamp(&m.LastStamp)
	e.buf = mpack.AppendBin(e.buf, m.Payload)
	e.buf = mpack.AppendUint(e.buf, m.Newest)
	if len(m.NewestMembers) == 0 {
		e.buf = mpack.AppendNil(e.buf)
	} else {
		e.buf = mpack.AppendArrayLen(e.buf, len(m.NewestMembers))
		for _, p := range m.NewestMembers {
			e.buf = mpack.AppendUint(e.buf, uint64(p))
		}
	}
	e.buf = mpack.AppendBool(e.buf, m.NewestRan)
	e.buf = mpack.AppendUint(e.buf, m.NewestStopIndex)
	e.stamp(&m.NewestStopStamp)
}

// decodeMessage decodes and validates one message body: exactly one
// value, no trailing bytes, every structural rule of Validate. Whether a
// stamp covers a quorum of its epoch needs the epoch table and is left to
// the log (edict.Stamp.Validate). The message owns its memory: the body
// may be reused once it returns. The data of its entries share one
// allocation.
func decodeMessage(body []byte) (wire.Message, error) {
	if len(body) == 0 {
		return wire.Message{}, errors.New("transport: decode message: empty body")
	}
	d := msgDecoder{r: mpack.NewReader(body, 0, mpack.Codec)}
	m, err := d.message()
	if err == nil {
		err = m.Validate()
	}
	if err != nil {
		return wire.Message{}, fmt.Errorf("transport: decode message: %w", err)
	}
	return m, nil
}

// msgDecoder reads a message body. Reader records the first failure and
// makes every later read a no-op, so the reads below go on unchecked and
// the result is looked at once, at the end.
type msgDecoder struct {
	r   mpack.Reader
	qts qtRefs
	err error // a failure of the message's own rules
	// data holds the entries' data, copied out of the body.
	data []byte
}

func (d *msgDecoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// array reads the header of an array of exactly n elements.
func (d *msgDecoder) array(what string, n int) bool {
	got, isNil := d.r.ArrayLen(what, n)
	if d.r.Err() != nil {
		return false
	}
	if isNil || got != n {
		d.r.Fail("%s: want an array of %d", what, n)
		return false
	}
	return true
}

// payload reports whether a payload field holds one (nil means none).
func (d *msgDecoder) payload() bool { return d.r.Err() == nil && !d.r.Nil() }

func (d *msgDecoder) uint8(what string) uint8 {
	v := d.r.Uint(what)
	if v > 0xff {
		d.r.Fail("%s: %d overflows uint8", what, v)
	}
	return uint8(v)
}

func (d *msgDecoder) uint32(what string) uint32 {
	v := d.r.Uint(what)
	if v > 0xffffffff {
		d.r.Fail("%s: %d overflows uint32", what, v)
	}
	return uint32(v)
}

func (d *msgDecoder) time(what string) edict.Time {
	if !d.array(what, 2) {
		return edict.Time{}
	}
	return edict.Time{Incarnation: d.r.Uint(what), Nanos: d.r.Int(what)}
}

func (d *msgDecoder) stamp(what string) edict.Stamp {
	if !d.array(what, 3) {
		return edict.Stamp{}
	}
	e, q, c := d.r.Uint(what), d.uint32(what), d.r.Uint(what)
	s, err := d.qts.stamp(wStamp{E: e, Q: q, C: c})
	if err != nil {
		d.fail(err)
	}
	return s
}

// readQTs reads the QT table, whose size the payload bounds, checked once
// it is read (maxQTs).
func (d *msgDecoder) readQTs() {
	n, isNil := d.r.ArrayLen("quorum timestamps", maxQTs(wire.MaxAppendEntries))
	if isNil || n == 0 || d.r.Err() != nil {
		return
	}
	d.qts = make(qtRefs, n)
	for i := range d.qts {
		k, _ := d.r.ArrayLen("quorum timestamp", edict.MaxQTSize)
		if d.r.Err() != nil {
			return
		}
		if k == 0 {
			// Empty or nil: WellFormed names the fault below.
			d.qts[i] = edict.QT{}
		} else {
			d.qts[i] = make(edict.QT, k)
		}
		for j := range k {
			if !d.array("reading", 2) {
				return
			}
			d.qts[i][j] = edict.Reading{Process: edict.ProcessID(d.r.Uint("reading")), T: d.time("reading")}
		}
		if err := d.qts[i].WellFormed(); err != nil {
			d.fail(fmt.Errorf("quorum timestamp %d: %w", i+1, err))
		}
	}
}

func (d *msgDecoder) message() (wire.Message, error) {
	if !d.array("message", messageFields) {
		return wire.Message{}, d.r.Err()
	}
	kind := d.uint8("kind")
	m := wire.Message{From: edict.ProcessID(d.r.Uint("from")), To: edict.ProcessID(d.r.Uint("to"))}
	d.readQTs()
	present := 0
	entries := 0
	for slot := range payloadFields {
		if !d.payload() {
			continue
		}
		present++
		switch wire.Kind(slot) + wire.KindLease {
		case wire.KindLease:
			m.Lease = d.lease()
		case wire.KindAppend:
			if d.array("append", appendFields) {
				a := &wire.Append{Epoch: d.r.Uint("epoch"), Reign: d.stamp("reign"), LeaderCommit: d.r.Uint("commit"), PrevIndex: d.r.Uint("prev index"), PrevStamp: d.stamp("prev stamp")}
				a.Entries = d.entries(a.PrevIndex + 1)
				entries = max(entries, len(a.Entries))
				m.Append = a
			}
		case wire.KindAppendReply:
			if d.array("append reply", appendReplyFields) {
				m.AppendReply = &wire.AppendReply{Epoch: d.r.Uint("epoch"), Reign: d.stamp("reign"), Accepted: d.stamp("accepted"), Success: d.r.Bool("success"), Refused: d.r.Bool("refused"),
					LastIndex: d.r.Uint("last index"), HintIndex: d.r.Uint("hint index"), HintStamp: d.stamp("hint stamp")}
			}
		case wire.KindReadIndex:
			if d.array("read index", readIndexFields) {
				m.ReadIndex = &wire.ReadIndexRequest{Epoch: d.r.Uint("epoch"), ID: d.r.Uint("id"), Sent: d.time("sent")}
			}
		case wire.KindReadIndexReply:
			if d.array("read index reply", readIndexReplyFields) {
				m.ReadIndexReply = &wire.ReadIndexReply{Epoch: d.r.Uint("epoch"), ID: d.r.Uint("id"), Sent: d.time("sent"), Reign: d.stamp("reign"), OK: d.r.Bool("ok"),
					Index: d.r.Uint("index"), Leader: edict.ProcessID(d.r.Uint("leader"))}
			}
		case wire.KindTimeoutNow:
			if d.array("timeout now", timeoutNowFields) {
				m.TimeoutNow = &wire.TimeoutNow{Epoch: d.r.Uint("epoch"), Reign: d.stamp("reign")}
			}
		case wire.KindFetch:
			if d.array("fetch", fetchFields) {
				m.Fetch = &wire.Fetch{Epoch: d.r.Uint("epoch"), ID: d.r.Uint("id"), Attempt: d.time("attempt"), PrevIndex: d.r.Uint("prev index"), PrevStamp: d.stamp("prev stamp"),
					Max: d.uint32("max"), Committed: d.r.Bool("committed"), UpToIndex: d.r.Uint("up-to index"), UpToStamp: d.stamp("up-to stamp")}
			}
		case wire.KindFetchReply:
			if d.array("fetch reply", fetchReplyFields) {
				r := &wire.FetchReply{Epoch: d.r.Uint("epoch"), ID: d.r.Uint("id"), Attempt: d.time("attempt"), LastIndex: d.r.Uint("last index"), LastStamp: d.stamp("last stamp"),
					Compacted: d.r.Bool("compacted"), OK: d.r.Bool("ok")}
				first := d.r.Uint("first")
				r.Entries = d.entries(first)
				if len(r.Entries) == 0 && first != 0 {
					d.fail(errors.New("fetch reply names a first index but has no entries"))
				}
				entries = max(entries, len(r.Entries))
				r.Committed, r.Commit = d.r.Bool("committed"), d.r.Uint("commit")
				m.FetchReply = r
			}
		}
	}
	d.r.End()
	if err := d.r.Err(); err != nil {
		return wire.Message{}, err
	}
	k := wire.Kind(kind)
	switch {
	case !k.Valid():
		return wire.Message{}, fmt.Errorf("unknown message kind %d", kind)
	case len(d.qts) > maxQTs(entries):
		return wire.Message{}, fmt.Errorf("%d quorum timestamps exceed the limit of %d", len(d.qts), maxQTs(entries))
	case present != 1 || m.Kind() != k:
		return wire.Message{}, fmt.Errorf("%v message must carry exactly its own payload (%d payloads present)", k, present)
	case d.err != nil:
		return wire.Message{}, fmt.Errorf("%v message: %w", k, d.err)
	}
	return m, nil
}

// entries reads entries whose first index is first. Their data is copied
// into one buffer, allocated at the first that has any, as large as the
// rest of the body could hold.
func (d *msgDecoder) entries(first uint64) []wire.Entry {
	n, isNil := d.r.ArrayLen("entries", wire.MaxAppendEntries)
	if isNil || n == 0 || d.r.Err() != nil {
		return nil
	}
	es := make([]wire.Entry, n)
	for i := range es {
		if !d.array("entry", entryFields) {
			return nil
		}
		es[i] = wire.Entry{Index: first + uint64(i), Reign: d.stamp("entry reign"), Stamp: d.stamp("entry stamp"), Kind: wire.EntryKind(d.uint8("entry kind"))}
		es[i].Data = d.bin("entry data")
	}
	return es
}

// bin reads a bin or nil, copied out of the body into d.data: nil stays
// nil, and a bin of no bytes is an empty slice, as go-msgpack decoded them.
// d.data is allocated at the first bin that has bytes, as large as the
// rest of the body, so that it never grows: every slice handed out stays
// in the one buffer.
func (d *msgDecoder) bin(what string) []byte {
	p, isNil := d.r.BinView(what)
	switch {
	case isNil || d.r.Err() != nil:
		return nil
	case len(p) == 0:
		return []byte{}
	case d.data == nil:
		d.data = make([]byte, 0, len(p)+d.r.Left())
	}
	start := len(d.data)
	d.data = append(d.data, p...)
	return d.data[start:len(d.data):len(d.data)]
}

func (d *msgDecoder) lease() *wire.Lease {
	if !d.array("lease", leaseFields) {
		return nil
	}
	m := &wire.Lease{Type: wire.LeaseType(d.uint8("type")), From: edict.ProcessID(d.r.Uint("from")), To: edict.ProcessID(d.r.Uint("to")), Epoch: d.r.Uint("epoch"),
		Start: d.time("start"), Delta: time.Duration(d.r.Int("delta")), Wedge: d.r.Bool("wedge"),
		T: d.time("t"), Grantee: edict.ProcessID(d.r.Uint("grantee")), Remaining: time.Duration(d.r.Int("remaining")), Wedged: d.r.Bool("wedged"),
		LastIndex: d.r.Uint("last index"), LastStamp: d.stamp("last stamp")}
	m.Payload = d.bin("payload")
	m.Newest = d.r.Uint("newest")
	if n, _ := d.r.ArrayLen("newest members", wire.MaxMembers); n > 0 && d.r.Err() == nil {
		m.NewestMembers = make([]edict.ProcessID, n)
		for i := range m.NewestMembers {
			m.NewestMembers[i] = edict.ProcessID(d.r.Uint("newest member"))
		}
	}
	m.NewestRan = d.r.Bool("newest ran")
	m.NewestStopIndex = d.r.Uint("newest stop index")
	m.NewestStopStamp = d.stamp("newest stop stamp")
	return m
}
