package layer

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// vectorPath is the path of a vectors file of Cute Framework's
// client/server layer.
func vectorPath(name string) string { return vectortest.CutePath("transport/" + name) }

// ackVectors is ack.json.
type ackVectors struct {
	Cases []struct {
		Name  string    `json:"name"`
		Steps []ackStep `json:"steps"`
	} `json:"cases"`
	PacketLossBulk struct {
		Trace []struct {
			AfterSent  int     `json:"after_sent"`
			Loss       float64 `json:"packet_loss"`
			AckedTotal uint64  `json:"acked_total"`
			BwIn       float64 `json:"incoming_bandwidth_kbps"`
		} `json:"trace"`
	} `json:"packet_loss_bulk"`
	AssertionsFired []any `json:"assertions_fired"`
}

type ackStep struct {
	Op           string          `json:"op"`
	Side         string          `json:"side"`
	PayloadSize  int             `json:"payload_size"`
	Payload      vectortest.Hex  `json:"payload"`
	Result       string          `json:"result"`
	Error        string          `json:"error"`
	SequenceOut  *uint16         `json:"sequence_out"`
	PacketSize   int             `json:"packet_size"`
	Packet       *vectortest.Hex `json:"packet"`
	PacketHeader vectortest.Hex  `json:"packet_header"`
	NewAcks      []uint16        `json:"new_acks"`
	DT           float64         `json:"dt"`
	BwIn         *float64        `json:"incoming_bandwidth_kbps"`
	State        *struct {
		NextSequence           uint16            `json:"next_sequence"`
		SentBufferSequence     uint16            `json:"sent_buffer_sequence"`
		ReceivedBufferSequence uint16            `json:"received_buffer_sequence"`
		NextHeaderAck          uint16            `json:"next_header_ack"`
		NextHeaderAckBits      uint32            `json:"next_header_ack_bits"`
		PendingAcks            []uint16          `json:"pending_acks"`
		Counters               map[string]uint64 `json:"counters"`
		Time                   float64           `json:"time"`
		RTT                    float64           `json:"rtt_ms"`
		Loss                   float64           `json:"packet_loss"`
	} `json:"state"`
}

// counterNames are the C names of the counters, in order.
var counterNames = [numCounters]string{
	"PACKETS_SENT", "PACKETS_RECEIVED", "PACKETS_ACKED", "PACKETS_STALE",
	"PACKETS_INVALID", "PACKETS_TOO_LARGE_TO_SEND", "PACKETS_TOO_LARGE_TO_RECEIVE",
}

// ackErrors are the C error strings of the ack system's verdicts.
var ackErrors = map[ackStatus]string{
	ackTooLarge: "Exceeded max packet size in ack system.",
	ackTooShort: "Failed to write ack header.",
	ackStale:    "The provided sequence number was stale.",
}

func newAcks() *acks {
	a := new(acks)
	a.init()
	return a
}

// sendAck is cn_ack_system_send_packet: the datagram, or nil when the
// payload is too large.
func sendAck(a *acks, payload []byte) ([]byte, uint16) {
	h, seq, ok := a.header(len(payload))
	if !ok {
		return nil, 0
	}
	return append(h[:], payload...), seq
}

// receiveAck is cn_ack_system_receive_packet.
func receiveAck(a *acks, b []byte) ackStatus {
	st := a.check(b)
	if st == ackOK {
		a.record(b)
	}
	return st
}

