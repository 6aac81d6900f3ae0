package wire

import (
	"testing"
)

func TestMessageAddress(t *testing.T) {
	m := Message{}
	if err := m.Address(1, 2); err != nil || m.From != 1 || m.To != 2 {
		t.Fatalf("a blank envelope: %v, from %v to %v; want nil, from p1 to p2", err, m.From, m.To)
	}
	if err := (&Message{From: 1, To: 2}).Address(1, 2); err != nil {
		t.Fatalf("an envelope that names the send: %v", err)
	}
	for _, m := range []Message{{From: 3}, {To: 3}} {
		if err := m.Address(1, 2); err == nil {
			t.Errorf("envelope from %v to %v sent by p1 to p2: accepted", m.From, m.To)
		}
	}
}
