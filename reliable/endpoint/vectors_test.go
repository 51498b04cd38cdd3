package endpoint

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The JSON shapes of reliable-vectors.json (see shared/vectors/reliable-README.md).

// parseQuoted decodes a JSON string and parses it with parse.
func parseQuoted[T any](b []byte, parse func(string) (T, error)) (T, error) {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var zero T
		return zero, err
	}
	return parse(s)
}

type hexBits uint32 // "0x%08x"

func (h *hexBits) UnmarshalJSON(b []byte) error {
	v, err := parseQuoted(b, func(s string) (uint64, error) { return strconv.ParseUint(s, 0, 32) })
	*h = hexBits(v)
	return err
}

type f32 float32 // "%.9g"

func (f *f32) UnmarshalJSON(b []byte) error {
	v, err := parseQuoted(b, func(s string) (float64, error) { return strconv.ParseFloat(s, 32) })
	*f = f32(v)
	return err
}

type f64 float64 // "%.17g"

func (f *f64) UnmarshalJSON(b []byte) error {
	v, err := parseQuoted(b, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
	*f = f64(v)
	return err
}

type vConfig struct {
	MaxPacketSize                int `json:"max_packet_size"`
	FragmentAbove                int `json:"fragment_above"`
	MaxFragments                 int `json:"max_fragments"`
	FragmentSize                 int `json:"fragment_size"`
	AckBufferSize                int `json:"ack_buffer_size"`
	SentPacketsBufferSize        int `json:"sent_packets_buffer_size"`
	ReceivedPacketsBufferSize    int `json:"received_packets_buffer_size"`
	FragmentReassemblyBufferSize int `json:"fragment_reassembly_buffer_size"`
	RTTSmoothingFactor           f32 `json:"rtt_smoothing_factor"`
	RTTHistorySize               int `json:"rtt_history_size"`
	PacketLossSmoothingFactor    f32 `json:"packet_loss_smoothing_factor"`
	BandwidthSmoothingFactor     f32 `json:"bandwidth_smoothing_factor"`
	PacketHeaderSize             int `json:"packet_header_size"`
}

func (v vConfig) config() Config {
	return Config{
		MaxPacketSize:                v.MaxPacketSize,
		FragmentAbove:                v.FragmentAbove,
		MaxFragments:                 v.MaxFragments,
		FragmentSize:                 v.FragmentSize,
		AckBufferSize:                v.AckBufferSize,
		SentPacketsBufferSize:        v.SentPacketsBufferSize,
		ReceivedPacketsBufferSize:    v.ReceivedPacketsBufferSize,
		FragmentReassemblyBufferSize: v.FragmentReassemblyBufferSize,
		RTTSmoothingFactor:           float32(v.RTTSmoothingFactor),
		RTTHistorySize:               v.RTTHistorySize,
		PacketLossSmoothingFactor:    float32(v.PacketLossSmoothingFactor),
		BandwidthSmoothingFactor:     float32(v.BandwidthSmoothingFactor),
		PacketHeaderSize:             v.PacketHeaderSize,
	}
}

type vDelivered struct {
	Sequence uint16         `json:"sequence"`
	Bytes    int            `json:"bytes"`
	Accepted *bool          `json:"accepted"`
	Equals   *bool          `json:"equals_payload"`
	Payload  vectortest.Hex `json:"payload"`
}

type vWire struct {
	Fragment int            `json:"fragment"`
	Bytes    int            `json:"bytes"`
	Delay    int            `json:"delay"`
	Copies   int            `json:"copies"`
	Hex      vectortest.Hex `json:"hex"`
}

type vSend struct {
	From         string  `json:"from"`
	Sequence     uint16  `json:"sequence"`
	PayloadBytes int     `json:"payload_bytes"`
	Wire         []vWire `json:"wire"`
}

type vStep struct {
	Tick              int                     `json:"tick"`
	Time              f64                     `json:"time"`
	ResetBeforeUpdate []string                `json:"reset_before_update"`
	Sends             []vSend                 `json:"sends"`
	Delivered         map[string][]vDelivered `json:"delivered"`
	Acks              map[string][]uint16     `json:"acks"`
	Counters          map[string]counterSet   `json:"counters"`
	StatsBits         map[string][]hexBits    `json:"stats_bits"`
	AcksClearedAfter  bool                    `json:"acks_cleared_after"`
}

type vScenario struct {
	Name           string             `json:"name"`
	Configs        map[string]vConfig `json:"configs"`
	Ticks          int                `json:"ticks"`
	T0             f64                `json:"t0"`
	Dt             f64                `json:"dt"`
	DtBits         string             `json:"dt_bits"`
	WarmupSends    map[string]int     `json:"warmup_sends"`
	ProcessRejects map[string][]int   `json:"process_rejects"`
	Steps          []vStep            `json:"steps"`
	InFlightAtEnd  int                `json:"in_flight_at_end"`
}

type vectors struct {
	Constants struct {
		VersionFull          string `json:"version_full"`
		MaxPacketHeaderBytes int    `json:"max_packet_header_bytes"`
		MinPacketHeaderBytes int    `json:"min_packet_header_bytes"`
		FragmentHeaderBytes  int    `json:"fragment_header_bytes"`
		NumCounters          int    `json:"num_counters"`
		DefaultConfig        struct {
			Name string `json:"name"`
			vConfig
			RTTBits  hexBits `json:"rtt_smoothing_factor_bits"`
			LossBits hexBits `json:"packet_loss_smoothing_factor_bits"`
			BWBits   hexBits `json:"bandwidth_smoothing_factor_bits"`
		} `json:"default_config"`
		Derived struct {
			MaxFragmentsHardLimit int `json:"max_fragments_hard_limit"`
			ReceiveSizeLimit      int `json:"receive_size_limit_default"`
			TransmitBufferBytes   int `json:"transmit_buffer_bytes_default"`
		} `json:"derived"`
	} `json:"constants"`
	PacketHeaders struct {
		Cases []struct {
			Index    int            `json:"index"`
			Sequence uint16         `json:"sequence"`
			Ack      uint16         `json:"ack"`
			AckBits  hexBits        `json:"ack_bits"`
			Header   vectortest.Hex `json:"header"`
			Payload  vectortest.Hex `json:"payload"`
			Packet   vectortest.Hex `json:"packet"`
			Decoded  struct {
				Result   int     `json:"result"`
				Sequence uint16  `json:"sequence"`
				Ack      uint16  `json:"ack"`
				AckBits  hexBits `json:"ack_bits"`
			} `json:"decoded"`
		} `json:"cases"`
	} `json:"packet_headers"`
	Fragments struct {
		Configs map[string]vConfig `json:"configs"`
		Cases   []struct {
			Index          int        `json:"index"`
			Description    string     `json:"description"`
			Config         string     `json:"config"`
			PayloadBytes   int        `json:"payload_bytes"`
			WarmupSends    int        `json:"sender_warmup_sends"`
			ReceivedBefore []uint16   `json:"sender_received_before_send"`
			Sequence       uint16     `json:"sequence"`
			NextSequence   uint16     `json:"next_sequence_after_send"`
			SenderCounters counterSet `json:"sender_counters"`
			Packets        []struct {
				Hex     vectortest.Hex `json:"hex"`
				Decoded struct {
					Result        int     `json:"result"`
					Sequence      uint16  `json:"sequence"`
					FragmentID    *int    `json:"fragment_id"`
					NumFragments  int     `json:"num_fragments"`
					FragmentBytes int     `json:"fragment_bytes"`
					Embedded      int     `json:"embedded_header_bytes"`
					Ack           uint16  `json:"ack"`
					AckBits       hexBits `json:"ack_bits"`
				} `json:"decoded"`
			} `json:"packets"`
			Receive []struct {
				Name             string         `json:"name"`
				Feed             []int          `json:"feed"`
				Delivered        []vDelivered   `json:"delivered"`
				ReceiverCounters counterSet     `json:"receiver_counters"`
				ReplyHeader      vectortest.Hex `json:"receiver_reply_header"`
			} `json:"receive"`
		} `json:"cases"`
	} `json:"fragments"`
	AckScenarios struct {
		Scenarios []vScenario `json:"scenarios"`
	} `json:"ack_scenarios"`
	InvalidPackets struct {
		Cases []struct {
			Index          int              `json:"index"`
			Name           string           `json:"name"`
			Config         string           `json:"config"`
			ConfigValues   *vConfig         `json:"config_values"`
			Setup          []vectortest.Hex `json:"setup"`
			SetupDelivered int              `json:"setup_delivered"`
			Input          vectortest.Hex   `json:"input"`
			AssertFired    bool             `json:"assert_fired"`
			CountersBefore counterSet       `json:"counters_before"`
			CountersAfter  counterSet       `json:"counters_after"`
			Delivered      []vDelivered     `json:"delivered"`
			ReplyHeader    vectortest.Hex   `json:"receiver_reply_header"`
		} `json:"cases"`
	} `json:"invalid_packets"`
	SequenceBuffer struct {
		Comparisons []struct {
			S1          uint16 `json:"s1"`
			S2          uint16 `json:"s2"`
			GreaterThan bool   `json:"greater_than"`
			LessThan    bool   `json:"less_than"`
		} `json:"sequence_comparisons"`
		Scripts []struct {
			Name       string `json:"name"`
			NumEntries int    `json:"num_entries"`
			Ops        []struct {
				Op             string  `json:"op"`
				Sequence       uint16  `json:"sequence"`
				From           int     `json:"from"`
				To             int     `json:"to"`
				Result         *bool   `json:"result"`
				Ack            uint16  `json:"ack"`
				AckBits        hexBits `json:"ack_bits"`
				BufferSequence uint16  `json:"buffer_sequence"`
				Slots          []int   `json:"slots"`
			} `json:"ops"`
		} `json:"scripts"`
	} `json:"sequence_buffer"`
	RTTLoss struct {
		Scenarios []vScenario `json:"scenarios"`
	} `json:"rtt_loss"`
}

func loadVectors(t testing.TB) *vectors {
	t.Helper()
	v := vectortest.Once[vectors](t, "reliable-vectors.json", vectortest.Decode)
	require.Equal(t, "1.4.0", v.Constants.VersionFull)
	return v
}

// t0 is the creation time of the vectors' endpoints unless a scenario says
// otherwise.
const t0 = 100.0

// plain is the vectors' "plain" packet for sequence s: header (s, s, 0)
// and the payload 00.
func plain(s uint16) []byte {
	b := make([]byte, MaxPacketHeaderBytes+1)
	n := putPacketHeader(b, s, s, 0)
	return b[:n+1]
}

// recorder is an endpoint with its transmissions and deliveries captured.
type recorder struct {
	*Endpoint
	sent      [][]byte
	delivered []vDelivered
	payloads  [][]byte
	reject    map[uint16]bool
}

func newRecorder(t testing.TB, cfg Config, now float64) *recorder {
	r := &recorder{reject: map[uint16]bool{}}
	cfg.Transmit = func(_ uint16, p []byte) { r.sent = append(r.sent, slices.Clone(p)) }
	cfg.Process = func(seq uint16, p []byte) bool {
		ok := !r.reject[seq]
		r.delivered = append(r.delivered, vDelivered{Sequence: seq, Bytes: len(p), Accepted: &ok})
		r.payloads = append(r.payloads, slices.Clone(p))
		return ok
	}
	e, err := New(cfg, now)
	require.NoError(t, err)
	r.Endpoint = e
	return r
}

// replyHeader makes the endpoint send 00 and returns the header it wrote.
func (r *recorder) replyHeader(t testing.TB) []byte {
	r.sent = nil
	require.NoError(t, r.SendPacket([]byte{0}))
	require.Len(t, r.sent, 1)
	p := r.sent[0]
	r.sent = nil
	return p[:len(p)-1]
}

func (r *recorder) warmup(t testing.TB, n int) {
	for range n {
		require.NoError(t, r.SendPacket([]byte{0}))
	}
	r.sent = nil
}

func TestVectorConstants(t *testing.T) {
	v := loadVectors(t)
	c := v.Constants
	assert.Equal(t, MaxPacketHeaderBytes, c.MaxPacketHeaderBytes)
	assert.Equal(t, minPacketHeaderBytes, c.MinPacketHeaderBytes)
	assert.Equal(t, FragmentHeaderBytes, c.FragmentHeaderBytes)
	assert.Equal(t, int(numCounters), c.NumCounters)
	assert.Equal(t, maxFragmentsLimit, c.Derived.MaxFragmentsHardLimit)
	d := defaultConfig()
	assert.Equal(t, c.DefaultConfig.Name, d.Name)
	want := c.DefaultConfig.config()
	want.Name = c.DefaultConfig.Name
	assert.Equal(t, want, d)
	assert.Equal(t, uint32(c.DefaultConfig.RTTBits), math.Float32bits(d.RTTSmoothingFactor))
	assert.Equal(t, uint32(c.DefaultConfig.LossBits), math.Float32bits(d.PacketLossSmoothingFactor))
	assert.Equal(t, uint32(c.DefaultConfig.BWBits), math.Float32bits(d.BandwidthSmoothingFactor))
	e, err := New(Config{}, t0)
	require.NoError(t, err)
	assert.Len(t, e.scratch, c.Derived.TransmitBufferBytes)
	assert.Equal(t, c.Derived.ReceiveSizeLimit, d.MaxPacketSize+MaxPacketHeaderBytes+FragmentHeaderBytes)
}

func TestVectorPacketHeaders(t *testing.T) {
	v := loadVectors(t)
	require.Len(t, v.PacketHeaders.Cases, 91)
	for _, c := range v.PacketHeaders.Cases {
		t.Run(strconv.Itoa(c.Index), func(t *testing.T) {
			var b [MaxPacketHeaderBytes]byte
			n := putPacketHeader(b[:], c.Sequence, c.Ack, uint32(c.AckBits))
			assert.Equal(t, hex.EncodeToString(c.Header), hex.EncodeToString(b[:n]))
			assert.Equal(t, append(slices.Clone([]byte(c.Header)), c.Payload...), []byte(c.Packet))
			h, n, ok := readPacketHeader(c.Packet)
			require.True(t, ok)
			assert.Equal(t, c.Decoded.Result, n)
			assert.Equal(t, packetHeader{c.Decoded.Sequence, c.Decoded.Ack, uint32(c.Decoded.AckBits)}, h)

			// The endpoint writes the same header when its state says so.
			r := newRecorder(t, Config{}, t0)
			r.sequence, r.Endpoint.sent.sequence = c.Sequence, c.Sequence // what warmup sends would do
			ack, bits := c.Ack, uint32(c.AckBits)
			r.received.sequence = ack + 1
			for i := range 32 {
				if bits&(1<<i) != 0 {
					r.received.insert(ack - uint16(i))
				}
			}
			require.NoError(t, r.SendPacket(c.Payload))
			require.Len(t, r.sent, 1)
			assert.Equal(t, hex.EncodeToString(c.Packet), hex.EncodeToString(r.sent[0]))
		})
	}
}

func fragmentPayload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(7 * i)
	}
	return p
}

