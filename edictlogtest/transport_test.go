package edictlogtest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/edictlogtest"
	"github.com/edictlog/edictlog/wire"
)

// pairOf attaches transports for processes 1 and 2, each knowing the other.
func pairOf(t *testing.T, cfg edictlogtest.NetworkConfig) (*edictlogtest.Network, *edictlogtest.Transport, *edictlogtest.Transport) {
	t.Helper()
	n := edictlogtest.NewNetwork(cfg)
	t.Cleanup(n.Close)
	a, err := n.NewTransport(1, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.NewTransport(2, "")
	if err != nil {
		t.Fatal(err)
	}
	a.AddPeer(2, b.LocalAddr())
	b.AddPeer(1, a.LocalAddr())
	return n, a, b
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// readIndex is a small valid control message whose ID tells messages apart.
func readIndex(id uint64) wire.Message {
	return wire.Message{ReadIndex: &wire.ReadIndexRequest{Epoch: 1, ID: id}}
}

var reign = edict.Stamp{Epoch: 1, QT: edict.QT{{Process: 1, T: edict.Time{Incarnation: 1, Nanos: 5}}}, Counter: 1}

// appendOf is a valid bulk message carrying one entry with data.
func appendOf(prev uint64, data []byte) wire.Message {
	return wire.Message{Append: &wire.Append{Epoch: 1, Reign: reign, PrevIndex: prev,
		Entries: []wire.Entry{{Index: prev + 1, Reign: reign, Stamp: reign, Kind: wire.EntryCommand, Data: data}}}}
}

func recv(t *testing.T, ctx context.Context, tr *edictlogtest.Transport) wire.Message {
	t.Helper()
	select {
	case m, ok := <-tr.Receive():
		if !ok {
			t.Fatal("Receive closed")
		}
		return m
	case <-ctx.Done():
		t.Fatal("nothing received")
	}
	return wire.Message{}
}

// nothing checks that no message is waiting (without waiting for any).
func nothing(t *testing.T, tr *edictlogtest.Transport) {
	t.Helper()
	select {
	case m := <-tr.Receive():
		t.Fatalf("received %v", m)
	default:
	}
}

func TestSendDeliversACopy(t *testing.T) {
	ctx := ctxFor(t)
	_, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	data := []byte("payload")
	m := appendOf(0, data)
	if err := a.Send(ctx, 2, m); err != nil {
		t.Fatal(err)
	}
	copy(data, "XXXXXXX") // the sender reuses its payload
	m.Append.Entries[0].Index = 99
	got := recv(t, ctx, b)
	if got.From != 1 || got.To != 2 {
		t.Fatalf("envelope %v→%v, want 1→2", got.From, got.To)
	}
	if e := got.Append.Entries[0]; e.Index != 1 || string(e.Data) != "payload" {
		t.Fatalf("received entry %d %q: the sender's later changes reached the receiver", e.Index, e.Data)
	}
}

func TestSendRefuses(t *testing.T) {
	ctx := ctxFor(t)
	_, a, _ := pairOf(t, edictlogtest.NetworkConfig{})
	if err := a.Send(ctx, 2, wire.Message{}); err == nil {
		t.Fatal("an empty message was sent")
	}
	if err := a.Send(ctx, 2, wire.Message{ReadIndex: &wire.ReadIndexRequest{}}); err == nil {
		t.Fatal("an invalid message (read index without id) was sent")
	}
	m := readIndex(1)
	m.From = 3
	if err := a.Send(ctx, 2, m); err == nil {
		t.Fatal("a message from another process was sent")
	}
	if err := a.Send(ctx, 9, readIndex(1)); !errors.Is(err, edictlogtest.ErrUnknownPeer) {
		t.Fatalf("send to a process without an address: %v, want ErrUnknownPeer", err)
	}
	a.Close()
	if err := a.Send(ctx, 2, readIndex(1)); !errors.Is(err, edictlogtest.ErrClosed) {
		t.Fatalf("send on a closed transport: %v", err)
	}
}

func TestSendToSelf(t *testing.T) {
	ctx := ctxFor(t)
	_, a, _ := pairOf(t, edictlogtest.NetworkConfig{})
	if err := a.Send(ctx, 1, readIndex(5)); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ctx, a); m.ReadIndex.ID != 5 || m.From != 1 || m.To != 1 {
		t.Fatalf("received %v", m)
	}
}

// Control messages queued behind appends are handed out first.
func TestControlBeforeBulk(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	for i := range uint64(10) {
		if err := a.Send(ctx, 2, appendOf(i, []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Send(ctx, 2, readIndex(1)); err != nil {
		t.Fatal(err)
	}
	// Wait until all eleven are in b's inbox (the runtime has not taken
	// any yet), so that the order of delivery is the inbox's choice.
	waitFor(t, ctx, func() bool { return n.Stats(1, 2).Delivered == 11 })
	var kinds []wire.Kind
	for range 11 {
		m := recv(t, ctx, b)
		kinds = append(kinds, m.Kind())
	}
	// The inbox's drainer may already hold one append on its way out.
	if kinds[0] != wire.KindReadIndex && kinds[1] != wire.KindReadIndex {
		t.Fatalf("the control message came out behind the appends: %v", kinds)
	}
}

func waitFor(t *testing.T, ctx context.Context, f func() bool) {
	t.Helper()
	for !f() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached")
		case <-time.After(time.Millisecond):
		}
	}
}

// Random delays do not reorder one lane: messages arrive in the order sent.
func TestDelayKeepsLaneOrder(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	n.Delay(1, 2, 0, 3*time.Millisecond)
	const k = 200
	go func() {
		for i := uint64(1); i <= k; i++ {
			if err := a.Send(ctx, 2, readIndex(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := uint64(1); i <= k; i++ {
		if m := recv(t, ctx, b); m.ReadIndex.ID != i {
			t.Fatalf("message %d arrived in place of %d", m.ReadIndex.ID, i)
		}
	}
	if l := n.Link(1, 2); l.MaxDelay != 3*time.Millisecond {
		t.Fatalf("link %+v", l)
	}
}

func TestCutOneWayAndHeal(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	n.Cut(1, 2)
	if err := a.Send(ctx, 2, readIndex(1)); err != nil {
		t.Fatal(err) // lost, not refused: the sender cannot tell
	}
	if err := b.Send(ctx, 1, readIndex(2)); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ctx, a); m.ReadIndex.ID != 2 {
		t.Fatalf("received %v over the link left up", m)
	}
	if s := n.Stats(1, 2); s.Cut != 1 || s.Delivered != 0 {
		t.Fatalf("stats over the cut link: %+v", s)
	}
	n.Heal()
	if err := a.Send(ctx, 2, readIndex(3)); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ctx, b); m.ReadIndex.ID != 3 {
		t.Fatalf("received %v after the heal: the message sent over the cut arrived", m)
	}
}

func TestPartitionAndIsolate(t *testing.T) {
	ctx := ctxFor(t)
	n := edictlogtest.NewNetwork(edictlogtest.NetworkConfig{})
	t.Cleanup(n.Close)
	tr := map[edict.ProcessID]*edictlogtest.Transport{}
	for id := edict.ProcessID(1); id <= 4; id++ {
		x, err := n.NewTransport(id, "")
		if err != nil {
			t.Fatal(err)
		}
		tr[id] = x
	}
	for id, x := range tr {
		for o := range tr {
			if o != id {
				x.AddPeer(o, edictlogtest.DefaultAddr(o))
			}
		}
	}
	n.Partition([]edict.ProcessID{1, 2}, []edict.ProcessID{3})
	connected := func(from, to edict.ProcessID) bool { return !n.Link(from, to).Cut }
	for _, c := range []struct {
		from, to edict.ProcessID
		want     bool
	}{{1, 2, true}, {2, 1, true}, {1, 3, false}, {3, 1, false}, {2, 3, false}, {3, 2, false}, {1, 4, true}, {4, 3, true}} {
		if got := connected(c.from, c.to); got != c.want {
			t.Errorf("after Partition({1,2},{3}) link %v→%v connected=%v, want %v", c.from, c.to, got, c.want)
		}
	}
	n.Heal()
	n.Isolate(4)
	for id := edict.ProcessID(1); id <= 3; id++ {
		if connected(id, 4) || connected(4, id) {
			t.Errorf("isolated 4 still linked with %v", id)
		}
	}
	if !connected(1, 2) {
		t.Error("Isolate(4) cut 1→2")
	}
	if err := tr[4].Send(ctx, 1, readIndex(1)); err != nil {
		t.Fatal(err)
	}
	n.Rejoin(4)
	if err := tr[4].Send(ctx, 1, readIndex(2)); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ctx, tr[1]); m.ReadIndex.ID != 2 {
		t.Fatalf("received %v", m)
	}
}

// A message in flight when its link is cut is lost.
func TestCutLosesMessagesInFlight(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	// Delayed for an hour, so that it is surely in flight when cut: the
	// cut loses it at once, as a connection breaks.
	n.Delay(1, 2, time.Hour, time.Hour)
	if err := a.Send(ctx, 2, readIndex(1)); err != nil {
		t.Fatal(err)
	}
	n.Cut(1, 2)
	waitFor(t, ctx, func() bool { return n.Stats(1, 2).Cut == 1 })
	n.Heal()
	if err := a.Send(ctx, 2, readIndex(2)); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ctx, b); m.ReadIndex.ID != 2 {
		t.Fatalf("received %v: the message in flight over the cut arrived", m)
	}
}

func TestDrop(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{Seed: 7})
	n.Drop(1, 2, 1)
	for i := uint64(1); i <= 50; i++ {
		if err := a.Send(ctx, 2, readIndex(i)); err != nil {
			t.Fatal(err)
		}
	}
	if s := n.Stats(1, 2); s.Dropped != 50 {
		t.Fatalf("with Drop 1: %+v", s)
	}
	nothing(t, b)
	n.Drop(1, 2, 0.5)
	const k = 400
	for i := uint64(1); i <= k; i++ {
		if err := a.Send(ctx, 2, readIndex(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, func() bool { s := n.Stats(1, 2); return s.Delivered+s.Dropped == 50+k })
	s := n.Stats(1, 2)
	// Binomial(400, 0.5): below 100 or above 300 is a 1e-23 event.
	if dropped := s.Dropped - 50; dropped < 100 || dropped > 300 {
		t.Fatalf("Drop 0.5 lost %d of %d", dropped, k)
	}
	last := uint64(0)
	for range s.Delivered {
		m := recv(t, ctx, b)
		if m.ReadIndex.ID <= last {
			t.Fatalf("message %d after %d", m.ReadIndex.ID, last)
		}
		last = m.ReadIndex.ID
	}
}

// The window bounds the appends in flight to a peer that does not read:
// Send with a done context is then refused, as TCP's is.
func TestWindowIsBounded(t *testing.T) {
	_, a, _ := pairOf(t, edictlogtest.NetworkConfig{AppendWindow: 4})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	var err error
	sent := 0
	for ; sent < 10000 && err == nil; sent++ {
		err = a.Send(done, 2, appendOf(uint64(sent), []byte("x")))
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after %d appends to a receiver that never reads: %v, want a refusal wrapping context.Canceled", sent, err)
	}
	// Control messages have their own queue, and are not held back.
	if err := a.Send(done, 2, readIndex(1)); err != nil {
		t.Fatalf("a control message behind a full window: %v", err)
	}
}

func TestCloseFreesTheAddress(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	if _, err := n.NewTransport(2, b.LocalAddr()); err == nil {
		t.Fatal("two open transports at one address")
	}
	b.Close()
	b.Close()
	if _, ok := <-b.Receive(); ok {
		t.Fatal("Receive open after Close")
	}
	if _, ok := <-b.Snapshots(); ok {
		t.Fatal("Snapshots open after Close")
	}
	if err := a.Send(ctx, 2, readIndex(1)); err != nil {
		t.Fatal(err) // lost: no one is there
	}
	b2, err := n.NewTransport(2, b.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx, 2, readIndex(2)); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ctx, b2); m.ReadIndex.ID != 2 {
		t.Fatalf("the restarted process received %v", m)
	}
}

// A process that moves is reached at its new address once the sender
// learns it (AddPeer), and not before.
func TestAddressChange(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	b.Close()
	b2, err := n.NewTransport(2, "mem:2-moved")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(ctx, 2, readIndex(1)); err != nil {
		t.Fatal(err)
	}
	if s := n.Stats(1, 2); s.Unreachable != 1 {
		t.Fatalf("stats of a send to the old address: %+v", s)
	}
	a.AddPeer(2, b2.LocalAddr())
	if got, _ := a.PeerAddr(2); got != "mem:2-moved" {
		t.Fatalf("PeerAddr %q", got)
	}
	if err := a.Send(ctx, 2, readIndex(2)); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, ctx, b2); m.ReadIndex.ID != 2 {
		t.Fatalf("received %v", m)
	}
	// Another process's address is not this one's: the message is lost.
	a.AddPeer(3, b2.LocalAddr())
	if err := a.Send(ctx, 3, readIndex(3)); err != nil {
		t.Fatal(err)
	}
	nothing(t, b2)
	a.RemovePeer(2)
	if err := a.Send(ctx, 2, readIndex(4)); !errors.Is(err, edictlogtest.ErrUnknownPeer) {
		t.Fatalf("send to a removed peer: %v", err)
	}
}

func header(size int64) wire.SnapshotHeader {
	return wire.SnapshotHeader{Epoch: 1, Reign: reign, LastIndex: 10, LastStamp: reign, Members: []edict.ProcessID{1, 2}, Size: size}
}

// sendSnapshot sends src declared as size bytes from a to 2, in a
// goroutine; the error arrives on the channel.
func sendSnapshot(ctx context.Context, a *edictlogtest.Transport, size int64, src io.Reader) <-chan error {
	out := make(chan error, 1)
	go func() { out <- a.SendSnapshot(ctx, 2, header(size), src) }()
	return out
}

func takeSnapshot(t *testing.T, ctx context.Context, b *edictlogtest.Transport) *wire.IncomingSnapshot {
	t.Helper()
	select {
	case in := <-b.Snapshots():
		return in
	case <-ctx.Done():
		t.Fatal("no snapshot arrived")
	}
	return nil
}

func TestSnapshotStream(t *testing.T) {
	ctx := ctxFor(t)
	_, a, b := pairOf(t, edictlogtest.NetworkConfig{SnapshotChunkSize: 4096})
	data := make([]byte, 1<<20+17)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	res := sendSnapshot(ctx, a, int64(len(data)), bytes.NewReader(data))
	in := takeSnapshot(t, ctx, b)
	if in.From != 1 || in.Header.Size != int64(len(data)) || in.Header.LastIndex != 10 {
		t.Fatalf("incoming %v %+v", in.From, in.Header)
	}
	got, err := io.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the stream's bytes differ")
	}
	in.Finish(nil)
	if err := <-res; err != nil {
		t.Fatalf("sender: %v", err)
	}
}

