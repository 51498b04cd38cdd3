package protocol

import (
	"bytes"
	"strconv"
	"testing"
)

var benchSizes = []int{8, 100, 1200}

// BenchmarkWritePayload builds and seals a payload packet into a caller
// buffer.
func BenchmarkWritePayload(b *testing.B) {
	c2s, _ := testKeys()
	buf := make([]byte, 0, MaxPacketBytes)
	for _, n := range benchSizes {
		payload := bytes.Repeat([]byte{0x5a}, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			seq := uint64(1000)
			for b.Loop() {
				buf = AppendPayload(buf[:0], c2s, seq, payload)
				seq++
			}
		})
	}
}

// BenchmarkReadPayload opens and decodes a payload packet in place, with
// replay protection, as a connected server does. Each iteration reads a
// fresh packet: a copy of one sealed beforehand under its own sequence.
func BenchmarkReadPayload(b *testing.B) {
	c2s, _ := testKeys()
	r := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	for _, n := range benchSizes {
		payload := bytes.Repeat([]byte{0x5a}, n)
		// 256 packets with consecutive sequences, replayed with a window
		// reset each lap so that every read passes replay protection.
		var pkts [replayWindow][]byte
		for i := range pkts {
			pkts[i] = AppendPayload(nil, c2s, uint64(i), payload)
		}
		buf := make([]byte, MaxPacketBytes)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			var rp ReplayProtection
			var p Packet
			i := 0
			for b.Loop() {
				if i == len(pkts) {
					i = 0
					rp = ReplayProtection{}
				}
				m := copy(buf, pkts[i])
				if err := r.Read(buf[:m], 0, c2s, &rp, &p); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkRefuse measures how cheaply hostile datagrams are dropped.
func BenchmarkRefuse(b *testing.B) {
	c2s, _ := testKeys()
	r := Reader{ProtocolID: testProtocolID, Allowed: ServerAccepts}
	forged := AppendPayload(nil, c2s, 7, make([]byte, 100))
	forged[len(forged)-1] ^= 1
	cases := []struct {
		name string
		data []byte
	}{
		{"bad type", []byte{0x1f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}},
		{"forged 100B", forged},
	}
	for _, c := range cases {
		buf := make([]byte, len(c.data))
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var p Packet
			for b.Loop() {
				copy(buf, c.data)
				_ = r.Read(buf, 0, c2s, nil, &p)
			}
		})
	}
}

// BenchmarkReadRequest opens a connection request's private token.
func BenchmarkReadRequest(b *testing.B) {
	vs := vectors(b)
	v := vs.ConnectTokens[0]
	r := Reader{ProtocolID: uint64(v.Inputs.ProtocolID), Allowed: ServerAccepts, TokenAEAD: tokenKey(b, v.Inputs.PrivateKey)}
	buf := make([]byte, connectionRequestBytes)
	b.ReportAllocs()
	var p Packet
	for b.Loop() {
		copy(buf, v.ConnectionRequestPacket)
		if err := r.Read(buf, uint64(v.Inputs.CreateTimestamp), nil, nil, &p); err != nil {
			b.Fatal(err)
		}
	}
}
