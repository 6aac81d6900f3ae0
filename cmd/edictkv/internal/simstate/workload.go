package simstate

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/internal/sim"
)

// The workload's keys, apart from the register operations' (k0, k1, …,
// which sort before them): every delete and every range of the workload
// starts at one of them, so that no delete touches a register.
var workKeys = func() [][]byte {
	var ks [][]byte
	for c := 'a'; c <= 'h'; c++ {
		ks = append(ks, []byte("w/"+string(c)))
	}
	return ks
}()

// workEnd bounds every workload key.
var workEnd = []byte("w0")

// Op implements sim.Model: a Put, a DeleteRange, a Txn, a Compaction, or
// a range read at a past or current revision, drawn with rng, their
// keys, values and revisions chosen from the model's newest state so
// that compares match and ranges find history as often as not.
func (c *Checker) Op(rng *rand.Rand) sim.ModelOp {
	x := rng.IntN(100)
	if c.noReads {
		x = rng.IntN(67)
	}
	switch {
	case x < 25:
		return c.command(&kvstate.Request{Put: c.genPut(rng)})
	case x < 37:
		key, end := c.genSpan(rng)
		return c.command(&kvstate.Request{DeleteRange: &pb.DeleteRangeRequest{Key: key, RangeEnd: end, PrevKv: rng.IntN(2) == 0}})
	case x < 62:
		return c.command(&kvstate.Request{Txn: c.genTxn(rng, 0, &txnKeys{puts: map[string]bool{}})})
	case x < 67:
		return c.command(&kvstate.Request{Compaction: &pb.CompactionRequest{Revision: c.genCompaction(rng)}})
	}
	req := c.genRange(rng)
	levels := []replog.ReadLevel{replog.ReadLease, replog.ReadFollower, replog.ReadStale}
	return sim.ModelOp{Level: levels[rng.IntN(len(levels))], Read: func(st sim.StateMachine, applied uint64) error {
		return c.checkRead(st, applied, req)
	}}
}

// command proposes req and checks its answer.
func (c *Checker) command(req *kvstate.Request) sim.ModelOp {
	data, err := req.Encode()
	if err != nil {
		// The workload wrote a request no server would: its own bug.
		panic(fmt.Sprintf("simstate: the workload's request %v: %v", req, err))
	}
	return sim.ModelOp{Command: data, Done: func(index uint64, res any) error { return c.checkCommand(data, index, res) }}
}

func (c *Checker) value(rng *rand.Rand) []byte {
	if rng.IntN(20) == 0 {
		return nil
	}
	c.seq++
	return fmt.Appendf(nil, "v%d", c.seq)
}

func (c *Checker) genPut(rng *rand.Rand) *pb.PutRequest {
	r := &pb.PutRequest{Key: workKeys[rng.IntN(len(workKeys))], Value: c.value(rng), PrevKv: rng.IntN(3) == 0}
	if rng.IntN(8) == 0 {
		r.Lease = int64(1 + rng.IntN(3))
	}
	return r
}

// genSpan is a key or a range of workload keys: [a, b), every key from
// a on, or every workload key.
func (c *Checker) genSpan(rng *rand.Rand) ([]byte, []byte) {
	i := rng.IntN(len(workKeys))
	switch x := rng.IntN(10); {
	case x < 5:
		return workKeys[i], nil
	case x < 8:
		j := i + 1 + rng.IntN(len(workKeys)-i)
		if j == len(workKeys) {
			return workKeys[i], workEnd
		}
		return workKeys[i], workKeys[j]
	case x < 9:
		return workKeys[i], []byte{0}
	}
	return []byte("w/"), workEnd
}

// genRev is a revision to read at: mostly one the model keeps, now and
// then one just outside (compacted, or not made yet), 0 for the newest.
func (c *Checker) genRev(rng *rand.Rand) int64 {
	rev, compact := c.m.Rev(), c.m.CompactRev()
	lo := max(compact, 1)
	switch x := rng.IntN(20); {
	case x < 8:
		return 0
	case x < 18:
		return lo + rng.Int64N(rev-lo+1)
	case x < 19 && compact > 1:
		return compact - 1
	}
	return rev + 1 + rng.Int64N(3)
}

func (c *Checker) genRange(rng *rand.Rand) *pb.RangeRequest {
	r := &pb.RangeRequest{Revision: c.genRev(rng)}
	if rng.IntN(8) == 0 {
		r.Key, r.RangeEnd = everything, everything
	} else {
		r.Key, r.RangeEnd = c.genSpan(rng)
	}
	switch rng.IntN(10) {
	case 0, 1:
		r.Limit = int64(1 + rng.IntN(3))
	case 2:
		r.CountOnly = true
	case 3:
		r.KeysOnly = true
	}
	return r
}

