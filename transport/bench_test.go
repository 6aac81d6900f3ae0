package transport

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// benchPair starts two transports on loopback; p2 drains its inbox.
func benchPair(b *testing.B, files func(id edict.ProcessID) *TLSFiles) (*TCP, <-chan int) {
	b.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes [2]*TCP
	for i := range nodes {
		id := edict.ProcessID(i + 1)
		cfg := TCPConfig{ID: id, ClusterID: "bench", BindAddr: "127.0.0.1:0", Logger: quiet}
		if files != nil {
			cfg.TLS = files(id)
		}
		tr, err := NewTCP(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tr.Close() })
		nodes[i] = tr
	}
	nodes[0].AddPeer(2, nodes[1].LocalAddr())
	got := make(chan int, 1)
	go func() {
		n := 0
		for range nodes[1].Receive() {
			n++
			if n == b.N {
				got <- n
			}
		}
	}()
	return nodes[0], got
}

func benchSend(b *testing.B, tr *TCP, got <-chan int, m wire.Message) {
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := tr.Send(ctx, 2, m); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-got:
	case <-time.After(30 * time.Second):
		b.Fatal("messages did not all arrive")
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
}

// BenchmarkTCPLease: lease messages per second over loopback TCP.
func BenchmarkTCPLease(b *testing.B) {
	tr, got := benchPair(b, nil)
	m := wire.LeaseMessage(wiretest.Lease(1, 2))
	f, _ := encodeMessageFrame(m, DefaultMaxFrameSize)
	benchSend(b, tr, got, m)
	b.ReportMetric(float64(len(f)), "bytes/msg")
}

// BenchmarkTCPAppend64x256: appends of 64 entries of 256 bytes each, with
// the default window of 64 appends in flight.
func BenchmarkTCPAppend64x256(b *testing.B) {
	tr, got := benchPair(b, nil)
	m := wire.Message{Append: wiretest.Append(0, 64, 256)}
	f, _ := encodeMessageFrame(wire.Message{From: 1, To: 2, Append: m.Append}, DefaultMaxFrameSize)
	b.SetBytes(int64(len(f)))
	benchSend(b, tr, got, m)
	b.ReportMetric(float64(len(f)), "bytes/append")
}

// BenchmarkTCPAppend64x256TLS: the same over mutual TLS 1.3.
func BenchmarkTCPAppend64x256TLS(b *testing.B) {
	ca := newTestCA(b, "bench")
	tr, got := benchPair(b, func(id edict.ProcessID) *TLSFiles { return ca.issue(b, id.String()) })
	m := wire.Message{Append: wiretest.Append(0, 64, 256)}
	f, _ := encodeMessageFrame(wire.Message{From: 1, To: 2, Append: m.Append}, DefaultMaxFrameSize)
	b.SetBytes(int64(len(f)))
	benchSend(b, tr, got, m)
	b.ReportMetric(float64(len(f)), "bytes/append")
}

func BenchmarkEncodeAppend64x256(b *testing.B) {
	m := wire.Message{From: 1, To: 2, Append: wiretest.Append(0, 64, 256)}
	b.ReportAllocs()
	for range b.N {
		if _, err := encodeMessageFrame(m, DefaultMaxFrameSize); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeAppend64x256(b *testing.B) {
	f, _ := encodeMessageFrame(wire.Message{From: 1, To: 2, Append: wiretest.Append(0, 64, 256)}, DefaultMaxFrameSize)
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	for range b.N {
		if _, err := decodeMessage(f[frameHeaderSize:]); err != nil {
			b.Fatal(err)
		}
	}
}
