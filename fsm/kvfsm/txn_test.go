package kvfsm

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompare(t *testing.T) {
	// k: created at 1, rewritten at 3, so version 2, value "m".
	h := newHarness(t)
	h.put("k", "m")
	h.put("other", "x")
	h.put("k", "m")

	val := func(k string, op CompareOp, v string) Compare {
		return Compare{Key: k, Target: TargetValue, Op: op, Value: v}
	}
	for _, tc := range []struct {
		c    Compare
		want bool
	}{
		{val("k", Equal, "m"), true},
		{val("k", Equal, "n"), false},
		{val("k", NotEqual, "n"), true},
		{val("k", NotEqual, "m"), false},
		{val("k", Less, "n"), true},
		{val("k", Less, "m"), false},
		{val("k", Less, "l"), false},
		{val("k", Greater, "l"), true},
		{val("k", Greater, "m"), false},
		{val("k", Greater, ""), true},
		{cmpNum("k", TargetVersion, Equal, 2), true},
		{cmpNum("k", TargetVersion, Equal, 1), false},
		{cmpNum("k", TargetVersion, NotEqual, 1), true},
		{cmpNum("k", TargetVersion, Less, 3), true},
		{cmpNum("k", TargetVersion, Greater, 1), true},
		{cmpNum("k", TargetVersion, Greater, 2), false},
		{cmpNum("k", TargetCreateRevision, Equal, 1), true},
		{cmpNum("k", TargetCreateRevision, Equal, 0), false},
		{cmpNum("k", TargetCreateRevision, Less, 2), true},
		{cmpNum("k", TargetModRevision, Equal, 3), true},
		{cmpNum("k", TargetModRevision, Equal, 1), false},
		{cmpNum("k", TargetModRevision, Greater, 2), true},
		{cmpNum("k", TargetModRevision, Less, 3), false},
		// etcd: a missing key's numbers are 0 ...
		{cmpNum("nope", TargetVersion, Equal, 0), true},
		{cmpNum("nope", TargetVersion, Less, 1), true},
		{cmpNum("nope", TargetVersion, Greater, 0), false},
		{cmpNum("nope", TargetCreateRevision, Equal, 0), true},
		{cmpNum("nope", TargetCreateRevision, NotEqual, 0), false},
		{cmpNum("nope", TargetModRevision, Equal, 0), true},
		{cmpNum("nope", TargetModRevision, Greater, 0), false},
		// ... and every value compare on it is false, != included.
		{val("nope", Equal, ""), false},
		{val("nope", NotEqual, "x"), false},
		{val("nope", Less, "z"), false},
		{val("nope", Greater, ""), false},
	} {
		name := fmt.Sprintf("%s %v %v %q %d", tc.c.Key, tc.c.Target, tc.c.Op, tc.c.Value, tc.c.Number)
		t.Run(name, func(t *testing.T) {
			r := h.do(Command{Txn: &Txn{
				Compares: []Compare{tc.c},
				Success:  []Op{getOp("k")},
				Failure:  []Op{getOp("other")},
			}})
			require.NotNil(t, r.Txn)
			assert.Equal(t, tc.want, r.Txn.Succeeded)
			require.Len(t, r.Txn.Responses, 1)
			wantKey := "other"
			if tc.want {
				wantKey = "k"
			}
			assert.Equal(t, []string{wantKey}, keysOf(r.Txn.Responses[0].Range.KVs), "the branch that ran")
		})
	}
}

func TestTxnBranchesAndAtomicity(t *testing.T) {
	h := newHarness(t)
	h.put("a", "1")
	h.put("b", "2")

	// All compares must hold.
	r := h.do(Command{Txn: &Txn{
		Compares: []Compare{
			{Key: "a", Target: TargetValue, Op: Equal, Value: "1"},
			{Key: "b", Target: TargetValue, Op: Equal, Value: "wrong"},
		},
		Success: []Op{putOp("a", "s")},
		Failure: []Op{putOp("a", "f"), {Delete: &Delete{Key: "b", PrevKV: true}}, getOp("a"), getOp("b")},
	}})
	assert.False(t, r.Txn.Succeeded)
	require.Len(t, r.Txn.Responses, 4)
	assert.NotNil(t, r.Txn.Responses[0].Put)
	assert.Equal(t, uint64(1), r.Txn.Responses[1].Delete.Deleted)
	assert.Equal(t, []string{"b"}, keysOf(r.Txn.Responses[1].Delete.PrevKVs))
	// A range in a branch sees the branch's earlier writes.
	assert.Equal(t, "f", r.Txn.Responses[2].Range.KVs[0].Value)
	assert.Equal(t, uint64(0), r.Txn.Responses[3].Range.Count)
	kv, _ := h.kv.Get("a")
	assert.Equal(t, KeyValue{Key: "a", Value: "f", CreateRevision: 1, ModRevision: 3, Version: 2, Stamp: stampAt(3)}, kv)

	// Every write of a transaction has the transaction's revision.
	r = h.do(Command{Txn: &Txn{Success: []Op{putOp("x", "1"), putOp("y", "2"), putOp("a", "3")}}})
	assert.True(t, r.Txn.Succeeded, "no compares: success")
	for _, k := range []string{"x", "y", "a"} {
		kv, _ := h.kv.Get(k)
		assert.Equal(t, uint64(4), kv.ModRevision, k)
	}

	// An empty branch is allowed and changes nothing.
	before, _ := state(t, h.kv)
	r = h.do(Command{Txn: &Txn{Compares: []Compare{cmpNum("a", TargetVersion, Equal, 99)}, Success: []Op{putOp("a", "no")}}})
	assert.False(t, r.Txn.Succeeded)
	assert.Empty(t, r.Txn.Responses)
	after, _ := state(t, h.kv)
	assert.Equal(t, before, after)
}