// A source shorter or longer than its header says never reaches the
// receiver as a whole stream.
func TestSnapshotWrongSize(t *testing.T) {
	for _, c := range []struct {
		name     string
		declared int64
		actual   int
	}{{"short", 10000, 9000}, {"long", 10000, 10001}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t)
			_, a, b := pairOf(t, edictlogtest.NetworkConfig{SnapshotChunkSize: 1000})
			res := sendSnapshot(ctx, a, c.declared, bytes.NewReader(make([]byte, c.actual)))
			in := takeSnapshot(t, ctx, b)
			_, err := io.ReadAll(in)
			if err == nil {
				t.Fatal("the receiver read a whole stream")
			}
			in.Finish(err)
			if err := <-res; err == nil {
				t.Fatal("the sender reports success")
			}
		})
	}
}

func TestSnapshotRefused(t *testing.T) {
	ctx := ctxFor(t)
	_, a, b := pairOf(t, edictlogtest.NetworkConfig{SnapshotChunkSize: 100})
	res := sendSnapshot(ctx, a, 10000, bytes.NewReader(make([]byte, 10000)))
	in := takeSnapshot(t, ctx, b)
	if _, err := in.Read(make([]byte, 50)); err != nil {
		t.Fatal(err)
	}
	in.Finish(errors.New("no room"))
	if err := <-res; !errors.Is(err, edictlogtest.ErrSnapshotRejected) {
		t.Fatalf("sender: %v, want ErrSnapshotRejected", err)
	}
	// Finishing with success before the end is a refusal too.
	res = sendSnapshot(ctx, a, 10000, bytes.NewReader(make([]byte, 10000)))
	in = takeSnapshot(t, ctx, b)
	in.Finish(nil)
	if err := <-res; !errors.Is(err, edictlogtest.ErrSnapshotRejected) {
		t.Fatalf("sender after an early Finish(nil): %v", err)
	}
}

