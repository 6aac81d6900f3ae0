package simstate

import (
	"math/rand/v2"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/kvstate"
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/fsm"
	"github.com/edictlog/edictlog/internal/sim"
)

func stampAt(i uint64) edict.Stamp {
	return edict.Stamp{Epoch: 1, Counter: i,
		QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: int64(i)}}, {Process: 2, T: edict.Time{Incarnation: 1, Nanos: int64(i) + 1}}}}
}

// replica is one state on a Disk driven as the simulator drives it, with
// no log around it: entries applied in turn and shown to the checker,
// crashes that reopen the store at what it committed and hand it the
// entries after that again.
type replica struct {
	t       *testing.T
	c       *Checker
	d       *Disk
	m       Machine
	log     [][]byte
	applied uint64
	lost    int // entries crashes lost (applied, not committed)
}

func newReplica(t *testing.T, c *Checker, rng *rand.Rand) *replica {
	r := &replica{t: t, c: c, d: NewDisk(storeOptions(1+rng.IntN(16), 1+rng.IntN(4), 1+rng.IntN(4), 1+rng.IntN(8)))}
	r.open()
	return r
}

func (r *replica) open() {
	r.t.Helper()
	st, err := r.d.Open()
	if err != nil {
		r.t.Fatal(err)
	}
	r.m = st.(Machine)
	r.lost += int(r.applied - r.m.AppliedIndex())
	if err := r.c.Started(1, r.m, r.m.AppliedIndex()); err != nil {
		r.t.Fatalf("start at %d: %v", r.m.AppliedIndex(), err)
	}
	for i := r.m.AppliedIndex() + 1; i <= r.applied; i++ {
		r.apply(i, r.log[i-1])
	}
}

func (r *replica) apply(i uint64, data []byte) any {
	r.t.Helper()
	e := fsm.Entry{Index: i, Stamp: stampAt(i), Data: data}
	res := r.m.Apply(e)
	if err := r.c.Applied(1, r.m, e, res); err != nil {
		r.t.Fatalf("apply %d: %v", i, err)
	}
	return res
}

func (r *replica) append(data []byte) any {
	r.log = append(r.log, data)
	r.applied++
	return r.apply(r.applied, data)
}

func (r *replica) crash() {
	r.d.Crash()
	r.open()
}

// run draws n operations of the workload and carries them out, with
// syncs, log entries of the log's own and crashes among them.
func (r *replica) run(rng *rand.Rand, n int) {
	r.t.Helper()
	for range n {
		switch x := rng.IntN(40); {
		case x == 0:
			r.crash()
		case x == 1:
			if _, err := r.m.Sync(); err != nil {
				r.t.Fatal(err)
			}
		case x < 4:
			r.append(nil)
		default:
			op := r.c.Op(rng)
			if op.Command == nil {
				if err := op.Read(r.m, r.applied); err != nil {
					r.t.Fatalf("read: %v", err)
				}
				continue
			}
			res := r.append(op.Command)
			if err := op.Done(r.applied, res); err != nil {
				r.t.Fatalf("answer: %v", err)
			}
		}
	}
	if err := r.c.End(map[edict.ProcessID]sim.ModelState{1: {State: r.m, Applied: r.applied}}); err != nil {
		r.t.Fatalf("end: %v", err)
	}
}

// TestModelAgreesWithTheState runs the workload against one state
// without the simulator: the model and the state agree on every answer,
// every revision and every read, crashes included. It is the ground the
// simulator's runs stand on, and shows the workload reaches what it is
// meant to (compactions that take, refusals, txns down both branches).
func TestModelAgreesWithTheState(t *testing.T) {
	var compacted, refused, failed, txns, lost int
	var ws watchStats
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		c := NewChecker(seed)
		r := newReplica(t, c, rng)
		r.run(rng, 600)
		lost += r.lost
		ws.add(c.WatchStats())
		for _, e := range c.m.entries[1:] {
			switch {
			case e.want.kind == kvstate.KindCompaction && e.want.err == nil:
				compacted++
			case e.want.err != nil:
				refused++
			case e.want.kind == kvstate.KindTxn:
				txns++
				if tr, ok := e.want.resp.(*pb.TxnResponse); ok && !tr.Succeeded {
					failed++
				}
			}
		}
	}
	t.Logf("%d compactions, %d refusals, %d txns (%d down the failure branch), %d entries lost in crashes; %v", compacted, refused, txns, failed, lost, ws)
	if compacted < 20 || refused < 20 || txns < 100 || failed < 20 || failed == txns || lost == 0 {
		t.Fatalf("the workload misses what it is for: %d compactions, %d refusals, %d txns (%d failed), %d entries lost in crashes",
			compacted, refused, txns, failed, lost)
	}
	if ws.Events < 1000 || ws.Progress == 0 || ws.Compacted == 0 || ws.Cancels == 0 || ws.Crashes == 0 || ws.Moves == 0 || ws.Resumes == 0 || ws.MaxParked == 0 {
		t.Fatalf("the watch clients miss what they are for: %v", ws)
	}
}

// TestCheckerCatches shows each kind of check failing on a replica that
// differs from the model: a changed answer, a changed revision, history
// lost below the current revision, a read of the wrong revision.
func TestCheckerCatches(t *testing.T) {
	put := func(k, v string) []byte {
		b, err := (&kvstate.Request{Put: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	setup := func() *replica {
		c := NewChecker(1)
		r := newReplica(t, c, rand.New(rand.NewPCG(1, 1)))
		r.append(put("w/a", "1"))
		r.append(put("w/a", "2"))
		r.append(put("w/b", "3"))
		return r
	}
	expect := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want an error naming %q", err, want)
		}
	}

	r := setup()
	e := fsm.Entry{Index: 4, Stamp: stampAt(4), Data: put("w/c", "4")}
	res := r.m.Apply(e).(*kvstate.Result)
	res.Put.Header.Revision = 9
	expect(r.c.Applied(1, r.m, e, res), "the model's")

	r = setup()
	e = fsm.Entry{Index: 4, Stamp: stampAt(4), Data: put("w/c", "4")}
	res = r.m.Apply(e).(*kvstate.Result)
	expect(r.c.Applied(1, r.m, fsm.Entry{Index: 4, Stamp: stampAt(5), Data: e.Data}, res), "stamp")

	// A replica that applied a different entry at an index: its history
	// is not the committed log's.
	r = setup()
	other := NewChecker(1)
	o := newReplica(t, other, rand.New(rand.NewPCG(1, 1)))
	o.append(put("w/a", "1"))
	o.append(put("w/a", "X"))
	o.append(put("w/b", "3"))
	expect(r.c.Started(1, o.m, 3), `key "w/a"`)

	// Two replicas that disagree are named.
	expect(r.c.End(map[edict.ProcessID]sim.ModelState{1: {State: r.m, Applied: 3}, 2: {State: o.m, Applied: 3}}), "p1 and p2 disagree at revision 3")

	// A read checked against the wrong applied index.
	r = setup()
	expect(r.c.checkRead(r.m, 2, &pb.RangeRequest{Key: []byte("w/a")}), "the model")
}
