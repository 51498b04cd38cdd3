//go:build linux

package engine

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
)

// nullConn is a transport.Conn whose sends cost nothing.
type nullConn struct{ sendLog }

func (*nullConn) WriteTo([]byte, netip.AddrPort) error           { return nil }
func (*nullConn) WriteBatch(ms []transport.Message) (int, error) { return len(ms), nil }

// BenchmarkHeldTrain is the policy's own cost per train of 8 answers, the
// socket's aside: with the dispatch each train starts, and without. Its
// cpu-ns/op is the process's CPU time, the dispatch goroutines' included.
func BenchmarkHeldTrain(b *testing.B) {
	for _, dispatch := range []bool{true, false} {
		b.Run(fmt.Sprint("dispatch=", dispatch), func(b *testing.B) {
			defer SetDispatch(true)
			SetDispatch(dispatch)
			w := newHeldWriter(&nullConn{})
			defer close(w.stop)
			m := []transport.Message{{Buf: make([]byte, 100), Addr: heldPeer}}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				now := time.Now()
				w.h.Received(8, now)
				for range 8 {
					w.turn.Take(w.stop, nil)
					_ = w.h.Send(m, false, now, nil)
					w.turn.Give()
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
