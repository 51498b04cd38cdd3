package layer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// caseDeviation is what Go does with a hostile datagram of
// process_packet_cases where cute_net.h misbehaves: Receive's errors, op by
// op, and how many messages are delivered (-1: as cute_net.h).
type caseDeviation struct {
	errs      []error
	delivered int
	why       string
}

// caseDeviations are the process_packet_cases Go answers differently:
// each is a hazard of the vectors' README (the number in why). Every other
// case, Go answers as cute_net.h does.
var caseDeviations = map[string]caseDeviation{
	"size_9_over_read":  {[]error{ErrMalformed}, 0, "3: 9 to 16 bytes are read past the end"},
	"size_16_over_read": {[]error{ErrMalformed}, 0, "3: the header's last byte is read past the end"},
	"fragment_count_0":  {[]error{ErrMalformed}, 0, "1: a 0-byte reassembly buffer is written to"},
	"fragment_index_equals_count": {[]error{ErrMalformed}, 0,
		"1: index == count writes past the flags and the buffer"},
	"fragment_index_equals_count_reliable_1100": {[]error{ErrMalformed}, 0, "1: 1100 bytes written past the buffer"},
	"fragment_size_larger_than_datagram": {[]error{ErrMalformed}, 0,
		"2: 1090 bytes from past the datagram are delivered"},
	"nonfinal_fragment_short": {[]error{ErrMalformed, nil}, 0, "4: 1090 uninitialised bytes are delivered"},
	"reliable_far_ahead_poisons_stream": {[]error{ErrMalformed, nil, nil}, 2,
		"10: a sequence 2000 ahead moves the window past the next message, and the stream is dead"},
	"memory_amplification": {[]error{ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed,
		ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed, ErrMalformed,
		ErrMalformed, ErrMalformed}, 0, "5: each 1-byte first fragment of a 19,065-fragment message allocates 21 MB " +
		"(a first fragment must carry 1100 bytes: TestMemoryBound attacks with whole ones)"},
	"reliable_old": {[]error{nil, ErrDuplicate, ErrDuplicate, ErrMalformed}, -1,
		"10: a sequence 32768 ahead is refused, unacknowledged, rather than buffered"},
}

// TestHostileDatagramVectors replays the 23 process_packet_cases of
// transport.json: garbage, truncated, tampered and hostile datagrams. Go
// answers as cute_net.h does except where it overflows, over-reads,
// delivers uninitialised memory or kills the stream, where it refuses the
// datagram and does not acknowledge it.
func TestHostileDatagramVectors(t *testing.T) {
	var v transportVectors
	require.NoError(t, vectortest.LoadCute(vectorPath("transport.json"), &v))
	require.Len(t, v.Cases, 23)
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			dev, deviates := caseDeviations[c.Name]
			s := newSide(t, replayConfig, 0)
			n, delivered := 0, 0
			for i, o := range c.Ops {
				where := fmt.Sprintf("op %d (%s)", i, o.Op)
				switch o.Op {
				case "process":
					b := []byte(*o.Bytes)
					err := s.t.Receive(b)
					want := processErrors[o.Error]
					if deviates {
						want = dev.errs[n]
					}
					n++
					if want == nil {
						require.NoError(t, err, where)
					} else {
						require.ErrorIs(t, err, want, where)
					}
					if !deviates {
						require.Equal(t, *o.ReceiveSeq, s.t.rel.next, where)
					}
					if want == ErrMalformed || want == ErrTooLarge {
						// Refused before the ack system: not acknowledged.
						ack, bits := s.t.a.ackBits()
						if len(b) >= 2 {
							require.False(t, ack == u16(b, 0) && bits&1 != 0, "%s: refused datagram acknowledged", where)
						}
					}
				case "pop":
					rel, faf := s.popAll()
					delivered += len(rel) + len(faf)
					if deviates && dev.delivered >= 0 {
						continue
					}
					checkPops(t, o, rel, faf, where)
				}
			}
			if deviates {
				require.Len(t, dev.errs, n)
				if dev.delivered >= 0 {
					require.Equal(t, dev.delivered, delivered)
				}
			}
			require.LessOrEqual(t, s.t.Buffered(), FragmentBytes, "at most the one partial message held")
		})
	}
}
