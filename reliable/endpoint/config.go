package endpoint

import (
	"errors"
	"fmt"
)

// Config configures an Endpoint. Its fields are those of the reference's
// reliable_config_t; a zero field takes the reference's default, given on
// each field.
type Config struct {
	// Name appears in errors. Default "endpoint".
	Name string
	// MaxPacketSize is the largest payload SendPacket accepts and
	// ReceivePacket delivers. Default 16384.
	MaxPacketSize int
	// FragmentAbove: payloads longer than this are sent as fragments.
	// Default 1024.
	FragmentAbove int
	// MaxFragments is the most fragments of one packet, at most 256.
	// Default 16.
	MaxFragments int
	// FragmentSize is the payload bytes of every fragment but the last.
	// Default 1024.
	FragmentSize int
	// AckBufferSize bounds the acks kept between ClearAcks calls. Default 256.
	AckBufferSize int
	// SentPacketsBufferSize is how many sent packets are remembered for
	// acks and statistics. Default 256.
	SentPacketsBufferSize int
	// ReceivedPacketsBufferSize is how many received packets are remembered
	// for acks, duplicates and statistics. Default 256.
	ReceivedPacketsBufferSize int
	// FragmentReassemblyBufferSize is how many packets can be in
	// reassembly at once. Default 64.
	FragmentReassemblyBufferSize int
	// RTTSmoothingFactor is the weight of a new RTT sample. Default 0.0025.
	RTTSmoothingFactor float32
	// RTTHistorySize is how many RTT samples the min, max, average and
	// jitter statistics look at. Default 512.
	RTTHistorySize int
	// PacketLossSmoothingFactor is the weight of a new packet loss value.
	// Default 0.1.
	PacketLossSmoothingFactor float32
	// BandwidthSmoothingFactor is the weight of a new bandwidth value.
	// Default 0.1.
	BandwidthSmoothingFactor float32
	// PacketHeaderSize is the bytes of lower-layer headers added to each
	// packet in the bandwidth statistics. Default 28 (IPv4 + UDP).
	PacketHeaderSize int

	// Transmit is called with every packet or fragment to put on the
	// wire. packet is the endpoint's scratch buffer, valid only during
	// the call. Transmit must not call the endpoint's methods.
	Transmit func(sequence uint16, packet []byte)
	// Process is called with every received payload; returning false
	// leaves the packet unacknowledged (and its acks unprocessed), so a
	// later copy is processed again. payload is valid only during the
	// call. Nil accepts every packet.
	Process func(sequence uint16, payload []byte) bool
}