func TestVectorFragments(t *testing.T) {
	v := loadVectors(t)
	require.Len(t, v.Fragments.Cases, 20)
	for _, c := range v.Fragments.Cases {
		t.Run(fmt.Sprintf("%d_%s", c.Index, c.Description), func(t *testing.T) {
			vc, ok := v.Fragments.Configs[c.Config]
			require.True(t, ok, c.Config)
			cfg := vc.config()
			s := newRecorder(t, cfg, t0)
			s.warmup(t, c.WarmupSends)
			for _, seq := range c.ReceivedBefore {
				s.ReceivePacket(plain(seq))
			}
			s.delivered = nil
			assert.Equal(t, c.Sequence, s.NextSequence())
			payload := fragmentPayload(c.PayloadBytes)
			err := s.SendPacket(payload)
			if len(c.Packets) == 0 {
				assert.ErrorIs(t, err, ErrPacketTooLarge)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, c.NextSequence, s.NextSequence())
			assert.Equal(t, c.SenderCounters, s.counters)
			require.Len(t, s.sent, len(c.Packets))
			for i, p := range c.Packets {
				assert.Equal(t, hex.EncodeToString(p.Hex), hex.EncodeToString(s.sent[i]), "packet %d", i)
				d := p.Decoded
				if d.FragmentID != nil {
					f, ok := readFragmentHeader(p.Hex, cfg.MaxFragments, cfg.FragmentSize)
					require.True(t, ok)
					assert.Equal(t, d.Result, FragmentHeaderBytes)
					assert.Equal(t, d.Sequence, f.sequence)
					assert.Equal(t, *d.FragmentID, f.id)
					assert.Equal(t, d.NumFragments, f.count)
					assert.Equal(t, d.FragmentBytes, f.dataBytes)
					assert.Equal(t, d.Embedded, f.headerBytes)
					assert.Equal(t, d.Ack, f.ack)
					assert.Equal(t, uint32(d.AckBits), f.ackBits)
				} else {
					h, n, ok := readPacketHeader(p.Hex)
					require.True(t, ok)
					assert.Equal(t, d.Result, n)
					assert.Equal(t, packetHeader{d.Sequence, d.Ack, uint32(d.AckBits)}, h)
				}
			}
			for _, rc := range c.Receive {
				t.Run(rc.Name, func(t *testing.T) {
					r := newRecorder(t, cfg, t0)
					for _, i := range rc.Feed {
						r.ReceivePacket(c.Packets[i].Hex)
					}
					require.Len(t, r.delivered, len(rc.Delivered))
					for i, d := range rc.Delivered {
						assert.Equal(t, d.Sequence, r.delivered[i].Sequence)
						assert.Equal(t, d.Bytes, r.delivered[i].Bytes)
						assert.Equal(t, *d.Equals, slices.Equal(payload, r.payloads[i]))
					}
					assert.Equal(t, rc.ReceiverCounters, r.counters)
					assert.Equal(t, hex.EncodeToString(rc.ReplyHeader), hex.EncodeToString(r.replyHeader(t)))
				})
			}
		})
	}
}

