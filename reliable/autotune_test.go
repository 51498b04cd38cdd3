package reliable

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tuneLink is a Stream's sender a and receiver b joined in memory on
// simulated time, 100 µs a step, each way's packets delivered every 2 ms
// (a path whose RTT the window bounds), whose reader takes perStep bytes
// a step (all that is ready if 0).
type tuneLink struct {
	a, b     *core
	toA, toB wire
	now      time.Time
	buf      []byte
	read     int
}

func newTuneLink(t *testing.T, cfg Config) *tuneLink {
	t.Helper()
	r, err := cfg.resolve(true)
	require.NoError(t, err)
	l := &tuneLink{now: time.Unix(1000, 0), buf: make([]byte, 1<<20)}
	l.a, err = newCore(r, l.now, l.toB.push)
	require.NoError(t, err)
	l.b, err = newCore(r, l.now, l.toA.push)
	require.NoError(t, err)
	return l
}

// run moves total bytes from a to b and returns the largest receive
// window b had.
func (l *tuneLink) run(t *testing.T, total, perStep int) uint32 {
	t.Helper()
	a, b := l.a, l.b
	s, r := &a.chans[0].snd, &b.chans[0].rcv
	written, most := 0, r.window
	data := make([]byte, 16<<10)
	for step := 0; l.read < total; step++ {
		require.Less(t, step, 1_000_000, "stalled at %d of %d bytes", l.read, total)
		l.now = l.now.Add(100 * time.Microsecond)
		a.setTime(l.now)
		for written < total && s.queued()+len(data) <= s.limit {
			s.write(data)
			written += len(data)
		}
		a.flush()
		hop := step%20 == 0
		if hop {
			l.toB.deliver(b, l.now)
		}
		want := len(l.buf)
		if perStep > 0 {
			want = perStep
		}
		if r.ready > 0 {
			l.read += r.read(l.buf[:want], true)
			if r.advertise || r.tuneDue() {
				b.readDone(l.now, r)
			}
		}
		most = max(most, r.window)
		if step%100 == 0 {
			a.tick(l.now)
			b.tick(l.now)
		}
		b.flush()
		if hop {
			l.toA.deliver(a, l.now)
		}
		require.NoError(t, a.err)
		require.NoError(t, b.err)
	}
	return most
}

// TestWindowAutoTune checks that a Stream's receive window left at its
// default doubles, up to its maximum, while a fast reader consumes it,
// stays put for a reader slower than the path, and that an explicit
// WindowBytes stays what the user chose, as does a Session channel's
// default.
func TestWindowAutoTune(t *testing.T) {
	r, err := (&Config{}).resolve(true)
	require.NoError(t, err)
	initial, most := uint32(r.chans[0].window), uint32(r.chans[0].maxWindow)
	require.Equal(t, uint32((defaultMaxWindowBytes+r.chunkMax-1)/r.chunkMax), most)
	require.Greater(t, most, initial)
	session, err := (&Config{}).resolve(false)
	require.NoError(t, err)
	assert.Equal(t, session.chans[0].window, session.chans[0].maxWindow, "a Session's channel keeps its default window")
	tests := []struct {
		name    string
		cfg     Config
		perStep int // bytes the reader takes per 100 µs; 0: all
		want    uint32
	}{
		{"default, fast reader: grows to the maximum", Config{}, 0, most},
		{"default, slow reader: stays", Config{}, 1 << 10, initial},
		{"explicit default size: fixed", Config{WindowBytes: defaultWindowBytes}, 0, initial},
		{"explicit 64 KiB: fixed", Config{WindowBytes: 64 << 10}, 0, (64<<10 + uint32(r.chunkMax) - 1) / uint32(r.chunkMax)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTuneLink(t, tt.cfg)
			total := 16 << 20
			if tt.perStep > 0 {
				total = 1 << 20
			}
			got := l.run(t, total, tt.perStep)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want, l.b.chans[0].rcv.window)
			assert.Equal(t, total, l.read)
		})
	}
}

// TestWindowAutoTuneHostile is a peer that withholds one chunk and sends
// every later one it can, up to four maximum windows past it: with the
// window at its default, and after a fast reader grew it to the maximum,
// what the receiver buffers never exceeds the maximum window (nor the
// window it had: with nothing to read, the window does not grow), and
// the chunks past the window are refused.
func TestWindowAutoTuneHostile(t *testing.T) {
	tests := []struct {
		name  string
		grown bool // a fast reader first grows the window
	}{
		{"at the default", false},
		{"grown to the maximum", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTuneLink(t, Config{})
			b := l.b
			rc := &b.chans[0].rcv
			if tt.grown {
				l.run(t, 16<<20, 0)
				require.Equal(t, rc.maxWindow, rc.window)
			}
			window, chunk := rc.window, b.cfg.chunkMax
			limit := int(rc.maxWindow) * chunk
			require.LessOrEqual(t, limit, defaultMaxWindowBytes+chunk, "the maximum, rounded up to a chunk")
			data := make([]byte, chunk)
			pkt := make([]byte, 0, b.cfg.maxPayload)
			withheld := rc.next
			refused := 0
			for k := uint32(1); k < 4*rc.maxWindow; k++ {
				l.now = l.now.Add(time.Microsecond)
				b.setTime(l.now)
				pkt = binary.LittleEndian.AppendUint32(pkt[:0], b.cfg.layout)
				pkt = append(pkt, entryChunk, 0, 0)
				pkt = binary.LittleEndian.AppendUint32(pkt, withheld+k)
				pkt = binary.LittleEndian.AppendUint16(pkt, uint16(chunk))
				pkt = append(pkt, data...)
				if !b.process(uint16(k), pkt) {
					refused++
				}
				require.NoError(t, b.err)
				require.Zero(t, rc.read(l.buf, true), "chunk %d was withheld", withheld)
				if rc.advertise || rc.tuneDue() {
					b.readDone(l.now, rc)
				}
				held := 0
				for _, s := range rc.slots {
					if s.present {
						held += len(s.data)
					}
				}
				require.LessOrEqual(t, held, limit, "buffered past the maximum window")
				require.LessOrEqual(t, held, int(window)*chunk, "buffered past the window")
			}
			assert.Equal(t, window, rc.window, "the window grew with nothing read")
			assert.Equal(t, int(window)-1, rc.held, "the window's chunks but the withheld one")
			assert.Equal(t, int(4*rc.maxWindow)-int(window), refused, "chunks past the window taken")
		})
	}
}