// genCompaction is a revision to compact at: mostly one above the
// newest compaction, now and then the newest compaction's again or one
// not made yet (each refused, unless revisions moved on by its apply).
func (c *Checker) genCompaction(rng *rand.Rand) int64 {
	rev, compact := c.m.Rev(), c.m.CompactRev()
	lo := max(compact+1, 1)
	switch x := rng.IntN(10); {
	case x < 8 && lo <= rev:
		return lo + rng.Int64N(rev-lo+1)
	case x < 9:
		return max(compact, 1)
	}
	return rev + 1 + rng.Int64N(3)
}

// txnKeys are the keys a txn being drawn puts and the ranges it deletes,
// in all its branches and nested txns: a key is put at most once and
// never inside a deleted range, so that etcd's checks of duplicate keys
// never refuse it (the model does not know them).
type txnKeys struct {
	puts map[string]bool
	dels [][2][]byte
}

func (tk *txnKeys) deleted(k []byte) bool {
	for _, d := range tk.dels {
		if len(keysIn([]*mvccpb.KeyValue{{Key: k}}, d[0], d[1])) > 0 {
			return true
		}
	}
	return false
}

func (c *Checker) genTxn(rng *rand.Rand, depth int, tk *txnKeys) *pb.TxnRequest {
	t := &pb.TxnRequest{}
	for range rng.IntN(3) {
		t.Compare = append(t.Compare, c.genCompare(rng))
	}
	t.Success = c.genOps(rng, depth, tk)
	t.Failure = c.genOps(rng, depth, tk)
	return t
}

func (c *Checker) genOps(rng *rand.Rand, depth int, tk *txnKeys) []*pb.RequestOp {
	var ops []*pb.RequestOp
	for range rng.IntN(4) {
		var op *pb.RequestOp
		switch x := rng.IntN(10); {
		case x < 4:
			k := workKeys[rng.IntN(len(workKeys))]
			if !tk.puts[string(k)] && !tk.deleted(k) {
				tk.puts[string(k)] = true
				r := c.genPut(rng)
				r.Key = k
				op = &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: r}}
			}
		case x < 6:
			key, end := c.genSpan(rng)
			clash := false
			for k := range tk.puts {
				if len(keysIn([]*mvccpb.KeyValue{{Key: []byte(k)}}, key, end)) > 0 {
					clash = true
				}
			}
			if !clash {
				tk.dels = append(tk.dels, [2][]byte{key, end})
				op = &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{
					Key: key, RangeEnd: end, PrevKv: rng.IntN(2) == 0}}}
			}
		case x < 8 && depth < 2:
			op = &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: c.genTxn(rng, depth+1, tk)}}
		}
		if op == nil {
			r := c.genRange(rng)
			if rng.IntN(4) != 0 || c.noReads {
				r.Revision = 0
			}
			op = &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
		}
		ops = append(ops, op)
	}
	return ops
}

// genCompare compares a key or a range on a target, against what the
// newest state holds (or near it) more often than not.
func (c *Checker) genCompare(rng *rand.Rand) *pb.Compare {
	cmp := &pb.Compare{Result: pb.Compare_CompareResult(rng.IntN(4)), Target: pb.Compare_CompareTarget(rng.IntN(5))}
	if rng.IntN(4) == 0 {
		cmp.Key, cmp.RangeEnd = c.genSpan(rng)
	} else {
		cmp.Key = workKeys[rng.IntN(len(workKeys))]
	}
	kv := &mvccpb.KeyValue{}
	if in := keysIn(c.m.State(c.m.Rev()), cmp.Key, cmp.RangeEnd); len(in) > 0 && rng.IntN(4) != 0 {
		kv = in[rng.IntN(len(in))]
	}
	near := func(x int64) int64 { return max(x+int64(rng.IntN(3))-1, 0) }
	switch cmp.Target {
	case pb.Compare_VALUE:
		v := kv.Value
		if rng.IntN(3) == 0 {
			v = c.value(rng)
		}
		cmp.TargetUnion = &pb.Compare_Value{Value: bytes.Clone(v)}
	case pb.Compare_VERSION:
		cmp.TargetUnion = &pb.Compare_Version{Version: near(kv.Version)}
	case pb.Compare_CREATE:
		cmp.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: near(kv.CreateRevision)}
	case pb.Compare_MOD:
		cmp.TargetUnion = &pb.Compare_ModRevision{ModRevision: near(kv.ModRevision)}
	case pb.Compare_LEASE:
		cmp.TargetUnion = &pb.Compare_Lease{Lease: near(kv.Lease)}
	}
	return cmp
}