func TestSnapshotFaults(t *testing.T) {
	ctx := ctxFor(t)
	// No one takes it: the receiver is busy.
	_, busy, _ := pairOf(t, edictlogtest.NetworkConfig{SnapshotTakeTimeout: 10 * time.Millisecond})
	if err := <-sendSnapshot(ctx, busy, 10, bytes.NewReader(make([]byte, 10))); !errors.Is(err, edictlogtest.ErrSnapshotRejected) {
		t.Fatalf("busy receiver: %v", err)
	}
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{SnapshotChunkSize: 100})
	n.Cut(1, 2)
	if err := <-sendSnapshot(ctx, a, 10, bytes.NewReader(make([]byte, 10))); !errors.Is(err, edictlogtest.ErrUnreachable) {
		t.Fatalf("over a cut link: %v", err)
	}
	n.Heal()
	n.Drop(1, 2, 1)
	if err := <-sendSnapshot(ctx, a, 10, bytes.NewReader(make([]byte, 10))); !errors.Is(err, edictlogtest.ErrUnreachable) {
		t.Fatalf("over a link that drops everything: %v", err)
	}
	n.Heal()
	// Cut in the middle of the stream.
	res := sendSnapshot(ctx, a, 10000, bytes.NewReader(make([]byte, 10000)))
	in := takeSnapshot(t, ctx, b)
	if _, err := io.ReadFull(in, make([]byte, 500)); err != nil {
		t.Fatal(err)
	}
	n.Cut(1, 2)
	_, err := io.ReadAll(in)
	if err == nil {
		t.Fatal("the receiver read the whole stream across a cut")
	}
	in.Finish(err)
	if err := <-res; err == nil {
		t.Fatal("the sender reports success across a cut")
	}
	if s := n.Stats(1, 2); s.Snapshots != 3 || s.SnapshotsFailed != 3 {
		t.Fatalf("stats %+v", s)
	}
	// A stream is a connection: losses on the way back do not touch its
	// result, a cut does (after the receiver acted on it).
	n.Heal()
	n.Drop(2, 1, 1)
	res = sendSnapshot(ctx, a, 300, bytes.NewReader(make([]byte, 300)))
	in = takeSnapshot(t, ctx, b)
	if _, err := io.ReadAll(in); err != nil {
		t.Fatal(err)
	}
	in.Finish(nil)
	if err := <-res; err != nil {
		t.Fatalf("a stream whose way back drops messages: %v", err)
	}
	n.Heal()
	n.Cut(2, 1)
	res = sendSnapshot(ctx, a, 300, bytes.NewReader(make([]byte, 300)))
	in = takeSnapshot(t, ctx, b)
	if _, err := io.ReadAll(in); err != nil {
		t.Fatal(err)
	}
	in.Finish(nil)
	if err := <-res; !errors.Is(err, edictlogtest.ErrUnreachable) {
		t.Fatalf("a stream whose way back is cut: %v, want ErrUnreachable", err)
	}
	// The sender closing ends the stream for the receiver.
	n.Heal()
	res = sendSnapshot(ctx, a, 10000, bytes.NewReader(make([]byte, 10000)))
	in = takeSnapshot(t, ctx, b)
	a.Close()
	if _, err := io.ReadAll(in); err == nil {
		t.Fatal("the receiver read the whole stream of a closed sender")
	}
	if err := <-res; err == nil {
		t.Fatal("a closed sender reports success")
	}
}

