package transport

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

const benchBatch = 64

// benchPair is a sender and a receiver on 127.0.0.1.
func benchPair(b *testing.B, wrap func(*net.UDPConn) Conn) (tx, rx Conn) {
	b.Helper()
	rc := listenUDP(b, "udp4", "127.0.0.1:0")
	SetBuffers(rc, socketBuffer)
	tc := listenUDP(b, "udp4", "127.0.0.1:0")
	SetBuffers(tc, socketBuffer)
	tx, rx = wrap(tc), wrap(rc)
	b.Cleanup(func() { tx.Close(); rx.Close() })
	return tx, rx
}

func outBatch(n, size int, c Conn) []Message {
	ms := make([]Message, n)
	for i := range ms {
		ms[i] = Message{Buf: make([]byte, size), Addr: addrOfB(c)}
	}
	return ms
}

func addrOfB(c Conn) netip.AddrPort { return addrOf(nil, c) }

func pktsPerSec(b *testing.B, pkts int) {
	b.ReportMetric(float64(pkts)/b.Elapsed().Seconds(), "pkts/s")
}

// readN reads n datagrams from rx using batches of len(ms).
func readN(b *testing.B, rx Conn, ms []Message, n int) {
	for n > 0 {
		for i := range ms {
			ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
		}
		k, err := rx.ReadBatch(ms[:min(len(ms), n)])
		if err != nil {
			b.Fatal(err)
		}
		n -= k
	}
}

// BenchmarkWriteTo sends one datagram per call.
func BenchmarkWriteTo(b *testing.B) {
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			tx, rx := benchPair(b, k.wrap)
			p, dst := make([]byte, 100), addrOfB(rx)
			b.ReportAllocs()
			for b.Loop() {
				if err := tx.WriteTo(p, dst); err != nil {
					b.Fatal(err)
				}
			}
			pktsPerSec(b, b.N)
		})
	}
}

// BenchmarkWriteBatch sends benchBatch datagrams per call.
func BenchmarkWriteBatch(b *testing.B) {
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			tx, rx := benchPair(b, k.wrap)
			ms := outBatch(benchBatch, 100, rx)
			b.ReportAllocs()
			for b.Loop() {
				if n, err := tx.WriteBatch(ms); err != nil || n != len(ms) {
					b.Fatal(n, err)
				}
			}
			pktsPerSec(b, b.N*benchBatch)
		})
	}
}

// BenchmarkReadBatch times only the reads of benchBatch queued datagrams.
func BenchmarkReadBatch(b *testing.B) {
	for _, k := range kinds[:2] {
		b.Run(k.name, func(b *testing.B) {
			tx, rx := benchPair(b, k.wrap)
			out := outBatch(benchBatch, 100, rx)
			in := newMsgs(benchBatch)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				if _, err := tx.WriteBatch(out); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				readN(b, rx, in, benchBatch)
			}
			pktsPerSec(b, b.N*benchBatch)
		})
	}
}

// BenchmarkLoopback sends and receives benchBatch datagrams per op, batched
// (one WriteBatch, ReadBatch of up to 64) or single (WriteTo and ReadBatch
// of one at a time).
func BenchmarkLoopback(b *testing.B) {
	for _, k := range kinds {
		for _, mode := range []string{"batch", "single"} {
			if !k.batched && mode == "batch" {
				continue // the fallbacks are single whatever is asked
			}
			b.Run(k.name+"/"+mode, func(b *testing.B) {
				tx, rx := benchPair(b, k.wrap)
				out := outBatch(benchBatch, 100, rx)
				in := newMsgs(benchBatch)
				if mode == "single" {
					in = in[:1]
				}
				b.ReportAllocs()
				for b.Loop() {
					if mode == "batch" {
						if _, err := tx.WriteBatch(out); err != nil {
							b.Fatal(err)
						}
					} else {
						for i := range out {
							if err := tx.WriteTo(out[i].Buf, out[i].Addr); err != nil {
								b.Fatal(err)
							}
						}
					}
					readN(b, rx, in, benchBatch)
				}
				pktsPerSec(b, b.N*benchBatch)
			})
		}
	}
}

// BenchmarkXNetReadBatch is golang.org/x/net/ipv4's ReadBatch, for
// comparison: it allocates for every message's address.
func BenchmarkXNetReadBatch(b *testing.B) {
	rc := listenUDP(b, "udp4", "127.0.0.1:0")
	defer rc.Close()
	tx := New(listenUDP(b, "udp4", "127.0.0.1:0"))
	defer tx.Close()
	out := outBatch(benchBatch, 100, New(rc))
	pc := ipv4.NewPacketConn(rc)
	in := make([]ipv4.Message, benchBatch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, MaxDatagram)}
	}
	_ = rc.SetReadDeadline(time.Time{})
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := tx.WriteBatch(out); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for got := 0; got < benchBatch; {
			n, err := pc.ReadBatch(in[:benchBatch-got], 0)
			if err != nil {
				b.Fatal(err)
			}
			got += n
		}
	}
	pktsPerSec(b, b.N*benchBatch)
}