// defaultConfig returns the reference's default configuration.
func defaultConfig() Config {
	return Config{
		Name:                         "endpoint",
		MaxPacketSize:                16 * 1024,
		FragmentAbove:                1024,
		MaxFragments:                 16,
		FragmentSize:                 1024,
		AckBufferSize:                256,
		SentPacketsBufferSize:        256,
		ReceivedPacketsBufferSize:    256,
		FragmentReassemblyBufferSize: 64,
		RTTSmoothingFactor:           0.0025,
		RTTHistorySize:               512,
		PacketLossSmoothingFactor:    0.1,
		BandwidthSmoothingFactor:     0.1,
		PacketHeaderSize:             28,
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := defaultConfig()
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setFloat := func(v *float32, def float32) {
		if *v == 0 {
			*v = def
		}
	}
	if c.Name == "" {
		c.Name = d.Name
	}
	setInt(&c.MaxPacketSize, d.MaxPacketSize)
	setInt(&c.FragmentAbove, d.FragmentAbove)
	setInt(&c.MaxFragments, d.MaxFragments)
	setInt(&c.FragmentSize, d.FragmentSize)
	setInt(&c.AckBufferSize, d.AckBufferSize)
	setInt(&c.SentPacketsBufferSize, d.SentPacketsBufferSize)
	setInt(&c.ReceivedPacketsBufferSize, d.ReceivedPacketsBufferSize)
	setInt(&c.FragmentReassemblyBufferSize, d.FragmentReassemblyBufferSize)
	setFloat(&c.RTTSmoothingFactor, d.RTTSmoothingFactor)
	setInt(&c.RTTHistorySize, d.RTTHistorySize)
	setFloat(&c.PacketLossSmoothingFactor, d.PacketLossSmoothingFactor)
	setFloat(&c.BandwidthSmoothingFactor, d.BandwidthSmoothingFactor)
	setInt(&c.PacketHeaderSize, d.PacketHeaderSize)
	return c
}

// errConfig is wrapped by New's error for an unusable Config.
var errConfig = errors.New("netcode/reliable/endpoint: invalid config")

func (c *Config) check() error {
	bad := func(what string, v any) error {
		return fmt.Errorf("%w: %s %v", errConfig, what, v)
	}
	const maxSeqBuffer = 65536
	switch {
	case c.MaxPacketSize < 1:
		return bad("MaxPacketSize", c.MaxPacketSize)
	case c.FragmentAbove < 1:
		return bad("FragmentAbove", c.FragmentAbove)
	case c.MaxFragments < 1 || c.MaxFragments > maxFragmentsLimit:
		return bad("MaxFragments", c.MaxFragments)
	case c.FragmentSize < 1:
		return bad("FragmentSize", c.FragmentSize)
	case c.AckBufferSize < 1:
		return bad("AckBufferSize", c.AckBufferSize)
	case c.SentPacketsBufferSize < 1 || c.SentPacketsBufferSize > maxSeqBuffer:
		return bad("SentPacketsBufferSize", c.SentPacketsBufferSize)
	case c.ReceivedPacketsBufferSize < 1 || c.ReceivedPacketsBufferSize > maxSeqBuffer:
		return bad("ReceivedPacketsBufferSize", c.ReceivedPacketsBufferSize)
	case c.FragmentReassemblyBufferSize < 1 || c.FragmentReassemblyBufferSize > maxSeqBuffer:
		return bad("FragmentReassemblyBufferSize", c.FragmentReassemblyBufferSize)
	case c.RTTHistorySize < 1:
		return bad("RTTHistorySize", c.RTTHistorySize)
	case c.RTTSmoothingFactor < 0 || c.PacketLossSmoothingFactor < 0 || c.BandwidthSmoothingFactor < 0:
		return bad("smoothing factor", "< 0")
	case c.PacketHeaderSize < 0:
		return bad("PacketHeaderSize", c.PacketHeaderSize)
	}
	return nil
}

// counter indexes a counterSet. The order is the reference's, which the
// golden vectors record.
type counter int

// The counters, in the reference's order.
const (
	counterPacketsSent counter = iota
	counterPacketsReceived
	counterPacketsAcked
	counterPacketsStale
	counterPacketsInvalid
	counterPacketsTooLargeToSend
	counterPacketsTooLargeToReceive
	counterFragmentsSent
	counterFragmentsReceived
	counterFragmentsInvalid
	counterPacketsDuplicate
	numCounters
)

// counterSet is an endpoint's counters as the reference keeps them,
// indexed by counter.
type counterSet [numCounters]uint64

// Stats are an endpoint's estimates and counters. The estimates are float32
// as in the reference and equal to its values bit for bit; times are in
// milliseconds, loss in percent, bandwidth in kilobits per second. The
// estimates are as of the last Update (RTT as of the last ack), the counters
// as of the call.
type Stats struct {
	RTT, RTTMin, RTTMax, RTTAvg                             float32
	JitterAvgVsMinRTT, JitterMaxVsMinRTT, JitterStddevVsAvg float32
	PacketLoss                                              float32
	SentKbps, ReceivedKbps, AckedKbps                       float32

	// PacketsSent counts packets sent, fragmented or not.
	PacketsSent uint64
	// PacketsReceived counts packets received, valid or not.
	PacketsReceived uint64
	// PacketsAcked counts sent packets the peer acknowledged.
	PacketsAcked uint64
	// PacketsStale counts received packets too old for the receive window.
	PacketsStale uint64
	// PacketsInvalid counts received packets whose header did not parse.
	PacketsInvalid uint64
	// PacketsTooLargeToSend counts SendPacket calls refused for size.
	PacketsTooLargeToSend uint64
	// PacketsTooLargeToReceive counts received packets dropped for size.
	PacketsTooLargeToReceive uint64
	// FragmentsSent counts fragments sent.
	FragmentsSent uint64
	// FragmentsReceived counts fragments received and kept.
	FragmentsReceived uint64
	// FragmentsInvalid counts fragments dropped as malformed.
	FragmentsInvalid uint64
	// PacketsDuplicate counts received packets already received.
	PacketsDuplicate uint64
}
