// Package core holds the I/O-free Cute Protocol client and server: the
// state machines of cute_net.h's cn_protocol_client and cn_protocol_server,
// packet for packet, with the safety the C code lacks. They own no
// goroutine, socket or clock: the adapter feeds them datagrams and the
// current time, and every call reports what happened in an Output the
// caller passes in (datagrams to send, state changes or events, payloads,
// when to call Update next). Neither calls out or logs: the adapter acts on
// the Output after the call returns.
//
// Time: durations are measured on the monotonic clock of the time.Time
// values passed in; only token expiry reads their wall clock (Unix
// seconds), as the C code compares it with the Unix time.
//
// Randomness: every challenge is drawn from crypto/rand, and every
// secretbox IV of a connection from a ChaCha8 generator seeded from
// crypto/rand (ivSource). Tests reproduce recorded runs by replacing the
// source from inside this package (export_test.go), which then gives the
// IVs too; nothing outside it can.
package core

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"net/netip"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/gonetcode/netcode/internal/transport"
)

// Protocol timing and counts, as in cute_net.h.
const (
	// SendRate is CN_PROTOCOL_SEND_RATE: the interval of connect token and
	// challenge resends, of the server's challenge requests and of
	// keepalives on both sides. The C constant is the float 0.1f.
	SendRate = 100 * time.Millisecond
	// DisconnectPackets is how many redundant DISCONNECT packets either side
	// sends.
	DisconnectPackets = 10
)

// entropy fills b with random bytes. Production cores use systemEntropy.
type entropy func(b []byte)

// systemEntropy draws from crypto/rand, which does not fail (it crashes
// the program if the system's generator is unusable).
func systemEntropy(b []byte) { _, _ = rand.Read(b) }

// ivSource draws the secretbox IVs of a client, or of a server's client
// slot, under that one's lock. libhydrogen draws an IV from its own
// generator (a Gimli ratchet seeded from the system); this is math/rand/v2's
// ChaCha8, a cryptographically strong generator that erases its key as it
// goes, seeded from the core's entropy at the first draw. A draw of 20
// bytes costs it about 16 ns against crypto/rand's 60 (two per echo at one
// payload in flight). The IV is never sent: it only makes each box's SIV
// differ, and the SIV construction stays misuse-resistant whatever it is.
type ivSource struct {
	g *mrand.ChaCha8 // nil until the first draw
}

// draw fills iv from s's generator, seeding it from r at the first draw,
// or straight from r when direct (a test's recorded draws, in order).
func (s *ivSource) draw(r entropy, direct bool, iv *wire.IV) {
	if direct {
		r(iv[:])
		return
	}
	if s.g == nil {
		var seed [32]byte
		r(seed[:])
		s.g = mrand.NewChaCha8(seed)
		clear(seed[:])
	}
	_, _ = s.g.Read(iv[:])
}

// outBuf is an Output buffer's starting capacity: room for the ten
// disconnect packets or a few large payloads.
const outBuf = 4 * wire.MaxPacketBytes

// datagrams is the part of an Output both cores share: the datagrams to
// send (Datagrams, in order, valid until the Output's next use, of the
// type a batched socket write takes), whose bytes live in one reused
// buffer, as the netcode cores' Outputs hold theirs.
type datagrams struct {
	transport.Sealed
}

// reset empties d for a new call, keeping its memory.
func (d *datagrams) reset() { d.Sealed.Reset() }

// mark returns the buffer to append the next datagram to, and where the
// datagram starts in it.
func (d *datagrams) mark() ([]byte, int) {
	start := d.Mark(outBuf)
	return d.Buf, start
}

// push records buf[start:], just appended to the buffer mark returned, as
// a datagram to to.
func (d *datagrams) push(buf []byte, start int, to netip.AddrPort) {
	d.Buf = buf
	d.Push(to, start)
}
