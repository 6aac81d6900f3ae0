package mvcc

import (
	"fmt"
	"testing"
)

// BenchmarkWatchPut is one put per write transaction on a memory backend
// (no fsync, so that the watchers' share shows), cycling over 1,000 keys
// w/0000/k … w/0999/k, with watchers on ten streams read every 256 puts
// (the reads outside the timer; WatchStep inside it, as the background loop
// would run it): none; one on a single key; one on every key; 1,000 on the
// single keys; 1,000 on the prefixes w/NNNN/; 1,000 on the single keys, one
// of them on a stream never read (parked before the timer starts). It
// reports ns/put; compare the cases with none measured in the same run.
func BenchmarkWatchPut(b *testing.B) {
	const keys = 1000
	key := func(i int) []byte { return fmt.Appendf(nil, "w/%04d/k", i) }
	for _, c := range []struct {
		name     string
		watchers int
		prefix   bool
		all      bool
		stuck    bool
	}{
		{name: "none"},
		{name: "one-key", watchers: 1},
		{name: "one-every-key", watchers: 1, all: true},
		{name: "keys-1000", watchers: keys},
		{name: "prefixes-1000", watchers: keys, prefix: true},
		{name: "keys-1000-one-stuck", watchers: keys, stuck: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := newMemStore(b, Options{WatchBuffer: 1024})
			defer s.Close()
			value := make([]byte, 128)
			idx := uint64(0)
			putKey := func(i int) {
				idx++
				tw, err := s.Write(idx)
				if err != nil {
					b.Fatal(err)
				}
				tw.Put(key(i%keys), value, 0, PutOptions{})
				tw.End()
			}
			for i := range keys {
				putKey(i)
			}
			var read []*WatchStream
			for range 10 {
				read = append(read, s.NewWatchStream())
			}
			for i := range c.watchers {
				ws := read[i%10]
				k, end := key(i), []byte(nil)
				switch {
				case c.all:
					k, end = []byte("w/"), []byte("w0")
				case c.prefix:
					k = fmt.Appendf(nil, "w/%04d/", i)
					end = fmt.Appendf(nil, "w/%04d0", i)
				}
				if c.stuck && i == 0 {
					ws = s.NewWatchStream()
				}
				if _, err := ws.Watch(AutoWatchID, k, end, 0); err != nil {
					b.Fatal(err)
				}
			}
			if c.stuck {
				// Fill the stuck stream's channel and park one response.
				for range 1025 {
					putKey(0)
				}
				if st := s.WatchStats(); st.Parked != 1 {
					b.Fatalf("the stuck watcher did not park: %+v", st)
				}
				for _, ws := range read {
					drain(ws)
				}
			}
			b.ResetTimer()
			for n := range b.N {
				putKey(n)
				if n%256 == 255 {
					if _, err := s.WatchStep(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					for _, ws := range read {
						drain(ws)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/put")
			if st := s.WatchStats(); c.stuck && st.Parked != 1 || !c.stuck && st.Parked != 0 || st.Unsynced != 0 {
				b.Fatalf("watchers fell behind: %+v", st)
			}
		})
	}
}