// TestAckVectors replays every case of ack.json on two ack systems: header
// bytes, verdicts, acks, counters, RTT and packet loss, bit for bit.
func TestAckVectors(t *testing.T) {
	var v ackVectors
	require.NoError(t, vectortest.LoadCute(vectorPath("ack.json"), &v))
	require.Len(t, v.Cases, 15)
	require.Empty(t, v.AssertionsFired)
	steps := 0
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			sides := map[string]*acks{"A": newAcks(), "B": newAcks()}
			for i, s := range c.Steps {
				steps++
				a := sides[s.Side]
				at := fmt.Sprintf("step %d (%s %s)", i, s.Op, s.Side)
				switch s.Op {
				case "send":
					payload := s.Payload
					if payload == nil {
						payload = make([]byte, s.PayloadSize)
					}
					if s.SequenceOut != nil && a.counters[PacketsSent] == 0 {
						// wrap_around: A first sent packets that were all lost.
						for a.sequence != *s.SequenceOut {
							sendAck(a, []byte{0})
						}
					}
					pkt, seq := sendAck(a, payload)
					switch {
					case s.Error == "send_packet_fn failed (scripted)":
						// The Go layer hands datagrams to its owner and has no
						// failing callback; an owner whose write fails counts it
						// so, with the sequence used, as the C code does.
						require.NotNil(t, pkt, at)
						a.counters[PacketsSent]--
						a.counters[PacketsInvalid]++
					case s.Result == "error":
						require.Nil(t, pkt, at)
					default:
						require.NotNil(t, pkt, at)
						require.Equal(t, *s.SequenceOut, seq, at)
						require.Len(t, pkt, s.PacketSize, at)
						if s.Packet != nil {
							require.Equal(t, []byte(*s.Packet), pkt, at)
						} else {
							require.Equal(t, []byte(s.PacketHeader), pkt[:AckHeaderBytes], at)
						}
					}
				case "receive":
					var pkt []byte
					if s.Packet != nil {
						pkt = *s.Packet
					} else {
						pkt = make([]byte, s.PacketSize)
						copy(pkt, s.PacketHeader)
					}
					before := len(a.acked)
					st := receiveAck(a, pkt)
					if s.Result == "accepted" {
						require.Equal(t, ackOK, st, at)
					} else {
						require.Equal(t, s.Error, ackErrors[st], at)
					}
					require.Equal(t, nilIfEmpty(s.NewAcks), nilIfEmpty(a.acked[before:]), at)
				case "update":
					a.update(s.DT)
					if s.BwIn != nil {
						require.Equal(t, *s.BwIn, a.bwIn, at)
					}
				case "clear_acks":
					a.acked = a.acked[:0]
				default:
					t.Fatalf("%s: unknown op", at)
				}
				if st := s.State; st != nil {
					require.Equal(t, st.NextSequence, a.sequence, at)
					require.Equal(t, st.SentBufferSequence, a.sent.next, at)
					require.Equal(t, st.ReceivedBufferSequence, a.received.next, at)
					ack, bits := a.ackBits()
					require.Equal(t, st.NextHeaderAck, ack, at)
					require.Equal(t, st.NextHeaderAckBits, bits, at)
					require.Equal(t, nilIfEmpty(st.PendingAcks), nilIfEmpty(a.acked), at)
					for i, n := range counterNames {
						require.Equal(t, st.Counters[n], a.counters[i], "%s: %s", at, n)
					}
					require.Equal(t, st.Time, a.time, at)
					require.Equal(t, st.RTT, a.rtt, at)
					require.Equal(t, st.Loss, a.loss, at)
				}
			}
		})
	}
	assert.Equal(t, 112, steps)

	t.Run("packet_loss_bulk", func(t *testing.T) {
		a, b := newAcks(), newAcks()
		trace := v.PacketLossBulk.Trace
		require.NotEmpty(t, trace)
		for sent := 1; sent <= 700; sent++ {
			pkt, seq := sendAck(a, make([]byte, 10))
			if seq%2 == 0 {
				require.Equal(t, ackOK, receiveAck(b, pkt))
			}
			if sent%8 == 0 {
				back, _ := sendAck(b, []byte{0})
				require.Equal(t, ackOK, receiveAck(a, back))
				a.update(1.0 / 16)
			}
			if len(trace) > 0 && trace[0].AfterSent == sent {
				require.Equal(t, trace[0].Loss, a.loss, "after %d", sent)
				require.Equal(t, trace[0].AckedTotal, a.counters[PacketsAcked], "after %d", sent)
				require.Equal(t, trace[0].BwIn, a.bwIn, "after %d", sent)
				trace = trace[1:]
			}
		}
		require.Empty(t, trace)
	})
}

func nilIfEmpty(s []uint16) []uint16 {
	if len(s) == 0 {
		return nil
	}
	return append([]uint16(nil), s...)
}

