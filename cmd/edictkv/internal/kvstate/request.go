package kvstate

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/wire"
)

// The request envelope is a log entry's Data:
//
//	version   1 byte, EnvelopeVersion
//	id        uvarint, the request's id (the proposer's, for tracing)
//	user      uvarint length, then the bytes of the authenticated user
//	kind      1 byte, a Kind
//	payload   the rest: for Put, DeleteRange, Txn, Compaction and Alarm
//	          etcd's message in its own protobuf encoding (Marshal); for
//	          MemberPut and MemberDelete the framing of encodeMember
//
// The framing is ours and small so that the pb payloads stay etcd's bytes.

// EnvelopeVersion is the first byte of every request this package writes.
const EnvelopeVersion = 1

// Bounds of the envelope's own fields. MaxRequestSize bounds the whole
// encoded request: what one log entry carries, with room for the entry's
// own framing.
const (
	MaxRequestSize   = wire.MaxEntrySize - 64<<10
	MaxUserBytes     = 255
	MaxMemberAttrs   = 16
	MaxAttrNameBytes = 64
	MaxAttrBytes     = 4 << 10
)

// ErrBadRequest wraps every error about a log entry's Data that is not a
// request this package wrote.
var ErrBadRequest = errors.New("kvstate: bad request")

// Kind is the kind of request an envelope carries.
type Kind uint8

// The kinds of request.
const (
	KindPut Kind = iota + 1
	KindDeleteRange
	KindTxn
	KindCompaction
	KindMemberPut
	KindMemberDelete
	KindAlarm
)

var kindNames = map[Kind]string{KindPut: "Put", KindDeleteRange: "DeleteRange", KindTxn: "Txn", KindCompaction: "Compaction",
	KindMemberPut: "MemberPut", KindMemberDelete: "MemberDelete", KindAlarm: "Alarm"}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Request is one request of the replicated state: exactly one of the
// pointers is set.
type Request struct {
	// ID identifies the request for its proposer (tracing, logs); the
	// state does not interpret it.
	ID uint64
	// User is the authenticated user the request runs as, "" without
	// authentication. Carried for when the state checks permissions.
	User string

	Put          *pb.PutRequest
	DeleteRange  *pb.DeleteRangeRequest
	Txn          *pb.TxnRequest
	Compaction   *pb.CompactionRequest
	MemberPut    *MemberPut
	MemberDelete *MemberDelete
	Alarm        *pb.AlarmRequest
}

// MemberPut sets attributes of a member directory record: each named
// attribute is replaced, the others are kept.
type MemberPut struct {
	ID    uint64
	Attrs []Attr
}

// Attr is one attribute of a member directory record.
type Attr struct {
	Name, Value string
}

// MemberDelete removes a member's record, every attribute.
type MemberDelete struct {
	ID uint64
}

// Kind is the kind of request r holds; 0 if it holds none or several.
func (r *Request) Kind() Kind {
	var k Kind
	n := 0
	set := func(ok bool, kind Kind) {
		if ok {
			k = kind
			n++
		}
	}
	set(r.Put != nil, KindPut)
	set(r.DeleteRange != nil, KindDeleteRange)
	set(r.Txn != nil, KindTxn)
	set(r.Compaction != nil, KindCompaction)
	set(r.MemberPut != nil, KindMemberPut)
	set(r.MemberDelete != nil, KindMemberDelete)
	set(r.Alarm != nil, KindAlarm)
	if n != 1 {
		return 0
	}
	return k
}

type marshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// Encode writes r as a log entry's Data.
func (r *Request) Encode() ([]byte, error) {
	kind := r.Kind()
	if kind == 0 {
		return nil, fmt.Errorf("kvstate: encode: a request holds exactly one of its kinds")
	}
	if len(r.User) > MaxUserBytes {
		return nil, fmt.Errorf("kvstate: encode: user of %d bytes, over %d", len(r.User), MaxUserBytes)
	}
	head := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(r.User))
	head = append(head, EnvelopeVersion)
	head = binary.AppendUvarint(head, r.ID)
	head = binary.AppendUvarint(head, uint64(len(r.User)))
	head = append(head, r.User...)
	head = append(head, byte(kind))
	var m marshaler
	switch kind {
	case KindPut:
		m = r.Put
	case KindDeleteRange:
		m = r.DeleteRange
	case KindTxn:
		m = r.Txn
	case KindCompaction:
		m = r.Compaction
	case KindAlarm:
		m = r.Alarm
	case KindMemberPut:
		return encodeMemberPut(head, r.MemberPut)
	case KindMemberDelete:
		return checkSize(binary.AppendUvarint(head, r.MemberDelete.ID))
	}
	n := m.Size()
	if len(head)+n > MaxRequestSize {
		return nil, fmt.Errorf("kvstate: encode: %v request of %d bytes, over %d", kind, len(head)+n, MaxRequestSize)
	}
	out := make([]byte, len(head)+n)
	copy(out, head)
	if _, err := m.MarshalToSizedBuffer(out[len(head):]); err != nil {
		return nil, fmt.Errorf("kvstate: encode %v: %w", kind, err)
	}
	return out, nil
}

func checkSize(b []byte) ([]byte, error) {
	if len(b) > MaxRequestSize {
		return nil, fmt.Errorf("kvstate: encode: request of %d bytes, over %d", len(b), MaxRequestSize)
	}
	return b, nil
}

