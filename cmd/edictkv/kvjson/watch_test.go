package kvjson_test

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/edictlog/edictlog/cmd/edictkv/kvjson"
)

// A watch stream's lines as the server writes them: the names are the
// contract, as TestWireNames pins the other bodies.
func TestWatchLineWire(t *testing.T) {
	v := "x"
	stamp := kvjson.StampJSON{Epoch: 1, QT: []kvjson.ReadingJSON{}, Counter: 2, Token: "AQ"}
	for _, c := range []struct {
		line kvjson.WatchLine
		wire string
	}{
		{kvjson.WatchLine{Revision: 5, Events: []kvjson.EventJSON{
			{Type: kvjson.EventPut, KV: kvjson.KVJSON{Key: "a", Value: &v, CreateIndex: 3, ModIndex: 5, Version: 2, Stamp: stamp},
				Prev: &kvjson.KVJSON{Key: "a", ValueBase64: "/w==", CreateIndex: 3, ModIndex: 3, Version: 1, Stamp: stamp}},
			{Type: kvjson.EventDelete, KV: kvjson.KVJSON{Key: "b", ModIndex: 5, Stamp: stamp}},
		}}, `{"revision":5,"events":[` +
			`{"type":"put","kv":{"key":"a","value":"x","create_index":3,"mod_index":5,"version":2,"stamp":{"epoch":1,"qt":[],"counter":2,"token":"AQ"}},` +
			`"prev":{"key":"a","value_base64":"/w==","create_index":3,"mod_index":3,"version":1,"stamp":{"epoch":1,"qt":[],"counter":2,"token":"AQ"}}},` +
			`{"type":"delete","kv":{"key":"b","create_index":0,"mod_index":5,"version":0,"stamp":{"epoch":1,"qt":[],"counter":2,"token":"AQ"}}}]}`},
		{kvjson.WatchLine{Revision: 9, Progress: true}, `{"revision":9,"progress":true}`},
		{kvjson.WatchLine{Revision: 9, Error: &kvjson.ErrorJSON{Error: "gone", Code: kvjson.CodeCompacted, CompactRevision: 12}},
			`{"revision":9,"error":{"error":"gone","code":"compacted","compact_revision":12}}`},
	} {
		b, err := json.Marshal(c.line)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.wire {
			t.Fatalf("encodes as\n%s\nwant\n%s", b, c.wire)
		}
		back, err := kvjson.DecodeWatchLine(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		again, _ := json.Marshal(back)
		if string(again) != c.wire {
			t.Fatalf("decodes and encodes again as %s", again)
		}
	}
}

// DecodeWatchLine refuses every line that is not one of the three kinds
// or whose events do not fit its revision.
func TestDecodeWatchLineRefuses(t *testing.T) {
	put := func(key string, create, mod, version uint64) string {
		return `{"type":"put","kv":{"key":"` + key + `","value":"v","create_index":` + u(create) + `,"mod_index":` + u(mod) + `,"version":` + u(version) + `}}`
	}
	for _, c := range []struct{ name, line string }{
		{"empty", ``},
		{"not an object", `[1]`},
		{"two values", `{"revision":1,"progress":true} {}`},
		{"truncated", `{"revision":1,"progre`},
		{"no kind", `{"revision":3}`},
		{"two kinds", `{"revision":3,"progress":true,"events":[` + put("a", 3, 3, 1) + `]}`},
		{"progress and error", `{"revision":3,"progress":true,"error":{"code":"x"}}`},
		{"revision 0", `{"revision":0,"progress":true}`},
		{"events at 0", `{"revision":0,"events":[` + put("a", 0, 0, 1) + `]}`},
		{"error without code", `{"revision":3,"error":{"error":"x"}}`},
		{"other revision", `{"revision":4,"events":[` + put("a", 3, 3, 1) + `]}`},
		{"empty key", `{"revision":3,"events":[` + put("", 3, 3, 1) + `]}`},
		{"put version 0", `{"revision":3,"events":[` + put("a", 3, 3, 0) + `]}`},
		{"put created later", `{"revision":3,"events":[` + put("a", 4, 3, 1) + `]}`},
		{"put never created", `{"revision":3,"events":[` + put("a", 0, 3, 1) + `]}`},
		{"delete with value", `{"revision":3,"events":[{"type":"delete","kv":{"key":"a","value":"v","mod_index":3}}]}`},
		{"delete with version", `{"revision":3,"events":[{"type":"delete","kv":{"key":"a","mod_index":3,"version":1}}]}`},
		{"unknown type", `{"revision":3,"events":[{"type":"PUT","kv":{"key":"a","create_index":3,"mod_index":3,"version":1}}]}`},
		{"negative revision", `{"revision":-1,"progress":true}`},
	} {
		if l, err := kvjson.DecodeWatchLine([]byte(c.line)); err == nil {
			t.Errorf("%s: %s decodes as %+v", c.name, c.line, l)
		}
	}
}

func u(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// WatchDecoder reads a stream line by line, checks the order of the
// lines, tells a cut-short last line from a clean end, and reads nothing
// after an error line.
func TestWatchDecoder(t *testing.T) {
	ev := func(rev string) string {
		return `{"revision":` + rev + `,"events":[{"type":"put","kv":{"key":"a","create_index":2,"mod_index":` + rev + `,"version":1}}]}` + "\n"
	}
	read := func(stream string, maxLine int) ([]kvjson.WatchLine, error) {
		d := kvjson.NewWatchDecoder(strings.NewReader(stream), maxLine)
		var out []kvjson.WatchLine
		for {
			l, err := d.Next()
			if err != nil {
				return out, err
			}
			out = append(out, l)
		}
	}
	lines, err := read(`{"revision":2,"progress":true}`+"\n"+ev("3")+ev("5")+`{"revision":5,"progress":true}`+"\n", 0)
	if !errors.Is(err, io.EOF) || len(lines) != 4 || lines[2].Revision != 5 {
		t.Fatalf("a good stream: %d lines, %v", len(lines), err)
	}
	if lines, err := read(ev("3")+ev("3"), 0); err == nil || len(lines) != 1 {
		t.Fatalf("a revision repeated: %d lines, %v", len(lines), err)
	}
	if lines, err := read(ev("5")+`{"revision":4,"progress":true}`+"\n", 0); err == nil || len(lines) != 1 {
		t.Fatalf("a progress going back: %d lines, %v", len(lines), err)
	}
	if lines, err := read(ev("3")+`{"revision":3,"events":[{"ty`, 0); !errors.Is(err, io.ErrUnexpectedEOF) || len(lines) != 1 {
		t.Fatalf("a line cut short: %d lines, %v", len(lines), err)
	}
	if lines, err := read(ev("3")+`{"revision":3,"error":{"error":"e","code":"compacted"}}`+"\n"+ev("4"), 0); !errors.Is(err, kvjson.ErrWatchEnded) || len(lines) != 2 {
		t.Fatalf("after an error line: %d lines, %v", len(lines), err)
	}
	long := `{"revision":3,"progress":true,"pad":"` + strings.Repeat("x", 100<<10) + `"}` + "\n"
	if lines, err := read(long+ev("4"), 0); err != nil && !errors.Is(err, io.EOF) || len(lines) != 2 {
		t.Fatalf("a line longer than the read buffer: %d lines, %v", len(lines), err)
	}
	if lines, err := read(long, 1<<10); err == nil || errors.Is(err, io.EOF) || len(lines) != 0 {
		t.Fatalf("a line over the bound: %d lines, %v", len(lines), err)
	}
}

// FuzzWatchDecoder: any bytes give lines that each pass DecodeWatchLine
// and encode back to lines that decode the same, and an error, never a
// panic, for the rest.
func FuzzWatchDecoder(f *testing.F) {
	f.Add([]byte(`{"revision":2,"progress":true}` + "\n" +
		`{"revision":3,"events":[{"type":"put","kv":{"key":"a","value":"x","create_index":3,"mod_index":3,"version":1,"stamp":{"epoch":1,"qt":[{"process":1,"incarnation":1,"nanos":5}],"counter":1,"token":"AQ"}}}]}` + "\n" +
		`{"revision":4,"events":[{"type":"delete","kv":{"key":"a","mod_index":4},"prev":{"key":"a","value_base64":"/w==","create_index":3,"mod_index":3,"version":1}}]}` + "\n" +
		`{"revision":4,"error":{"error":"compacted","code":"compacted","compact_revision":6}}` + "\n"))
	f.Add([]byte(`{"revision":1,"progress":true}{"revision":2,"progress":true}` + "\n"))
	f.Add([]byte("\n\n{}\n"))
	f.Add([]byte(`{"revision":3,"events":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := kvjson.NewWatchDecoder(strings.NewReader(string(b)), 4<<10)
		var last uint64
		for range 1000 {
			l, err := d.Next()
			if err != nil {
				return
			}
			if l.Error == nil && len(l.Events) > 0 && l.Revision <= last {
				t.Fatalf("events at %d after %d", l.Revision, last)
			}
			if l.Error == nil {
				last = l.Revision
			}
			enc, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			back, err := kvjson.DecodeWatchLine(enc)
			if err != nil {
				t.Fatalf("%s decodes, encodes as %s, which does not: %v", b, enc, err)
			}
			again, _ := json.Marshal(back)
			if string(again) != string(enc) {
				t.Fatalf("%s and %s", enc, again)
			}
		}
	})
}
