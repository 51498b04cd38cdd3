package layer

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/testing/vectortest"
)

// transcriptVectors is transcript.json: whole cn_client_* / cn_server_*
// runs, each UDP datagram with its decrypted protocol payload, the
// transport bytes.
type transcriptVectors struct {
	Transcripts []struct {
		Name  string `json:"name"`
		Steps []struct {
			Step         *int     `json:"step"`
			AppCalls     []string `json:"app_calls_before_update"`
			ClientState  int      `json:"client_state"`
			Slot0        bool     `json:"server_slot0_connected"`
			ServerEvents []struct {
				Type string         `json:"type"`
				Size int            `json:"size"`
				Tag  int            `json:"tag"`
				Data vectortest.Hex `json:"data"`
			} `json:"server_events"`
			ClientPopped    []popped       `json:"client_popped"`
			ClientTransport transportState `json:"client_transport"`
			ServerTransport transportState `json:"server_transport_slot0"`
			Datagrams       []struct {
				ID        int            `json:"id"`
				Dir       string         `json:"dir"`
				Type      int            `json:"type"`
				Payload   vectortest.Hex `json:"payload"`
				Delivered bool           `json:"delivered"`
			} `json:"datagrams"`
		} `json:"steps"`
	} `json:"transcripts"`
	AssertionsFired []any `json:"assertions_fired"`
}

// transportState is a transport's state after a step.
type transportState struct {
	Unacked    int    `json:"unacked_fragments"`
	SendQueue  int    `json:"send_queue"`
	SendSeq    uint16 `json:"reliable_send_sequence"`
	ReceiveSeq uint16 `json:"reliable_receive_sequence"`
	AckSeq     uint16 `json:"ack_sequence"`
}

func (s *side) state() transportState {
	return transportState{
		Unacked: s.t.Unacked(), SendQueue: s.t.Queued(),
		SendSeq: s.t.relSend, ReceiveSeq: s.t.rel.next, AckSeq: s.t.a.sequence,
	}
}

// payloadPAYLOAD is the protocol's PAYLOAD packet type.
const typePayload = 7

var sendCall = regexp.MustCompile(`^cn_(client|server)_send\((?:client 0, )?tag=(\d+), size=(\d+), reliable=([01])\) -> ok$`)

// wireDatagram is a transport datagram on the simulated network.
type wireDatagram struct {
	payload   []byte
	delivered bool
}

// TestTranscriptVectors replays the 4 client/server runs of
// transcript.json on a client's and a server slot's Transports, in the
// order cn_client_update and cn_server_update drive them: every
// transport datagram inside a PAYLOAD byte for byte, the server's
// events, the client's pops with their reliable flag, and both
// transports' state after every step. A server slot's transport is made
// anew at DISCONNECTED; the client's is kept across a reconnect, as
// cute_net.h does (a Go Conn is one connection: a reconnect is a new one).
func TestTranscriptVectors(t *testing.T) {
	var v transcriptVectors
	require.NoError(t, vectortest.LoadCute(vectorPath("transcript.json"), &v))
	require.Len(t, v.Transcripts, 4)
	require.Empty(t, v.AssertionsFired)
	const dt = 1.0 / 16
	for _, tr := range v.Transcripts {
		t.Run(tr.Name, func(t *testing.T) {
			want := map[string][]wireDatagram{}
			for _, st := range tr.Steps {
				for _, d := range st.Datagrams {
					if d.Type == typePayload {
						want[d.Dir] = append(want[d.Dir], wireDatagram{d.Payload, d.Delivered})
					}
				}
			}
			client, server := newSide(t, replayConfig, 0), newSide(t, replayConfig, 0)
			var toClient, toServer [][]byte
			// route checks what s emitted against the next datagrams of dir
			// and puts the delivered ones in the peer's inbox.
			route := func(s *side, dir string, inbox *[][]byte, where string) {
				for _, b := range s.take() {
					require.NotEmpty(t, want[dir], "%s: %s: datagram not in the transcript", where, dir)
					w := want[dir][0]
					want[dir] = want[dir][1:]
					require.Equal(t, []byte(w.payload), b, "%s: %s", where, dir)
					if w.delivered {
						*inbox = append(*inbox, b)
					}
				}
			}
			receive := func(s *side, inbox *[][]byte) {
				for _, b := range *inbox {
					_ = s.t.Receive(b) // errors are ignored, as cn_*_update does
				}
				*inbox = nil
			}
			for _, st := range tr.Steps {
				if st.Step == nil {
					continue // the reconnect token
				}
				where := fmt.Sprintf("step %d", *st.Step)
				for _, call := range st.AppCalls {
					m := sendCall.FindStringSubmatch(call)
					if m == nil {
						continue // connect / disconnect: the protocol layer's
					}
					tag, _ := strconv.Atoi(m[2])
					size, _ := strconv.Atoi(m[3])
					if m[1] == "client" {
						require.NoError(t, client.t.Send(tagged(tag, size), m[4] == "1"), where)
						route(client, "client_to_server", &toServer, where)
					} else {
						require.NoError(t, server.t.Send(tagged(tag, size), m[4] == "1"), where)
						route(server, "server_to_client", &toClient, where)
					}
				}
				// cn_client_update: transport update, then the payloads.
				if st.ClientState == 3 {
					client.now += dt
					require.NoError(t, client.t.Update(at(client.now)), where)
					route(client, "client_to_server", &toServer, where)
					receive(client, &toClient)
				} else {
					toClient = nil
				}
				// cn_server_update: events (payloads, DISCONNECTED), then the
				// transport update.
				disconnected := false
				for _, e := range st.ServerEvents {
					disconnected = disconnected || e.Type == "DISCONNECTED"
				}
				if disconnected {
					server = newSide(t, replayConfig, 0)
					toServer = nil
				}
				receive(server, &toServer)
				if st.Slot0 {
					server.now += dt
					require.NoError(t, server.t.Update(at(server.now)), where)
					route(server, "server_to_client", &toClient, where)
					rel, faf := server.popAll()
					got := append(rel, faf...)
					var events []popped
					for _, e := range st.ServerEvents {
						if e.Type == "PAYLOAD_PACKET" {
							events = append(events, popped{Size: e.Size, Tag: e.Tag, Data: e.Data})
						}
					}
					require.Len(t, got, len(events), where)
					for i, e := range events {
						checkMessage(t, e, got[i], where)
					}
				}
				if st.ClientState == 3 {
					var got []popped
					for {
						m, reliable, ok := client.t.Peek()
						if !ok {
							break
						}
						got = append(got, popped{Size: len(m), Data: append([]byte(nil), m...), WasSentReliably: &reliable})
						client.t.Pop()
					}
					require.Len(t, got, len(st.ClientPopped), where)
					for i, p := range st.ClientPopped {
						checkMessage(t, p, got[i].Data, where)
						require.Equal(t, *p.WasSentReliably, *got[i].WasSentReliably, where)
					}
				}
				require.Equal(t, st.ClientTransport, client.state(), "%s: client transport", where)
				require.Equal(t, st.ServerTransport, server.state(), "%s: server transport", where)
			}
			require.Empty(t, want["client_to_server"])
			require.Empty(t, want["server_to_client"])
		})
	}
}
