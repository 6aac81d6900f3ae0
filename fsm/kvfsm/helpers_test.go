package kvfsm

import (
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/stretchr/testify/require"
)

// stampAt is a well-formed stamp distinct for every index.
func stampAt(i uint64) edict.Stamp {
	return edict.Stamp{
		Epoch:   1,
		QT:      edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: int64(i)}}, {Process: 2, T: edict.Time{Incarnation: 3, Nanos: 7}}},
		Counter: i,
	}
}

// harness applies commands to a KV at consecutive indexes, as the replicated
// log would.
type harness struct {
	t   testing.TB
	kv  *KV
	idx uint64
}

func newHarness(t testing.TB) *harness { return &harness{t: t, kv: NewKV()} }

func (h *harness) entry(data []byte) fsm.Entry {
	h.idx++
	return fsm.Entry{Index: h.idx, Stamp: stampAt(h.idx), Data: data}
}

// do applies c and returns its result, failing the test on an error.
func (h *harness) do(c Command) *Result {
	h.t.Helper()
	b, err := EncodeCommand(c)
	require.NoError(h.t, err)
	res := h.kv.Apply(h.entry(b))
	r, ok := res.(*Result)
	require.Truef(h.t, ok, "Apply returned %T %v, want *Result", res, res)
	require.Equal(h.t, h.idx, r.Revision)
	return r
}

// raw applies data and returns whatever Apply returned.
func (h *harness) raw(data []byte) any { return h.kv.Apply(h.entry(data)) }

func (h *harness) put(k, v string) *Result { return h.do(Command{Put: &Put{Key: k, Value: v}}) }

// state returns every key-value pair in key order and the revision.
func state(t testing.TB, kv *KV) ([]KeyValue, uint64) {
	t.Helper()
	res, err := kv.Range(Range{Key: "\x00", RangeEnd: "\x00"})
	require.NoError(t, err)
	return res.Range.KVs, res.Revision
}

func keysOf(kvs []KeyValue) []string {
	ks := []string{}
	for _, kv := range kvs {
		ks = append(ks, kv.Key)
	}
	return ks
}

func putOp(k, v string) Op   { return Op{Put: &Put{Key: k, Value: v}} }
func getOp(k string) Op      { return Op{Range: &Range{Key: k}} }
func delOp(k, end string) Op { return Op{Delete: &Delete{Key: k, RangeEnd: end}} }
func cmpNum(k string, t CompareTarget, op CompareOp, n uint64) Compare {
	return Compare{Key: k, Target: t, Op: op, Number: n}
}