func encodeMemberPut(dst []byte, m *MemberPut) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("kvstate: encode: %w", err)
	}
	dst = binary.AppendUvarint(dst, m.ID)
	dst = binary.AppendUvarint(dst, uint64(len(m.Attrs)))
	for _, a := range m.Attrs {
		dst = binary.AppendUvarint(dst, uint64(len(a.Name)))
		dst = append(dst, a.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(a.Value)))
		dst = append(dst, a.Value...)
	}
	return checkSize(dst)
}

func (m *MemberPut) validate() error {
	switch {
	case m.ID == 0:
		return errors.New("member record of member 0")
	case len(m.Attrs) == 0:
		return errors.New("member record with no attribute")
	case len(m.Attrs) > MaxMemberAttrs:
		return fmt.Errorf("member record with %d attributes, over %d", len(m.Attrs), MaxMemberAttrs)
	}
	seen := map[string]bool{}
	for _, a := range m.Attrs {
		switch {
		case a.Name == "" || len(a.Name) > MaxAttrNameBytes:
			return fmt.Errorf("member attribute name of %d bytes, want 1 to %d", len(a.Name), MaxAttrNameBytes)
		case len(a.Value) > MaxAttrBytes:
			return fmt.Errorf("member attribute %q of %d bytes, over %d", a.Name, len(a.Value), MaxAttrBytes)
		case seen[a.Name]:
			return fmt.Errorf("member attribute %q given twice", a.Name)
		}
		seen[a.Name] = true
	}
	return nil
}

// reader reads the envelope's framing.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("%s: truncated or overlong varint", what)
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *reader) bytes(what string, max int) []byte {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(r.b)) {
		r.fail("%s of %d bytes: over %d, or past the end (%d left)", what, n, max, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("%s: truncated", what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// DecodeRequest reads a log entry's Data written by Request.Encode. It
// refuses anything else with an error wrapping ErrBadRequest, and keeps
// none of data's memory.
func DecodeRequest(data []byte) (*Request, error) {
	if len(data) > MaxRequestSize {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrBadRequest, len(data), MaxRequestSize)
	}
	r := &reader{b: data}
	if v := r.byte1("version"); r.err == nil && v != EnvelopeVersion {
		return nil, fmt.Errorf("%w: envelope version %d, want %d", ErrBadRequest, v, EnvelopeVersion)
	}
	req := &Request{}
	req.ID = r.uvarint("id")
	req.User = string(r.bytes("user", MaxUserBytes))
	kind := Kind(r.byte1("kind"))
	if r.err != nil {
		return nil, r.err
	}
	payload := r.b
	var err error
	switch kind {
	case KindPut:
		req.Put = &pb.PutRequest{}
		err = req.Put.Unmarshal(payload)
	case KindDeleteRange:
		req.DeleteRange = &pb.DeleteRangeRequest{}
		err = req.DeleteRange.Unmarshal(payload)
	case KindTxn:
		req.Txn = &pb.TxnRequest{}
		err = req.Txn.Unmarshal(payload)
	case KindCompaction:
		req.Compaction = &pb.CompactionRequest{}
		err = req.Compaction.Unmarshal(payload)
	case KindAlarm:
		req.Alarm = &pb.AlarmRequest{}
		err = req.Alarm.Unmarshal(payload)
	case KindMemberPut:
		req.MemberPut, err = decodeMemberPut(payload)
	case KindMemberDelete:
		mr := &reader{b: payload}
		req.MemberDelete = &MemberDelete{ID: mr.uvarint("member id")}
		switch {
		case mr.err != nil:
			err = mr.err
		case len(mr.b) != 0:
			err = fmt.Errorf("%w: %d bytes after the member id", ErrBadRequest, len(mr.b))
		case req.MemberDelete.ID == 0:
			err = fmt.Errorf("%w: member record of member 0", ErrBadRequest)
		}
	default:
		return nil, fmt.Errorf("%w: unknown request kind %d", ErrBadRequest, uint8(kind))
	}
	if err != nil {
		if errors.Is(err, ErrBadRequest) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v payload: %v", ErrBadRequest, kind, err)
	}
	if err := checkNesting(req.Txn, 0); err != nil {
		return nil, err
	}
	return req, nil
}

// MaxTxnDepth bounds how deep Txns nest in a request: apply recurses once
// per level.
const MaxTxnDepth = 64

func checkNesting(t *pb.TxnRequest, depth int) error {
	if t == nil {
		return nil
	}
	if depth >= MaxTxnDepth {
		return fmt.Errorf("%w: Txns nested deeper than %d", ErrBadRequest, MaxTxnDepth)
	}
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			if err := checkNesting(op.GetRequestTxn(), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeMemberPut(b []byte) (*MemberPut, error) {
	r := &reader{b: b}
	m := &MemberPut{ID: r.uvarint("member id")}
	n := r.uvarint("attribute count")
	if r.err == nil && n > MaxMemberAttrs {
		r.fail("%d member attributes, over %d", n, MaxMemberAttrs)
	}
	for i := uint64(0); r.err == nil && i < n; i++ {
		name := r.bytes("attribute name", MaxAttrNameBytes)
		value := r.bytes("attribute value", MaxAttrBytes)
		m.Attrs = append(m.Attrs, Attr{Name: string(name), Value: string(value)})
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the member record", ErrBadRequest, len(r.b))
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return m, nil
}
