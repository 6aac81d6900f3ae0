package kvfsm

import (
	"fmt"

	"github.com/edictlog/edictlog/edict"
)

// KeyValue is a key's state (etcd mvccpb.KeyValue without leases).
// Revisions are log indexes. The Stamp's QT may be shared with other
// KeyValues written by the same entry: treat it as read-only.
type KeyValue struct {
	Key   string `codec:"k"`
	Value string `codec:"v,omitempty"`
	// CreateRevision is the index of the entry that created the key.
	CreateRevision uint64 `codec:"c"`
	// ModRevision is the index of the entry that last wrote it.
	ModRevision uint64 `codec:"m"`
	// Version counts the writes since the key was created, from 1. A delete
	// ends the key's life: a later put creates it anew at version 1.
	Version uint64 `codec:"n"`
	// Stamp is the edict stamp of the entry that last wrote the key.
	Stamp edict.Stamp `codec:"s"`
}

// Result is the response to a KV command: Apply returns a *Result, and
// Range and Query answer with one. Exactly one of Put, Delete, Range and
// Txn is set, matching the command.
type Result struct {
	// Revision is the index of the last entry applied when the result was
	// made: for Apply, the command's own index.
	Revision uint64        `codec:"r"`
	Put      *PutResult    `codec:"p,omitempty"`
	Delete   *DeleteResult `codec:"d,omitempty"`
	Range    *RangeResult  `codec:"g,omitempty"`
	Txn      *TxnResult    `codec:"t,omitempty"`
}

// PutResult is the response to a Put.
type PutResult struct {
	// PrevKV is the key's state before the put, if Put.PrevKV asked for it
	// and the key existed.
	PrevKV *KeyValue `codec:"p,omitempty"`
}

// DeleteResult is the response to a Delete.
type DeleteResult struct {
	// Deleted is the number of keys deleted.
	Deleted uint64 `codec:"n"`
	// PrevKVs are the deleted keys' states in key order, if Delete.PrevKV
	// asked for them.
	PrevKVs []KeyValue `codec:"p,omitempty"`
}

// RangeResult is the response to a Range.
type RangeResult struct {
	// KVs are the keys in the range, in key order, at most Limit of them;
	// none if CountOnly, values left out if KeysOnly.
	KVs []KeyValue `codec:"k,omitempty"`
	// Count is the number of keys in the range, whatever the Limit.
	Count uint64 `codec:"n"`
	// More reports that Limit left keys out.
	More bool `codec:"m,omitempty"`
}

// TxnResult is the response to a Txn.
type TxnResult struct {
	// Succeeded reports that every compare held, so Success ran.
	Succeeded bool `codec:"s,omitempty"`
	// Responses holds one response per op of the branch that ran.
	Responses []OpResult `codec:"r,omitempty"`
}

// OpResult is the response to one Op of a Txn: the field matching the op
// is set.
type OpResult struct {
	Put    *PutResult    `codec:"p,omitempty"`
	Delete *DeleteResult `codec:"d,omitempty"`
	Range  *RangeResult  `codec:"g,omitempty"`
}

// validate checks a decoded result's structure, so that a client can rely
// on exactly one response being set and on every stamp being well formed.
func (r *Result) validate() error {
	n := countSet(r.Put != nil, r.Delete != nil, r.Range != nil, r.Txn != nil)
	if n != 1 {
		return fmt.Errorf("result sets %d of put, delete, range, txn; want exactly one", n)
	}
	if r.Txn != nil {
		for i := range r.Txn.Responses {
			if err := r.Txn.Responses[i].validate(); err != nil {
				return fmt.Errorf("txn response %d: %w", i, err)
			}
		}
		return nil
	}
	return (&OpResult{Put: r.Put, Delete: r.Delete, Range: r.Range}).validate()
}

func (o *OpResult) validate() error {
	if n := countSet(o.Put != nil, o.Delete != nil, o.Range != nil); n != 1 {
		return fmt.Errorf("response sets %d of put, delete, range; want exactly one", n)
	}
	var kvs []KeyValue
	switch {
	case o.Put != nil && o.Put.PrevKV != nil:
		kvs = []KeyValue{*o.Put.PrevKV}
	case o.Delete != nil:
		kvs = o.Delete.PrevKVs
	case o.Range != nil:
		kvs = o.Range.KVs
	}
	for i := range kvs {
		if err := kvs[i].Stamp.WellFormed(); err != nil {
			return fmt.Errorf("key %q: %w", kvs[i].Key, err)
		}
	}
	return nil
}