func TestVectorInvalidPackets(t *testing.T) {
	v := loadVectors(t)
	require.Len(t, v.InvalidPackets.Cases, 60)
	for _, c := range v.InvalidPackets.Cases {
		t.Run(fmt.Sprintf("%d_%s", c.Index, c.Name), func(t *testing.T) {
			cfg := defaultConfig()
			if c.ConfigValues != nil {
				cfg = c.ConfigValues.config()
			}
			r := newRecorder(t, cfg, t0)
			for _, p := range c.Setup {
				r.ReceivePacket(p)
			}
			assert.Len(t, r.delivered, c.SetupDelivered)
			assert.Equal(t, c.CountersBefore, r.counters)
			r.delivered, r.payloads = nil, nil
			r.ReceivePacket(c.Input)
			if c.AssertFired {
				// The reference asserts on an empty packet; a port just
				// drops it.
				assert.Equal(t, c.CountersBefore, r.counters)
				assert.Empty(t, r.delivered)
				return
			}
			assert.Equal(t, c.CountersAfter, r.counters)
			require.Len(t, r.delivered, len(c.Delivered))
			for i, d := range c.Delivered {
				assert.Equal(t, d.Sequence, r.delivered[i].Sequence)
				assert.Equal(t, d.Bytes, r.delivered[i].Bytes)
				if d.Payload != nil {
					assert.Equal(t, hex.EncodeToString(d.Payload), hex.EncodeToString(r.payloads[i]))
				}
			}
			assert.Equal(t, hex.EncodeToString(c.ReplyHeader), hex.EncodeToString(r.replyHeader(t)))
		})
	}
}

