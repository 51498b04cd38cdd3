package endpoint

import (
	"bytes"
	"testing"
)

func FuzzPacketHeader(f *testing.F) {
	f.Add([]byte{0x3e, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0x20, 0x2c, 0x01, 0x01, 0x00})
	f.Add([]byte{0x1e, 5, 0, 0x05, 0xff, 1, 2, 3, 4})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, ok := readPacketHeader(b)
		if !ok {
			return
		}
		if n < minPacketHeaderBytes || n > MaxPacketHeaderBytes || n > len(b) {
			t.Fatalf("header length %d of %d bytes", n, len(b))
		}
		// The canonical encoding decodes to the same header.
		var c [MaxPacketHeaderBytes]byte
		m := putPacketHeader(c[:], h.sequence, h.ack, h.ackBits)
		h2, n2, ok := readPacketHeader(c[:m])
		if !ok || n2 != m || h2 != h {
			t.Fatalf("%x: decoded %+v, re-encoded %x decodes to %+v", b, h, c[:m], h2)
		}
	})
}

func FuzzFragmentHeader(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 0x3e, 0, 0, 1, 0, 0, 0, 0, 7})
	f.Add([]byte{1, 0, 0, 1, 1, 7, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxFragments, fragmentSize = 16, 64
		fh, ok := readFragmentHeader(b, maxFragments, fragmentSize)
		if !ok {
			return
		}
		if fh.count < 1 || fh.count > maxFragments || fh.id >= fh.count || fh.dataBytes < 0 || fh.dataBytes > fragmentSize {
			t.Fatalf("%x: accepted %+v", b, fh)
		}
		if FragmentHeaderBytes+fh.headerBytes+fh.dataBytes != len(b) {
			t.Fatalf("%x: sizes %+v do not add up", b, fh)
		}
		if (fh.id == 0) != (fh.headerBytes > 0) {
			t.Fatalf("%x: embedded header on fragment %d", b, fh.id)
		}
	})
}

// FuzzReassembly feeds arbitrary datagrams, cut from the input at 0xFF
// 0x00 markers, into an endpoint with small limits: it must never panic
// nor deliver more than its maximum. Then a real fragmented packet is sent
// through in an order and with losses chosen by the input: it is never
// delivered twice and, unless the junk claimed its sequence first, it is
// delivered intact, and only if every fragment arrived.
func FuzzReassembly(f *testing.F) {
	f.Add([]byte{1, 2, 0, 0, 3, 0xff, 0x00, 1, 2, 0, 1, 3, 9}, []byte{0, 1, 2, 3}, uint16(100))
	f.Add([]byte{0x3e, 0, 0, 1, 0, 0, 0, 0, 5}, []byte{3, 2, 1, 0, 0}, uint16(65535))
	f.Fuzz(func(t *testing.T, junk, order []byte, seq uint16) {
		cfg := Config{MaxPacketSize: 64, FragmentAbove: 16, MaxFragments: 4, FragmentSize: 16, FragmentReassemblyBufferSize: 4}
		var got [][]byte
		cfg.Process = func(_ uint16, p []byte) bool {
			if len(p) > 64 {
				t.Fatalf("delivered %d bytes over the maximum", len(p))
			}
			got = append(got, bytes.Clone(p))
			return true
		}
		r, err := New(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range bytes.Split(junk, []byte{0xff, 0x00}) {
			r.ReceivePacket(d)
		}
		// Junk that claimed the real packet's sequence (a fragment of it,
		// or the packet itself) owns it, as in the reference: its
		// fragments fill the reassembly first and later ones with the same
		// ids are duplicates. Over netcode only the authenticated peer can
		// send such fragments; intact delivery is promised for a fresh
		// sequence only.
		claimed := r.received.exists(seq) || r.reassembly.find(seq) != nil

		var frags [][]byte
		scfg := cfg
		scfg.Process = nil
		scfg.Transmit = func(_ uint16, p []byte) { frags = append(frags, bytes.Clone(p)) }
		s, err := New(scfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.sequence = seq
		payload := make([]byte, 50)
		for i := range payload {
			payload[i] = byte(i*13 + int(seq))
		}
		if err := s.SendPacket(payload); err != nil {
			t.Fatal(err)
		}
		got = nil
		seen := make([]bool, len(frags))
		for _, o := range order {
			i := int(o) % (len(frags) + 1)
			if i == len(frags) {
				continue // a loss
			}
			seen[i] = true
			r.ReceivePacket(frags[i])
		}
		complete := true
		for _, s := range seen {
			complete = complete && s
		}
		if len(got) > 1 {
			t.Fatalf("delivered %d times", len(got))
		}
		if claimed {
			return
		}
		if len(got) == 1 && !bytes.Equal(got[0], payload) {
			t.Fatalf("delivered %x, sent %x", got[0], payload)
		}
		if len(got) == 1 && !complete {
			t.Fatal("delivered with a fragment missing")
		}
	})
}