func TestTxnRefusesWritingAKeyTwice(t *testing.T) {
	for name, ops := range map[string][]Op{
		"two puts":             {putOp("a", "1"), putOp("b", "2"), putOp("a", "3")},
		"put then delete":      {putOp("a", "1"), delOp("a", "")},
		"delete then put":      {delOp("a", ""), putOp("a", "1")},
		"put in delete range":  {delOp("a", "c"), putOp("b", "1")},
		"put in delete to end": {delOp("a", "\x00"), putOp("zzz", "1")},
	} {
		for _, branch := range []string{"success", "failure"} {
			txn := &Txn{Success: ops}
			if branch == "failure" {
				txn = &Txn{Failure: ops}
			}
			_, err := EncodeCommand(Command{Txn: txn})
			assert.ErrorIsf(t, err, ErrInvalid, "%s in %s", name, branch)
			assert.ErrorContainsf(t, err, branch, "%s: the error names the branch", name)
		}
	}
	for name, ops := range map[string][]Op{
		"put outside delete range": {delOp("a", "c"), putOp("c", "1")},
		"overlapping deletes":      {delOp("a", "c"), delOp("b", "d")},
		"put and get":              {putOp("a", "1"), getOp("a"), getOp("a")},
		"put before delete start":  {putOp("a", "1"), delOp("b", "\x00")},
	} {
		_, err := EncodeCommand(Command{Txn: &Txn{Success: ops}})
		assert.NoErrorf(t, err, "%s", name)
	}
	// The branches are checked separately: each may write a key once.
	_, err := EncodeCommand(Command{Txn: &Txn{Success: []Op{putOp("a", "1")}, Failure: []Op{putOp("a", "2")}}})
	assert.NoError(t, err)
}

func TestCASValue(t *testing.T) {
	h := newHarness(t)

	r := h.do(CASValue("k", "", "v1"))
	assert.False(t, r.Txn.Succeeded, "a value compare on a missing key fails, even against \"\"")
	assert.Equal(t, uint64(0), r.Txn.Responses[0].Range.Count)
	_, ok := h.kv.Get("k")
	assert.False(t, ok)

	h.put("k", "v1")
	before, _ := state(t, h.kv)
	r = h.do(CASValue("k", "stale", "v2"))
	assert.False(t, r.Txn.Succeeded)
	require.Len(t, r.Txn.Responses, 1)
	assert.Equal(t, before, r.Txn.Responses[0].Range.KVs, "the failure reports the current state")
	after, _ := state(t, h.kv)
	assert.Equal(t, before, after, "a failed CAS changes nothing")

	r = h.do(CASValue("k", "v1", "v2"))
	assert.True(t, r.Txn.Succeeded)
	kv, _ := h.kv.Get("k")
	assert.Equal(t, "v2", kv.Value)
	assert.Equal(t, uint64(2), kv.Version)
	assert.Equal(t, h.idx, kv.ModRevision)
}

func TestCASIndex(t *testing.T) {
	h := newHarness(t)

	r := h.do(CASIndex("k", 0, "v1"))
	assert.True(t, r.Txn.Succeeded, "index 0 creates a missing key")
	kv, _ := h.kv.Get("k")
	assert.Equal(t, "v1", kv.Value)
	created := kv.ModRevision

	before, _ := state(t, h.kv)
	r = h.do(CASIndex("k", 0, "again"))
	assert.False(t, r.Txn.Succeeded, "index 0 is create-only")
	assert.Equal(t, before, r.Txn.Responses[0].Range.KVs)
	r = h.do(CASIndex("k", created+100, "v2"))
	assert.False(t, r.Txn.Succeeded, "a wrong index fails")
	after, _ := state(t, h.kv)
	assert.Equal(t, before, after, "failed CASes change nothing")

	r = h.do(CASIndex("k", created, "v2"))
	assert.True(t, r.Txn.Succeeded)
	kv, _ = h.kv.Get("k")
	assert.Equal(t, "v2", kv.Value)

	r = h.do(CASIndex("k", created, "v3"))
	assert.False(t, r.Txn.Succeeded, "the index moved on with the write")

	// Create-only after a delete works again: CreateRevision is 0.
	h.do(Command{Delete: &Delete{Key: "k"}})
	r = h.do(CASIndex("k", 0, "reborn"))
	assert.True(t, r.Txn.Succeeded)
}