func TestVectorSequenceBuffer(t *testing.T) {
	v := loadVectors(t)
	sb := v.SequenceBuffer
	require.Len(t, sb.Comparisons, 22)
	for _, c := range sb.Comparisons {
		assert.Equal(t, c.GreaterThan, greaterThan(c.S1, c.S2), "greaterThan(%d, %d)", c.S1, c.S2)
		assert.Equal(t, c.LessThan, lessThan(c.S1, c.S2), "lessThan(%d, %d)", c.S1, c.S2)
	}
	require.Len(t, sb.Scripts, 4)
	for _, sc := range sb.Scripts {
		t.Run(sc.Name, func(t *testing.T) {
			b := newSeqBuffer[struct{}](sc.NumEntries)
			for i, op := range sc.Ops {
				var got *bool
				res := func(v bool) { got = &v }
				switch op.Op {
				case "state":
				case "insert":
					res(b.insert(op.Sequence) != nil)
				case "insert_range":
					for s := op.From; s <= op.To; s++ {
						b.insert(uint16(s))
					}
				case "find":
					res(b.find(op.Sequence) != nil)
				case "exists":
					res(b.exists(op.Sequence))
				case "available":
					res(b.available(op.Sequence))
				case "test_insert":
					res(b.testInsert(op.Sequence))
				case "advance":
					b.advance(op.Sequence, nil)
				case "remove":
					b.remove(op.Sequence, nil)
				case "reset":
					b.reset()
				case "generate_ack_bits":
					ack, bits := b.ackBits()
					assert.Equal(t, op.Ack, ack, "op %d", i)
					assert.Equal(t, uint32(op.AckBits), bits, "op %d", i)
				default:
					t.Fatalf("op %d: unknown op %q", i, op.Op)
				}
				if op.Result != nil {
					require.NotNil(t, got, "op %d", i)
					assert.Equal(t, *op.Result, *got, "op %d %s %d", i, op.Op, op.Sequence)
				}
				assert.Equal(t, op.BufferSequence, b.sequence, "op %d", i)
				slots := make([]int, len(b.ids))
				for j, id := range b.ids {
					slots[j] = int(int32(id))
				}
				assert.Equal(t, op.Slots, slots, "op %d %s", i, op.Op)
			}
		})
	}
}

