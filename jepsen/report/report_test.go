package report

import (
	"encoding/json"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edictlog/edictlog/jepsen/history"
)

// synthetic is a few hundred operations by 5 clients over 10 s, slower and
// less successful during a partition (2–4 s) and a kill (6–7.5 s), with
// one client whose last operation never completes.
func synthetic() []history.Op {
	r := rand.New(rand.NewPCG(1, 2))
	type ev struct {
		t  int64
		op history.Op
	}
	var evs []ev
	add := func(op history.Op) { evs = append(evs, ev{op.Time, op}) }
	add(history.Op{Time: 2e9, Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "partition", Detail: "n1 | n2 n3"})
	add(history.Op{Time: 4e9, Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: "partition"})
	add(history.Op{Time: 6e9, Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "kill", Detail: "n2"})
	add(history.Op{Time: 7.5e9, Process: history.NemesisProcess, Type: history.Info, F: history.FStop, Nemesis: "kill"})
	// The monitor: a leader, none from 6.1 s to 8 s.
	for _, m := range []struct {
		t    int64
		node int
	}{{0, 1}, {6.1e9, 0}, {6.6e9, 0}, {7.1e9, 0}, {7.6e9, 0}, {8e9, 2}} {
		add(history.Op{Time: m.t, Process: history.MonitorProcess, Type: history.Info, F: history.FLeader, Node: m.node})
	}
	fs := []string{history.FRead, history.FWrite, history.FCAS, history.FAdd}
	faulty := func(t int64) bool { return (t >= 2e9 && t < 4e9) || (t >= 6e9 && t < 7.5e9) }
	for proc := range 5 {
		t := int64(r.IntN(50e6))
		for t < 10e9 {
			f := fs[r.IntN(len(fs))]
			add(history.Op{Time: t, Process: proc, Type: history.Invoke, F: f, Node: proc%3 + 1})
			lat := int64(1e6 + r.IntN(20e6))
			typ := history.OK
			if faulty(t) {
				lat = int64(50e6 + r.IntN(400e6))
				switch r.IntN(3) {
				case 0:
					typ = history.Fail
				case 1:
					typ = history.Info
				}
			} else if f == history.FCAS && r.IntN(3) == 0 {
				typ = history.Fail
			}
			if proc == 4 && t+lat > 9.5e9 {
				break // client 4's last operation never completes
			}
			add(history.Op{Time: t + lat, Process: proc, Type: typ, F: f, Node: proc%3 + 1})
			t += lat + int64(50e6+r.IntN(100e6)) // think time
		}
	}
	// Order by time, as a Recorder would, and number the events.
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].t < evs[j-1].t; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	ops := make([]history.Op, len(evs))
	for i, e := range evs {
		ops[i] = e.op
		ops[i].Index = i
	}
	return ops
}

// checkFile checks path is a non-trivial plot, and a valid PNG if it says so.
func checkFile(t *testing.T, path string, minSize int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < minSize {
		t.Errorf("%s: %d bytes, want at least %d", path, fi.Size(), minSize)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if strings.HasSuffix(path, ".png") {
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
			t.Errorf("%s: %v image", path, b)
		}
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "<svg") {
			t.Errorf("%s: not an SVG", path)
		}
	}
}