// tagged is the vectors' message with tag tag and n bytes: byte i is
// (tag·37 + i + (i>>8)·101) mod 256.
func tagged(tag, n int) []byte {
	// The pattern repeats every 65536 bytes: build one period, copy the rest.
	b := make([]byte, n)
	for i := range min(n, 1<<16) {
		b[i] = byte(tag*37 + i + (i>>8)*101)
	}
	for i := 1 << 16; i < n; i += 1 << 16 {
		copy(b[i:], b[:1<<16])
	}
	return b
}

// popped is a message as the vectors give it.
type popped struct {
	Size            int            `json:"size"`
	Tag             int            `json:"tag"`
	Data            vectortest.Hex `json:"data"`
	WasSentReliably *bool          `json:"was_sent_reliably"`
}

// checkMessage checks a delivered message against its vector.
func checkMessage(t *testing.T, want popped, got []byte, at string) {
	t.Helper()
	require.Len(t, got, want.Size, at)
	switch {
	case want.Data != nil && (want.Tag < 0 || len(want.Data) == want.Size):
		require.Equal(t, string(want.Data), string(got), at)
	case want.Tag >= 0:
		require.Equal(t, tagged(want.Tag, want.Size), got, at)
	}
}

// epoch is the replays' time zero.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns epoch plus s seconds.
func at(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }

// side is a Transport in a replay and the datagrams it emitted.
type side struct {
	t    *Transport
	now  float64
	sent [][]byte
}

func newSide(t *testing.T, cfg Config, start float64) *side {
	s := &side{now: start}
	tr, err := New(at(start), cfg, func(b []byte) { s.sent = append(s.sent, append([]byte(nil), b...)) })
	require.NoError(t, err)
	s.t = tr
	return s
}

// take returns and forgets what s emitted.
func (s *side) take() [][]byte {
	out := s.sent
	s.sent = nil
	return out
}

// replayConfig is the configuration replays run with: cute_net.h's
// limits, and acks that only piggyback, as there.
var replayConfig = Config{MaxMessageBytes: MaxMessageBytes, MaxBufferedBytes: 64 << 20, MaxSendQueueBytes: 64 << 20, PiggybackOnly: true, AckTimeout: -1}

// inFlight is the in-flight array as the vectors give it.
type inFlight struct {
	ID       uint64  `json:"id"`
	Sequence uint16  `json:"message_sequence"`
	Index    uint16  `json:"fragment_index"`
	LastSent float64 `json:"last_sent_time"`
}

func (s *side) inFlight() []inFlight {
	out := []inFlight{}
	for _, f := range s.t.inFlight {
		out = append(out, inFlight{ID: f.id, Sequence: f.seq, Index: f.index, LastSent: f.time})
	}
	return out
}

// popAll pops what cn_transport_receive_reliably_and_in_order and then
// cn_transport_receive_fire_and_forget return until empty.
func (s *side) popAll() (rel, faf [][]byte) {
	for {
		m, reliable, ok := s.t.Peek()
		if !ok {
			return rel, faf
		}
		m = append([]byte(nil), m...)
		if reliable {
			rel = append(rel, m)
		} else {
			faf = append(faf, m)
		}
		s.t.Pop()
	}
}

// processErrors maps cute_net.h's errors for datagrams a conforming
// sender writes to Receive's.
var processErrors = map[string]error{
	"":                                       nil,
	"Sequence is too old.":                   ErrDuplicate,
	"Sequence for this reassembly is stale.": ErrStale,
	"The provided sequence number was stale.":                        ErrStale,
	"Exceeded max packet size in ack system.":                        ErrTooLarge,
	"Packet exceeded `max_size_single_send` limit.":                  ErrTooLarge,
	"Fragment index out of bounds.":                                  ErrMalformed,
	"Fragment size somehow didn't match `transport->fragment_size`.": ErrMalformed,
	"`size` is too small to fit `CN_TRANSPORT_HEADER_SIZE`.":         ErrMalformed,
	"Full packet not yet received.":                                  ErrMalformed,
	"Packet dropped. The other end is sending too many packets.":     ErrDropped,
}

// u16 reads a little-endian uint16 of a datagram.
func u16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }

// jsonUnmarshal is encoding/json's Unmarshal.
var jsonUnmarshal = json.Unmarshal