// inFlight is a packet queued on the simulated link of a scenario.
type inFlight struct {
	due int
	to  string
	b   []byte
}

// replay runs a scenario with the vectors' tick procedure and checks every
// step; stats says whether the steps carry stats_bits.
func replay(t *testing.T, sc vScenario, stats bool) {
	require.Equal(t, "0x"+fmt.Sprintf("%016x", math.Float64bits(float64(sc.Dt))), sc.DtBits)
	eps := map[string]*recorder{}
	for _, name := range []string{"A", "B"} {
		r := newRecorder(t, sc.Configs[name].config(), float64(sc.T0))
		r.warmup(t, sc.WarmupSends[name])
		for _, s := range sc.ProcessRejects[name] {
			r.reject[uint16(s)] = true
		}
		eps[name] = r
	}
	other := map[string]string{"A": "B", "B": "A"}
	var queue []inFlight
	deliver := func(tick int) {
		rest := queue[:0:0]
		for _, p := range queue {
			if p.due <= tick {
				eps[p.to].ReceivePacket(p.b)
			} else {
				rest = append(rest, p)
			}
		}
		queue = rest
	}
	require.Len(t, sc.Steps, sc.Ticks)
	for _, st := range sc.Steps {
		tick := st.Tick
		now := float64(sc.T0) + float64(float64(tick)*float64(sc.Dt))
		require.Equal(t, float64(st.Time), now, "tick %d time", tick)
		for _, name := range st.ResetBeforeUpdate {
			eps[name].Reset()
		}
		for _, name := range []string{"A", "B"} {
			eps[name].delivered = nil
			eps[name].Update(now)
		}
		deliver(tick)
		for _, s := range st.Sends {
			r := eps[s.From]
			require.Equal(t, s.Sequence, r.NextSequence(), "tick %d", tick)
			p := make([]byte, s.PayloadBytes)
			for i := range p {
				p[i] = byte(7*i + int(s.Sequence))
			}
			r.sent = nil
			require.NoError(t, r.SendPacket(p))
			require.Len(t, r.sent, len(s.Wire), "tick %d", tick)
			for i, w := range s.Wire {
				got := r.sent[i]
				assert.Equal(t, w.Bytes, len(got), "tick %d wire %d", tick, i)
				if w.Hex != nil {
					assert.Equal(t, hex.EncodeToString(w.Hex), hex.EncodeToString(got), "tick %d wire %d", tick, i)
				}
				if w.Delay < 0 {
					continue
				}
				for range w.Copies {
					queue = append(queue, inFlight{due: tick + w.Delay, to: other[s.From], b: got})
				}
			}
		}
		deliver(tick)
		for _, name := range []string{"A", "B"} {
			r := eps[name]
			want := st.Delivered[name]
			require.Len(t, r.delivered, len(want), "tick %d %s delivered", tick, name)
			for i, d := range want {
				assert.Equal(t, d.Sequence, r.delivered[i].Sequence, "tick %d %s", tick, name)
				assert.Equal(t, d.Bytes, r.delivered[i].Bytes, "tick %d %s", tick, name)
				assert.Equal(t, *d.Accepted, *r.delivered[i].Accepted, "tick %d %s", tick, name)
			}
			acks := r.Acks()
			if len(acks) == 0 {
				acks = nil
			}
			wantAcks := st.Acks[name]
			if len(wantAcks) == 0 {
				wantAcks = nil
			}
			assert.Equal(t, wantAcks, acks, "tick %d %s acks", tick, name)
			assert.Equal(t, st.Counters[name], r.counters, "tick %d %s counters", tick, name)
			if stats {
				s := r.Stats()
				got := []float32{s.RTT, s.RTTMin, s.RTTMax, s.RTTAvg, s.JitterAvgVsMinRTT, s.JitterMaxVsMinRTT,
					s.JitterStddevVsAvg, s.PacketLoss, s.SentKbps, s.ReceivedKbps, s.AckedKbps}
				require.Len(t, st.StatsBits[name], len(got))
				for i, want := range st.StatsBits[name] {
					assert.Equal(t, fmt.Sprintf("%08x", uint32(want)), fmt.Sprintf("%08x", math.Float32bits(got[i])),
						"tick %d %s stat %d (%v, want %v)", tick, name, i, got[i], math.Float32frombits(uint32(want)))
				}
			}
		}
		if st.AcksClearedAfter {
			eps["A"].ClearAcks()
			eps["B"].ClearAcks()
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	assert.Len(t, queue, sc.InFlightAtEnd)
}

func TestVectorAckScenarios(t *testing.T) {
	v := loadVectors(t)
	require.Len(t, v.AckScenarios.Scenarios, 8)
	for _, sc := range v.AckScenarios.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { replay(t, sc, false) })
	}
}

func TestVectorRTTLoss(t *testing.T) {
	v := loadVectors(t)
	require.Len(t, v.RTTLoss.Scenarios, 2)
	for _, sc := range v.RTTLoss.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { replay(t, sc, true) })
	}
}
