package server

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// Output is what calls into a Server did that the adapter must act on: the
// datagrams to send and the log records to write. The core only appends to
// it, so one Output may collect the work of many calls (a reader's whole
// batch, say) and be acted on once; the caller empties it with Reset. It
// belongs to one goroutine at a time, and the caller reuses it: its
// buffers grow to the most one round needed and are then kept, so a
// Server in steady state allocates nothing.
//
// The adapter sends the Datagrams and logs the Records (Server.Log) after
// the call returns: no lock of the core is held then, so neither a slow
// socket nor a slow log handler holds up other clients.
type Output struct {
	// Sealed holds the Datagrams to send, in the order they were sealed.
	// Their bytes live in the Output and are valid until its Reset.
	transport.Sealed
	// Records are the log records, in order.
	Records []Record
}

// Reset empties o, keeping its buffers.
func (o *Output) Reset() {
	o.Sealed.Reset()
	clear(o.Records)
	o.Records = o.Records[:0]
}

// Empty reports whether o holds nothing to act on.
func (o *Output) Empty() bool { return len(o.Datagrams) == 0 && len(o.Records) == 0 }

// outputBuf is the first capacity of an Output's buffer: room for what a
// Send seals (a keep-alive and the largest packet); a call that seals more
// grows it once.
const outputBuf = 2 * protocol.MaxPacketBytes

// Record is one log record the core made: plain values, so that making it
// costs nothing (hostile input makes some), and formatted only by
// Server.Log, after the core's locks are released, if the logger wants
// its level.
type Record struct {
	Level slog.Level
	Msg   string
	// Addr is the peer's address; the zero value for a loopback client.
	Addr netip.AddrPort
	// Client is the client's slot and id, when Connected is set.
	Index     int
	ID        uint64
	Connected bool
	// Why is the reason, or "".
	Why string
}

// record appends a record about the datagram from addr.
func (o *Output) record(level slog.Level, msg string, addr netip.AddrPort, why string) {
	o.Records = append(o.Records, Record{Level: level, Msg: msg, Addr: addr, Why: why})
}

// recordClient appends a record about connected client c.
func (o *Output) recordClient(level slog.Level, msg string, c *Client, why string) {
	o.Records = append(o.Records, Record{Level: level, Msg: msg, Addr: c.addr, Index: c.index, ID: c.id, Connected: true, Why: why})
}

// Log writes out's records to the server's logger and forgets them. Call
// it after the call that made them returned, with no lock of the core
// held (the adapter's job; see Output).
func (s *Server) Log(out *Output) {
	for i := range out.Records {
		r := &out.Records[i]
		if !s.log.Enabled(context.Background(), r.Level) {
			continue
		}
		var attrs [4]slog.Attr
		a := attrs[:0]
		if r.Connected {
			a = append(a, slog.Int("index", r.Index), slog.Uint64("id", r.ID))
		}
		if r.Addr.IsValid() {
			key := "from"
			if r.Connected {
				key = "addr"
			}
			a = append(a, slog.String(key, r.Addr.String()))
		}
		if r.Why != "" {
			a = append(a, slog.String("why", r.Why))
		}
		s.log.LogAttrs(context.Background(), r.Level, r.Msg, a...)
	}
	clear(out.Records)
	out.Records = out.Records[:0]
}
