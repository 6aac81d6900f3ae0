package gossip

import (
	"strings"
	"testing"

	"github.com/edictlog/edictlog/edict"
	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTripAndLimits(t *testing.T) {
	t.Parallel()
	m := Meta{ID: 3, Epoch: 7, TransportAddr: "10.0.0.3:7000", APIAddr: "10.0.0.3:8080", Leader: 1}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMeta(b)
	if err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// The largest metadata the limits allow still fits memberlist's.
	big := Meta{ID: edict.ProcessID(^uint64(0)), Epoch: ^uint64(0), TransportAddr: strings.Repeat("é", MaxAddrLen/2), APIAddr: strings.Repeat("x", MaxAddrLen), Leader: edict.ProcessID(^uint64(0))}
	b, err = big.Encode()
	if err != nil || len(b) > memberlist.MetaMaxSize {
		t.Fatalf("largest metadata: %d bytes, %v", len(b), err)
	}
	t.Logf("typical metadata %d bytes, largest %d (limit %d)", len(mustEncode(t, m)), len(b), memberlist.MetaMaxSize)
	for _, bad := range []Meta{{}, {ID: 1, APIAddr: strings.Repeat("x", MaxAddrLen+1)}, {ID: 1, TransportAddr: "\xff"}} {
		if _, err := bad.Encode(); err == nil {
			t.Errorf("encoded invalid metadata %+v", bad)
		}
	}
	for _, bad := range [][]byte{nil, {2}, append([]byte{MetaVersion}, 0xc1), append(mustEncode(t, m), 0)} {
		if _, err := DecodeMeta(bad); err == nil {
			t.Errorf("decoded %x", bad)
		}
	}
}

func mustEncode(t testing.TB, m Meta) []byte {
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(mustEncode(f, Meta{ID: 3, Epoch: 7, TransportAddr: "10.0.0.3:7000", APIAddr: "10.0.0.3:8080", Leader: 1}))
	f.Add(mustEncode(f, Meta{ID: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			return
		}
		b2, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", m, err)
		}
		if m2, err := DecodeMeta(b2); err != nil || m2 != m {
			t.Fatalf("round trip %+v → %+v, %v", m, m2, err)
		}
	})
}
