package kvfsm

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/edictlog/edictlog/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Readers running beside Apply see whole entries: every entry writes "x"
// and "y" together (or deletes both), so a reader that sees them differ has
// seen half a transaction. Run with -race to check the locking too.
func TestReadsConcurrentWithApplySeeWholeEntries(t *testing.T) {
	kv := NewKV()
	const writes = 3000
	entry := func(i uint64) fsm.Entry {
		c := Command{Txn: &Txn{Success: []Op{putOp("x", fmt.Sprint(i)), putOp("y", fmt.Sprint(i)), putOp(fmt.Sprintf("k%d", i%50), "z")}}}
		if i%10 == 0 {
			c = Command{Delete: &Delete{Key: "x", RangeEnd: "z"}}
		}
		b, err := EncodeCommand(c)
		require.NoError(t, err)
		return fsm.Entry{Index: i, Stamp: stampAt(i), Data: b}
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	check := func(name string, read func() (Result, error)) {
		defer wg.Done()
		last := uint64(0)
		for n := 0; ; n++ {
			select {
			case <-done:
				if n == 0 {
					t.Errorf("%s: never read", name)
				}
				return
			default:
			}
			res, err := read()
			if !assert.NoError(t, err) {
				return
			}
			assert.GreaterOrEqual(t, res.Revision, last, "%s: revision went back", name)
			last = res.Revision
			kvs := res.Range.KVs
			switch {
			case len(kvs) == 0:
			case len(kvs) == 2 && kvs[0].Value == kvs[1].Value && kvs[0].ModRevision == kvs[1].ModRevision:
			default:
				t.Errorf("%s: half an entry at revision %d: %+v", name, res.Revision, kvs)
				return
			}
		}
	}
	query, err := EncodeQuery(Range{Key: "x", RangeEnd: "z"})
	require.NoError(t, err)
	wg.Add(4)
	go check("Range", func() (Result, error) { return kv.Range(Range{Key: "x", RangeEnd: "z"}) })
	go check("Query", func() (Result, error) {
		b, err := kv.Query(query)
		if err != nil {
			return Result{}, err
		}
		return DecodeResult(b)
	})
	go check("Get", func() (Result, error) {
		// A point read sees a whole write too: the value written at index
		// i is i. Present it as a two-key result for check.
		res := Result{Revision: kv.Revision(), Range: &RangeResult{}}
		if x, ok := kv.Get("x"); ok {
			if x.Value != fmt.Sprint(x.ModRevision) {
				return Result{}, fmt.Errorf("x = %q written at %d", x.Value, x.ModRevision)
			}
			res.Range.KVs = []KeyValue{x, x}
		}
		return res, nil
	})
	go check("Snapshot", func() (Result, error) {
		s, err := kv.Snapshot()
		if err != nil {
			return Result{}, err
		}
		defer s.Release()
		var buf bytes.Buffer
		if err := s.Persist(&buf); err != nil {
			return Result{}, err
		}
		r := NewKV()
		if err := r.Restore(&buf); err != nil {
			return Result{}, err
		}
		return r.Range(Range{Key: "x", RangeEnd: "z"})
	})

	for i := uint64(1); i <= writes; i++ {
		if i%3 == 0 {
			kv.ApplyBatch([]fsm.Entry{entry(i)})
			continue
		}
		res := kv.Apply(entry(i))
		require.IsType(t, &Result{}, res)
	}
	close(done)
	wg.Wait()
	assert.Equal(t, uint64(writes), kv.Revision())
}
