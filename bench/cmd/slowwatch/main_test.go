package main

import (
	"bytes"
	"testing"
	"time"
)

func TestStampRoundTrip(t *testing.T) {
	val := make([]byte, 32)
	due := time.Unix(1_800_000_000, 123_456_789)
	stamp(val, 3, due)
	phase, got, err := readStamp(val)
	if err != nil || phase != 3 || !got.Equal(due) {
		t.Fatalf("readStamp = %d, %v, %v; want 3, %v, nil", phase, got, err, due)
	}
	if _, _, err := readStamp(val[:stampBytes-1]); err == nil {
		t.Fatal("readStamp of a short value: want an error")
	}
	val[1] = 0x80 // beyond int64's nanoseconds
	if _, _, err := readStamp(val); err == nil {
		t.Fatal("readStamp of an out-of-range time: want an error")
	}
}

func FuzzReadStamp(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, stampBytes))
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	ok := make([]byte, 16)
	stamp(ok, 7, time.Unix(1, 2))
	f.Add(ok)
	f.Fuzz(func(t *testing.T, val []byte) {
		phase, due, err := readStamp(val)
		if err != nil {
			return
		}
		again := bytes.Clone(val)
		stamp(again, phase, due)
		if !bytes.Equal(again[:stampBytes], val[:stampBytes]) {
			t.Fatalf("stamp(readStamp(%x)) = %x", val[:stampBytes], again[:stampBytes])
		}
	})
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tedictkv\nVmPeak:\t 1000 kB\nVmRSS:\t   51200 kB\nRssAnon:\t   20480 kB\nRssFile:\t 30720 kB\n"
	rss, anon, err := parseStatus(status)
	if err != nil || rss != 50<<20 || anon != 20<<20 {
		t.Fatalf("parseStatus = %d, %d, %v; want %d, %d, nil", rss, anon, err, 50<<20, 20<<20)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t10 kB\n", "VmRSS:\tten kB\nRssAnon:\t1 kB\n", "VmRSS:\t10 MB\nRssAnon:\t1 kB\n"} {
		if _, _, err := parseStatus(bad); err == nil {
			t.Errorf("parseStatus(%q): want an error", bad)
		}
	}
}

func TestParseHeapAlloc(t *testing.T) {
	profile := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 999\n# TotalAlloc = 5\n# HeapAlloc = 4194304\n# HeapSys = 8\n"
	n, err := parseHeapAlloc(profile)
	if err != nil || n != 4<<20 {
		t.Fatalf("parseHeapAlloc = %d, %v; want %d, nil", n, err, 4<<20)
	}
	for _, bad := range []string{"", "# HeapAlloc = x\n", "# HeapAlloc = -5\n", "\x1f\x8b binary"} {
		if _, err := parseHeapAlloc(bad); err == nil {
			t.Errorf("parseHeapAlloc(%q): want an error", bad)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := newHistogram()
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, time.Second}} {
		got := h.quantile(c.q)
		// a bucket is 2% wide: its upper edge is within 2% above the sample
		if got < c.want || float64(got) > float64(c.want)*histGrowth {
			t.Errorf("quantile(%v) = %v; want within [%v, %v]", c.q, got, c.want, time.Duration(float64(c.want)*histGrowth))
		}
	}
	o := newHistogram()
	o.add(0)
	o.merge(h)
	if o.n != 1001 || o.quantile(0) != time.Microsecond {
		t.Errorf("merged: n %d, min bucket %v; want 1001, 1µs", o.n, o.quantile(0))
	}
	if newHistogram().quantile(0.5) != 0 {
		t.Error("quantile of an empty histogram: want 0")
	}
}

func TestQuantile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 200; i++ {
		s = append(s, time.Duration(i))
	}
	if q := quantile(s, 0.99); q != 198 {
		t.Errorf("p99 of 1..200 = %v; want 198", q)
	}
	if q := quantile(s, 0.5); q != 100 {
		t.Errorf("p50 of 1..200 = %v; want 100", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("quantile of nothing = %v; want 0", q)
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{{"/a/", "/a0"}, {"a\xff", "b"}, {"\xff\xff", "\x00"}} {
		if got := string(prefixEnd(c.in)); got != c.want {
			t.Errorf("prefixEnd(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

func TestStuckHeap(t *testing.T) {
	r := &results{phases: []*phaseResult{
		{n: 1, heapAfter: 10 << 20, heapGone: 10<<20 + 4<<10},
		{n: 2, stuck: true, heapAfter: 11 << 20, heapGone: 11<<20 - 200<<10},
		{n: 3, heapAfter: 12 << 20, heapGone: 12<<20 - 8<<10},
		{n: 4, stuck: true, heapAfter: 11 << 20, heapGone: 11<<20 + 50<<10},
	}}
	if h, ok := r.stuckHeap(); !ok || h != 200<<10 {
		t.Errorf("stuckHeap = %d, %v; want %d, true (the larger of 200 KiB and -50 KiB)", h, ok, 200<<10)
	}
	if n := r.heapNoise(); n != 8<<10 {
		t.Errorf("heapNoise = %d; want %d (the larger move of a base phase's two readings)", n, 8<<10)
	}
	none := &results{phases: []*phaseResult{{n: 1}, {n: 2, stuck: true}}}
	if _, ok := none.stuckHeap(); ok {
		t.Error("stuckHeap without heap readings: want not measured")
	}
	if n := none.heapNoise(); n != -1 {
		t.Errorf("heapNoise without heap readings = %d; want -1", n)
	}
}

func TestWatchGauges(t *testing.T) {
	metrics := "# HELP edictkv_watchers watchers\n# TYPE edictkv_watchers gauge\n" +
		"edictkv_watchers{state=\"parked\"} 1\nedictkv_watchers{state=\"synced\"} 999\n" +
		"edictkv_watch_parked_events 1\netcd_debugging_mvcc_pending_events_total 0\n"
	want := `edictkv_watchers{state="parked"} 1, edictkv_watch_parked_events 1, etcd_debugging_mvcc_pending_events_total 0`
	if got := watchGauges(metrics); got != want {
		t.Errorf("watchGauges = %q; want %q", got, want)
	}
	if got := watchGauges("go_goroutines 12\n"); got != "" {
		t.Errorf("watchGauges without watch gauges = %q; want empty", got)
	}
}
