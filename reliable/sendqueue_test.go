package reliable

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWakeWriter: a writer waiting for room in a send queue is woken once
// the queue has the room it waits for: a Write, which takes what fits,
// once a quarter of the queue is free or all it has left fits; a Send,
// once its whole message fits; with nobody waiting, at any room.
func TestWakeWriter(t *testing.T) {
	const limit = 4096
	for _, tc := range []struct {
		name    string
		need    int  // what the writer waits for; 0: nobody waits
		partial bool // a Write (takes what fits) rather than a Send
		room    int
		woken   bool
	}{
		{"nobody waits", 0, false, 1, true},
		{"write, a little free", 10000, true, 500, false},
		{"write, just short of a quarter", 10000, true, limit/4 - 1, false},
		{"write, a quarter free", 10000, true, limit / 4, true},
		{"write, the rest fits", 100, true, 100, true},
		{"write, the rest does not fit", 100, true, 99, false},
		{"send, short", 3000, false, 2999, false},
		{"send, fits", 3000, false, 3000, true},
		{"send, past the limit, queue empty", 2 * limit, false, limit, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &relSend{limit: limit, qlen: limit - tc.room}
			cs := &chanState{writable: make(chan struct{}, 1)}
			if tc.need > 0 {
				s.waitRoom(tc.need, tc.partial)
			}
			s.wakeWriter(cs)
			assert.Equal(t, tc.woken, len(cs.writable) == 1)
		})
	}
}

// TestInFlightPackets: what a netcode Conn's read queue is raised to hold
// when a Stream or Session attaches is a packet per chunk of its reliable
// windows at their largest (a Stream's default one grows), and the
// margin.
func TestInFlightPackets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     *Config
		stream  bool
		windows []int // bytes of each reliable window
	}{
		{"stream, default window", nil, true, []int{defaultMaxWindowBytes}},
		{"session, default window", nil, false, []int{DefaultMaxReliableMessage + messageLenBytes + 1168}},
		{"stream, 1 MiB window", &Config{WindowBytes: 1 << 20}, true, []int{1 << 20}},
		{"session, two reliable channels", &Config{WindowBytes: 64 << 10, Channels: []ChannelConfig{
			{Kind: ReliableOrdered, MaxMessageSize: 1024}, {Kind: Unreliable}, {Kind: ReliableOrdered, MaxMessageSize: 1024},
		}}, false, []int{64 << 10, 64 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.cfg.resolve(tc.stream)
			require.NoError(t, err)
			want := inFlightMargin
			for _, w := range tc.windows {
				want += (w + r.chunkMax - 1) / r.chunkMax
			}
			assert.Equal(t, want, r.inFlightPackets())
		})
	}
}
