package transport

import "net/netip"

// Sealed is the datagrams a protocol core sealed during a call, with
// their bytes in one buffer the caller reuses: the datagram part of the
// server and client cores' Outputs. The core appends a datagram's bytes to
// Buf after Mark and records it with Push; the adapter writes Datagrams
// after the call, with no lock of the core held.
type Sealed struct {
	// Datagrams are the datagrams to send, in the order they were sealed.
	// Their bytes live in Buf and are valid until Reset.
	Datagrams []Message
	// Buf holds the Datagrams' bytes. A Buf that grows leaves the earlier
	// datagrams in the old array, where they stay valid.
	Buf []byte
}

// Mark returns where the next datagram starts in Buf. The buffer is made,
// with capacity size, on the first datagram, so a Sealed that only ever
// receives has none.
func (s *Sealed) Mark(size int) int {
	if s.Buf == nil {
		s.Buf = make([]byte, 0, size)
	}
	return len(s.Buf)
}

// Push records Buf[start:], just appended, as a datagram to to.
func (s *Sealed) Push(to netip.AddrPort, start int) {
	end := len(s.Buf)
	s.Datagrams = append(s.Datagrams, Message{Buf: s.Buf[start:end:end], Addr: to})
}

// Reset empties s, keeping its buffers and dropping its references into
// an old array.
func (s *Sealed) Reset() {
	clear(s.Datagrams)
	s.Datagrams = s.Datagrams[:0]
	s.Buf = s.Buf[:0]
}
