package layer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// transportVectors is transport.json.
type transportVectors struct {
	Scenarios []struct {
		Name      string `json:"name"`
		Ops       []op   `json:"ops"`
		Datagrams []struct {
			ID    int            `json:"id"`
			From  string         `json:"from"`
			Bytes vectortest.Hex `json:"bytes"`
		} `json:"datagrams"`
	} `json:"scenarios"`
	SendErrors []struct {
		Name            string `json:"name"`
		Ops             []op   `json:"ops"`
		First           int    `json:"first_1024_ok"`
		StepsUntilAcked int    `json:"steps_until_all_acked"`
		Delivered       int    `json:"reliable_delivered"`
		DatagramsTotal  int    `json:"datagrams_total"`
		SequenceAfter   uint16 `json:"reliable_sequence_after"`
	} `json:"send_errors"`
	Cases []struct {
		Name string `json:"name"`
		Ops  []op   `json:"ops"`
	} `json:"process_packet_cases"`
	ReceiveQueueFull []struct {
		Name      string         `json:"name"`
		Steps     int            `json:"steps"`
		SentOK    int            `json:"sent_ok"`
		PoppedEnd int            `json:"popped_at_end"`
		Later     int            `json:"later_message_delivered"`
		Errors    map[string]int `json:"receiver_errors"`
	} `json:"receive_queue_full"`
	Wrap struct {
		Steps     int `json:"steps"`
		Sent      int `json:"sent"`
		Delivered int `json:"delivered"`
	} `json:"reliable_sequence_wrap"`
	Bulk []struct {
		Name      string `json:"name"`
		Size      int    `json:"size"`
		Reliable  bool   `json:"reliable"`
		Delivered []int  `json:"delivered_sizes"`
		Steps     int    `json:"steps"`
		Datagrams int    `json:"datagrams_from_A"`
		First     []struct {
			Bytes vectortest.Hex `json:"bytes"`
		} `json:"first_datagrams_from_A"`
	} `json:"bulk"`
	AssertionsFired []any `json:"assertions_fired"`
}

// op is one op of transport.json.
type op struct {
	Op         string          `json:"op"`
	Side       string          `json:"side"`
	Reliable   *bool           `json:"-"` // a flag (send) or, as RelPopped, a list (pop)
	Size       int             `json:"size"`
	Tag        int             `json:"tag"`
	Result     string          `json:"result"`
	Error      string          `json:"error"`
	SendQueue  *int            `json:"send_queue_count"`
	Emitted    []int           `json:"emitted"`
	DT         float64         `json:"dt"`
	TimeAfter  float64         `json:"time_after"`
	Unacked    *int            `json:"unacked_fragments"`
	InFlight   []inFlight      `json:"in_flight"`
	Datagram   *int            `json:"datagram"`
	Bytes      *vectortest.Hex `json:"bytes"`
	ReceiveSeq *uint16         `json:"reliable_receive_sequence"`
	RelPopped  []popped        `json:"-"`
	FafPopped  []popped        `json:"fire_and_forget"`
}

// UnmarshalJSON lets "reliable" be a flag (send) or a list (pop).
func (o *op) UnmarshalJSON(b []byte) error {
	type plain op
	var raw struct {
		plain
		Reliable any `json:"reliable"`
	}
	if err := jsonUnmarshal(b, &raw); err != nil {
		return err
	}
	*o = op(raw.plain)
	switch r := raw.Reliable.(type) {
	case bool:
		o.Reliable = &r
	case []any:
		var l struct {
			Reliable []popped `json:"reliable"`
		}
		if err := jsonUnmarshal(b, &l); err != nil {
			return err
		}
		o.RelPopped = l.Reliable
	}
	return nil
}

// senderDeviates are the scenarios whose sender side Go deliberately
// does not reproduce; their receiver side is replayed on cute_net.h's
// datagrams.
var senderDeviates = map[string]string{
	"fire_and_forget_1100": "a fire-and-forget message of k·1100 bytes goes whole: cute_net.h's last fragment is empty",
	"fire_and_forget_2200": "a fire-and-forget message of k·1100 bytes goes whole: cute_net.h's last fragment is empty",
	"empty_messages":       "sends of 0 bytes are refused (ErrEmpty), as cn_client_send and cn_server_send refuse them",
}