func TestPlots(t *testing.T) {
	ops := synthetic()
	if n := len(ops); n < 400 || n > 2000 {
		t.Fatalf("synthetic history has only %d events", n)
	}
	if in := history.Intervals(ops); len(in) != 2 {
		t.Fatalf("intervals: %+v", in)
	}
	if g := history.Leaderless(ops); len(g) == 0 {
		t.Fatalf("no leaderless span in %+v", g)
	}
	dir := t.TempDir()
	for _, ext := range []string{".png", ".svg"} {
		lat := filepath.Join(dir, "latency"+ext)
		if err := Latency(ops, lat); err != nil {
			t.Fatal(err)
		}
		checkFile(t, lat, 20_000)
		thr := filepath.Join(dir, "throughput"+ext)
		if err := Throughput(ops, thr, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		checkFile(t, thr, 5_000)
	}
	if dst := os.Getenv("REPORT_PLOT_DIR"); dst != "" { // for looking at them
		for _, n := range []string{"latency.png", "throughput.png", "latency.svg"} {
			b, _ := os.ReadFile(filepath.Join(dir, n))
			os.WriteFile(filepath.Join(dst, n), b, 0o644)
		}
	}
}

func TestEmpty(t *testing.T) {
	dir := t.TempDir()
	onlyPending := []history.Op{{Time: 5, Process: 0, Type: history.Invoke, F: history.FRead}}
	noNemesis := []history.Op{
		{Index: 0, Time: 1e6, Process: 0, Type: history.Invoke, F: history.FWrite},
		{Index: 1, Time: 3e6, Process: 0, Type: history.OK, F: history.FWrite},
	}
	for name, ops := range map[string][]history.Op{"nil": nil, "pending": onlyPending, "nonemesis": noNemesis} {
		for _, ext := range []string{".png", ".svg"} {
			lat := filepath.Join(dir, name+"-latency"+ext)
			if err := Latency(ops, lat); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkFile(t, lat, 1000)
			thr := filepath.Join(dir, name+"-throughput"+ext)
			if err := Throughput(ops, thr, 0); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkFile(t, thr, 1000)
		}
	}
	s := Summary(nil)
	if s.Total != (Outcomes{}) || len(s.ByF) != 0 || len(s.Latency) != 0 || len(s.Faults) != 0 {
		t.Errorf("Summary(nil) = %+v", s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"total":{"invoked":0,"ok":0,"fail":0,"info":0,"incomplete":0},"by_f":{},"latency":{},"faults":{}}`
	if string(b) != want {
		t.Errorf("Summary(nil) JSON = %s, want %s", b, want)
	}
}

func TestBadPath(t *testing.T) {
	dir := t.TempDir()
	if err := Latency(nil, filepath.Join(dir, "x.gif")); err == nil {
		t.Error("Latency to .gif: no error")
	}
	if err := Throughput(nil, filepath.Join(dir, "x"), time.Second); err == nil {
		t.Error("Throughput without an extension: no error")
	}
	if err := Throughput(synthetic(), filepath.Join(dir, "x.png"), time.Nanosecond); err == nil {
		t.Error("Throughput with 1 ns buckets over 10 s: no error")
	}
}

func TestSummary(t *testing.T) {
	var ops []history.Op
	add := func(op history.Op) {
		op.Index = len(ops)
		ops = append(ops, op)
	}
	// 100 OK reads by process 0 taking 1, 2, ..., 100 ms, in a shuffled
	// order; then writes by process 1: 3 OK (10, 20, 30 ms), 2 failed, 1
	// info; a cas by process 2 that fails; an add by process 3 that never
	// completes; and a partition that never ends.
	now := int64(0)
	for i := range 100 {
		ms := int64((i*37)%100 + 1)
		add(history.Op{Time: now, Process: 0, Type: history.Invoke, F: history.FRead})
		now += ms * 1e6
		add(history.Op{Time: now, Process: 0, Type: history.OK, F: history.FRead, Value: history.Int(1)})
	}
	add(history.Op{Time: now, Process: history.NemesisProcess, Type: history.Info, F: history.FStart, Nemesis: "partition"})
	add(history.Op{Time: now, Process: 3, Type: history.Invoke, F: history.FAdd, Value: history.Int(7)})
	for _, w := range []struct {
		typ history.Type
		ms  int64
	}{{history.OK, 10}, {history.Fail, 1}, {history.OK, 30}, {history.Info, 500}, {history.Fail, 2}, {history.OK, 20}} {
		add(history.Op{Time: now, Process: 1, Type: history.Invoke, F: history.FWrite})
		add(history.Op{Time: now + 1, Process: 2, Type: history.Invoke, F: history.FCAS})
		add(history.Op{Time: now + 2, Process: 2, Type: history.Fail, F: history.FCAS})
		now += w.ms * 1e6
		add(history.Op{Time: now, Process: 1, Type: w.typ, F: history.FWrite})
	}
	add(history.Op{Time: now + 5, Process: 2, Type: history.OK, F: history.FCAS}) // unpaired: ignored

	s := Summary(ops)
	want := map[string]Outcomes{
		history.FRead:  {Invoked: 100, OK: 100},
		history.FWrite: {Invoked: 6, OK: 3, Fail: 2, Info: 1},
		history.FCAS:   {Invoked: 6, Fail: 6},
		history.FAdd:   {Invoked: 1, Incomplete: 1},
	}
	if len(s.ByF) != len(want) {
		t.Errorf("ByF = %+v", s.ByF)
	}
	for f, w := range want {
		if s.ByF[f] != w {
			t.Errorf("ByF[%s] = %+v, want %+v", f, s.ByF[f], w)
		}
	}
	if w := (Outcomes{Invoked: 113, OK: 103, Fail: 8, Info: 1, Incomplete: 1}); s.Total != w {
		t.Errorf("Total = %+v, want %+v", s.Total, w)
	}
	wantLat := map[string]Percentiles{
		history.FRead:  {Count: 100, P50: 50, P90: 90, P99: 99, Max: 100},
		history.FWrite: {Count: 3, P50: 20, P90: 30, P99: 30, Max: 30},
	}
	if len(s.Latency) != len(wantLat) {
		t.Errorf("Latency = %+v", s.Latency)
	}
	for f, w := range wantLat {
		if s.Latency[f] != w {
			t.Errorf("Latency[%s] = %+v, want %+v", f, s.Latency[f], w)
		}
	}
	if len(s.Faults) != 1 || s.Faults["partition"] != 1 {
		t.Errorf("Faults = %+v", s.Faults)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"by_f"`, `"p50_ms":50`, `"p99_ms":99`, `"max_ms":100`, `"incomplete":1`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON %s lacks %s", b, k)
		}
	}
}