type announcement struct {
	id   edict.ProcessID
	addr string
	inc  uint64
}

// A transport announces where it listens, as TCP's hello does: to the
// peers it knows when asked, and on every new connection; never an
// incarnation below one heard, and never over a cut link.
func TestAnnounce(t *testing.T) {
	ctx := ctxFor(t)
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	got := make(chan announcement, 16)
	b.WatchAddresses(func(id edict.ProcessID, addr string, inc uint64) { got <- announcement{id, addr, inc} })
	next := func() announcement {
		t.Helper()
		select {
		case x := <-got:
			return x
		default:
			t.Fatal("no announcement")
		}
		return announcement{}
	}
	none := func() {
		t.Helper()
		select {
		case x := <-got:
			t.Fatalf("announcement %+v", x)
		default:
		}
	}
	if err := a.Send(ctx, 2, readIndex(1)); err != nil {
		t.Fatal(err)
	}
	none() // a never announced
	a.Announce(5)
	if x := next(); x != (announcement{1, a.LocalAddr(), 5}) {
		t.Fatalf("heard %+v", x)
	}
	// A new connection (the bulk lane) announces again.
	if err := a.Send(ctx, 2, appendOf(0, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if x := next(); x.inc != 5 {
		t.Fatalf("heard %+v", x)
	}
	// An earlier life's announcement is ignored.
	a2, err := n.NewTransport(1, "mem:1-old")
	if err != nil {
		t.Fatal(err)
	}
	a2.AddPeer(2, b.LocalAddr())
	a2.Announce(4)
	none()
	a2.Announce(6)
	if x := next(); x != (announcement{1, "mem:1-old", 6}) {
		t.Fatalf("heard %+v", x)
	}
	n.Cut(1, 2)
	a.Announce(7)
	none()
}

func TestNetworkBookkeeping(t *testing.T) {
	n, a, b := pairOf(t, edictlogtest.NetworkConfig{})
	addrs := n.Addrs()
	if len(addrs) != 2 || addrs[1][0] != a.LocalAddr() || addrs[2][0] != b.LocalAddr() {
		t.Fatalf("Addrs %v", addrs)
	}
	for _, l := range []edictlogtest.Link{{Drop: -0.1}, {Drop: 1.5}, {MinDelay: -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SetLink took %+v", l)
				}
			}()
			n.SetLink(1, 2, l)
		}()
	}
	n.SetDefault(edictlogtest.Link{Drop: 0.5})
	n.Delay(1, 2, time.Millisecond, 2*time.Millisecond)
	if l := n.Link(1, 2); l.Drop != 0.5 || l.MinDelay != time.Millisecond {
		t.Fatalf("a link's own faults start from the default's: %+v", l)
	}
	if l := n.Link(2, 1); l.Drop != 0.5 || l.MinDelay != 0 {
		t.Fatalf("the default: %+v", l)
	}
	n.Cut(2, 1)
	n.Uncut(2, 1)
	if l := n.Link(2, 1); l.Cut || l.Drop != 0.5 {
		t.Fatalf("Uncut: %+v", l)
	}
	n.Close()
	if _, ok := <-a.Receive(); ok {
		t.Fatal("a transport outlived its network")
	}
	if _, err := n.NewTransport(3, ""); err == nil {
		t.Fatal("a closed network took a transport")
	}
}

// A receiver that gives up on a stream (Abort) is not held by a sender
// that has stalled: the read waiting for the next chunk fails at once.
func TestSnapshotAbortUnblocksARead(t *testing.T) {
	ctx := ctxFor(t)
	_, a, b := pairOf(t, edictlogtest.NetworkConfig{SnapshotChunkSize: 4096})
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { pw.Write(make([]byte, 8192)) }() // two chunks, then nothing
	sendSnapshot(ctx, a, 1<<20, pr)
	in := takeSnapshot(t, ctx, b)
	if _, err := io.CopyN(io.Discard, in, 8192); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, in)
		read <- err
	}()
	time.Sleep(20 * time.Millisecond)
	in.Abort()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("an aborted stream read to its end")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Abort did not unblock the read")
	}
	in.Finish(errors.New("receiver stopped"))
}
