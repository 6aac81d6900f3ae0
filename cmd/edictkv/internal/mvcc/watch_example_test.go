package mvcc_test

import (
	"fmt"

	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc"
	"github.com/edictlog/edictlog/cmd/edictkv/internal/mvcc/backend"
)

// A server's use of a stream: a watcher per WatchCreateRequest (key and
// range_end as they come, the filters and prev_kv as options), then the
// responses off Chan: events, progress, or a compaction's cancel. Without
// Options.Background the caller runs WatchStep; a server sets Background.
func ExampleWatchStream() {
	s, err := mvcc.Open(backend.NewMemory(), mvcc.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	put := func(index uint64, k, v string) {
		tw, _ := s.Write(index)
		tw.Put([]byte(k), []byte(v), 0, mvcc.PutOptions{})
		tw.End()
	}
	put(1, "a/1", "x") // revision 2
	put(2, "a/1", "y") // revision 3

	ws := s.NewWatchStream()
	defer ws.Close()
	// etcdctl watch --prefix a/ --rev 2 --prev-kv
	id, _ := ws.Watch(mvcc.AutoWatchID, []byte("a/"), []byte("a0"), 2, mvcc.WatchPrevKV)
	s.WatchStep()      // history: revisions 2 and 3
	put(3, "a/2", "z") // revision 4, sent at once
	ws.RequestProgress(id)

	for range 3 {
		r := <-ws.Chan()
		fmt.Printf("watch %d, revision %d:", r.WatchID, r.Revision)
		for _, e := range r.Events {
			fmt.Printf(" %s %s=%s", e.Type, e.Kv.Key, e.Kv.Value)
			if e.PrevKv != nil {
				fmt.Printf(" (was %s)", e.PrevKv.Value)
			}
		}
		fmt.Println()
	}
	// Output:
	// watch 0, revision 3: PUT a/1=x PUT a/1=y (was x)
	// watch 0, revision 4: PUT a/2=z
	// watch 0, revision 4:
}