// TestTransportVectors replays the 26 scenarios of transport.json on two
// Transports: every datagram byte for byte, resend times, the in-flight
// array's order, what each side delivers and when.
func TestTransportVectors(t *testing.T) {
	var v transportVectors
	require.NoError(t, vectortest.LoadCute(vectorPath("transport.json"), &v))
	require.Len(t, v.Scenarios, 26)
	require.Empty(t, v.AssertionsFired)
	datagrams := 0
	for _, sc := range v.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			bytes := map[int][]byte{}
			from := map[int]string{}
			for _, d := range sc.Datagrams {
				bytes[d.ID] = d.Bytes
				from[d.ID] = d.From
				datagrams++
			}
			deviates := senderDeviates[sc.Name] != ""
			sides := map[string]*side{"A": newSide(t, replayConfig, 0), "B": newSide(t, replayConfig, 0)}
			for i, o := range sc.Ops {
				s := sides[o.Side]
				where := fmt.Sprintf("op %d (%s %s)", i, o.Op, o.Side)
				checkSender := !deviates || o.Side != "A"
				switch o.Op {
				case "send":
					err := s.t.Send(tagged(o.Tag, o.Size), *o.Reliable)
					if o.Size == 0 {
						require.ErrorIs(t, err, ErrEmpty, where)
						continue
					}
					require.NoError(t, err, where)
					checkEmitted(t, s, o, bytes, checkSender, where)
				case "update":
					s.now += o.DT
					require.NoError(t, s.t.Update(at(s.now)), where)
					checkEmitted(t, s, o, bytes, checkSender, where)
					if checkSender {
						require.Equal(t, o.TimeAfter, s.t.a.time, where)
						require.Equal(t, *o.Unacked, s.t.Unacked(), where)
						require.Equal(t, *o.SendQueue, s.t.Queued(), where)
						require.Equal(t, o.InFlight, s.inFlight(), where)
					}
				case "process":
					require.NotEqual(t, o.Side, from[*o.Datagram], where)
					err := s.t.Receive(bytes[*o.Datagram])
					require.ErrorIs(t, err, processErrors[o.Error], where)
					if err == nil {
						require.Equal(t, "ok", o.Result, where)
					}
					if checkSender || o.Side == "B" {
						require.Equal(t, *o.ReceiveSeq, s.t.rel.next, where)
					}
				case "pop":
					rel, faf := s.popAll()
					if !checkSender {
						continue
					}
					checkPops(t, o, rel, faf, where)
				case "step", "drop", "hold":
				default:
					t.Fatalf("%s: unknown op", where)
				}
			}
		})
	}
	assert.Equal(t, 276, datagrams)
}

// checkEmitted checks what s emitted in an op against the vector's
// datagrams, byte for byte unless the sender deviates, where it checks
// that the deviation is the documented one.
func checkEmitted(t *testing.T, s *side, o op, bytes map[int][]byte, exact bool, where string) {
	t.Helper()
	got := s.take()
	require.Len(t, got, len(o.Emitted), where)
	for j, id := range o.Emitted {
		want := bytes[id]
		if exact {
			require.Equal(t, want, got[j], "%s: datagram %d", where, id)
			continue
		}
		// Same headers but the message sequence (empty_messages: the
		// refused empty sends used none) and the fragment size, and the
		// message whole.
		g := got[j]
		require.Equal(t, want[:9], g[:9], "%s: datagram %d", where, id)
		require.Equal(t, want[11:15], g[11:15], "%s: datagram %d", where, id)
		require.Equal(t, uint16(len(g)-17), u16(g, 15), where)
		if o.Op == "send" {
			require.Equal(t, tagged(o.Tag, o.Size)[int(u16(g, 13))*FragmentBytes:][:len(g)-17], g[17:], where)
		}
	}
}

// checkPops checks the messages a pop op delivered.
func checkPops(t *testing.T, o op, rel, faf [][]byte, where string) {
	t.Helper()
	require.Len(t, rel, len(o.RelPopped), where)
	for j, m := range o.RelPopped {
		checkMessage(t, m, rel[j], where)
	}
	require.Len(t, faf, len(o.FafPopped), where)
	for j, m := range o.FafPopped {
		checkMessage(t, m, faf[j], where)
	}
}
