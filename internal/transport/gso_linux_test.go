package transport

import (
	"bytes"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// kernelHasGSO asks the kernel itself, not the code under test, whether
// it segments UDP trains.
func kernelHasGSO(t *testing.T) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	_, err = unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	return err == nil
}

// trainMsgs is a batch for two destinations: a train of 5 to a, 3 to b
// (the last shorter), a lone one to a, then 70 equal ones to b (more than
// one train holds), each datagram numbered in its first byte.
func trainMsgs(a, b netip.AddrPort) []Message {
	var ms []Message
	add := func(to netip.AddrPort, n, size int) {
		for range n {
			p := make([]byte, size)
			for j := range p {
				p[j] = byte(len(ms) + j)
			}
			ms = append(ms, Message{Buf: p, Addr: to})
		}
	}
	add(a, 5, 300)
	add(b, 2, 120)
	add(b, 1, 40)
	add(a, 1, 500)
	add(b, 70, 100)
	return ms
}

// TestPlanTrains checks how a batch is laid out in headers with and
// without GSO.
func TestPlanTrains(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:1000")
	b := netip.MustParseAddrPort("127.0.0.1:2000")
	c := &mmsgConn{family: unix.AF_INET}
	ms := trainMsgs(a, b)[:64]
	bt := newWriteBatch()
	for _, tc := range []struct {
		gso  bool
		segs []int
	}{
		{false, nil},
		{true, []int{5, 3, 1, 55}},
	} {
		t.Run(fmt.Sprint("gso=", tc.gso), func(t *testing.T) {
			require.Equal(t, len(ms), c.plan(bt, ms, tc.gso))
			if tc.segs == nil {
				require.Equal(t, len(ms), bt.n)
				return
			}
			require.Equal(t, tc.segs, bt.segs[:bt.n])
			k := 0
			for i := range bt.n {
				h := &bt.hdrs[i].Hdr
				assert.Equal(t, &bt.iovs[k], h.Iov)
				assert.EqualValues(t, tc.segs[i], h.Iovlen)
				if tc.segs[i] > 1 {
					cm, err := unix.ParseSocketControlMessage(bt.ctrl[i*cmsgSegSpace : (i+1)*cmsgSegSpace])
					require.NoError(t, err)
					require.Len(t, cm, 1)
					assert.Equal(t, int32(unix.UDP_SEGMENT), cm[0].Header.Type)
					assert.EqualValues(t, len(ms[k].Buf), uint16(cm[0].Data[0])|uint16(cm[0].Data[1])<<8)
				} else {
					assert.Zero(t, h.Controllen)
				}
				k += tc.segs[i]
			}
		})
	}
}

// TestTrainLimits: a train ends at 64 datagrams and at 65507 bytes.
func TestTrainLimits(t *testing.T) {
	a := netip.MustParseAddrPort("[::1]:1000")
	c := &mmsgConn{family: unix.AF_INET6}
	for _, tc := range []struct {
		size int
		segs []int
	}{
		{10, []int{64}},
		{1200, []int{54, 10}},
	} {
		ms := make([]Message, 64)
		for i := range ms {
			ms[i] = Message{Buf: make([]byte, tc.size), Addr: a}
		}
		bt := newWriteBatch()
		require.Equal(t, 64, c.plan(bt, ms, true))
		assert.Equal(t, tc.segs, bt.segs[:bt.n], "size %d", tc.size)
	}
}

// TestGSOTrains sends trains to two receivers over real UDP, IPv4 and
// IPv6, on every path, and checks that each receives its datagrams
// whole, in order, one by one; on the GSO path it checks the socket sends
// trains exactly when the kernel has GSO.
func TestGSOTrains(t *testing.T) {
	for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		for _, k := range kinds {
			t.Run(fam.network+"/"+k.name, func(t *testing.T) {
				tx := k.wrap(listenUDP(t, fam.network, fam.addr))
				defer tx.Close()
				if k.name == "gso" {
					assert.Equal(t, kernelHasGSO(t), GSO(tx))
				} else {
					assert.False(t, GSO(tx))
				}
				sendTrains(t, tx, fam.network, fam.addr, PathMmsg, nil, 16)
			})
		}
	}
}

// sendTrains writes trainMsgs from tx to two fresh receivers (on path
// rxPath, then given to setup if it is not nil) and checks what each
// reads in batches of up to batch.
func sendTrains(t *testing.T, tx Conn, network, addr string, rxPath Path, setup func(Conn), batch int) {
	t.Helper()
	var rx [2]Conn
	for i := range rx {
		rx[i] = onPath(rxPath)(listenUDP(t, network, addr))
		if setup != nil {
			setup(rx[i])
		}
		defer rx[i].Close()
	}
	ms := trainMsgs(addrOf(t, rx[0]), addrOf(t, rx[1]))
	n, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	require.Equal(t, len(ms), n)
	for i, r := range rx {
		var want [][]byte
		for _, m := range ms {
			if m.Addr == addrOf(t, r) {
				want = append(want, m.Buf)
			}
		}
		var got [][]byte
		in := newMsgs(batch)
		require.NoError(t, r.SetReadDeadline(time.Now().Add(5*time.Second)))
		for len(got) < len(want) {
			for j := range in {
				in[j].Buf = in[j].Buf[:cap(in[j].Buf)]
			}
			n, err := r.ReadBatch(in)
			require.NoError(t, err, "receiver %d after %d of %d", i, len(got), len(want))
			for _, m := range in[:n] {
				assert.Equal(t, addrOf(t, tx), m.Addr)
				got = append(got, append([]byte(nil), m.Buf...))
			}
		}
		assert.Equal(t, want, got, "receiver %d", i)
	}
}

// TestGSOFallback: a train the kernel refuses is sent again datagram by
// datagram; EIO, what a device without checksum offload answers, turns
// GSO off for the socket, another error does not.
func TestGSOFallback(t *testing.T) {
	if !kernelHasGSO(t) {
		t.Skip("the kernel has no UDP GSO")
	}
	for _, tc := range []struct {
		errno   syscall.Errno
		gsoLeft bool
	}{
		{unix.EIO, false},
		{unix.EINVAL, true},
	} {
		for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
			t.Run(fam.network+"/"+tc.errno.Error(), func(t *testing.T) {
				tx := onPath(PathBest)(listenUDP(t, fam.network, fam.addr))
				defer tx.Close()
				require.True(t, GSO(tx))
				gsoFault = tc.errno
				defer func() { gsoFault = 0 }()
				sendTrains(t, tx, fam.network, fam.addr, PathMmsg, nil, 16)
				assert.Equal(t, tc.gsoLeft, GSO(tx))
			})
		}
	}
}

// kernelHasGRO asks the kernel itself whether a UDP socket takes
// coalesced datagrams.
func kernelHasGRO(t *testing.T) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
}

// TestGRO: receivers with GRO on, over real UDP, IPv4 and IPv6, get GSO
// trains from loopback as super-datagrams (the kernel does not cut them)
// and hand them out as the datagrams that were sent, in order, whatever
// the caller's batch size (what does not fit waits for the next read).
// Without GSO on the sender they get the datagrams one by one.
func TestGRO(t *testing.T) {
	if !kernelHasGRO(t) {
		t.Skip("the kernel has no UDP GRO")
	}
	for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		for _, sender := range []Path{PathBest, PathMmsg} {
			for _, batch := range []int{1, 3, 64} {
				t.Run(fmt.Sprint(fam.network, "/", sender, "/", batch), func(t *testing.T) {
					tx := onPath(sender)(listenUDP(t, fam.network, fam.addr))
					defer tx.Close()
					var rx []Conn
					sendTrains(t, tx, fam.network, fam.addr, PathBest, func(c Conn) {
						require.True(t, EnableGRO(c))
						require.True(t, GRO(c))
						rx = append(rx, c)
					}, batch)
					coalesced := 0
					for _, c := range rx {
						coalesced += c.(*mmsgConn).gro.coalesced
					}
					if sender == PathBest {
						assert.Positive(t, coalesced, "trains arrive coalesced")
					} else {
						assert.Zero(t, coalesced)
					}
				})
			}
		}
	}
	for _, p := range []Path{PathMmsg, PathPlain} {
		c := onPath(p)(listenUDP(t, "udp4", "127.0.0.1:0"))
		assert.False(t, EnableGRO(c), "GRO on %v", p)
		assert.False(t, GRO(c))
		c.Close()
	}
}

// TestGROSegment parses UDP_GRO control messages, and refuses what is not
// one without reading past the bytes given.
func TestGROSegment(t *testing.T) {
	msg := func(level, typ int32, data []byte) []byte {
		b := make([]byte, unix.CmsgSpace(len(data)))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(len(data)))
		copy(b[unix.CmsgLen(0):], data)
		return b
	}
	gro := msg(unix.IPPROTO_UDP, unix.UDP_GRO, []byte{0xdc, 0x05, 0, 0}) // 1500
	for _, tc := range []struct {
		name string
		p    []byte
		want int
	}{
		{"one", gro, 1500},
		{"after another", append(msg(unix.SOL_IP, unix.IP_TOS, []byte{1}), gro...), 1500},
		{"none", nil, 0},
		{"another only", msg(unix.SOL_IP, unix.IP_TOS, []byte{1}), 0},
		{"truncated", gro[:unix.CmsgLen(0)+1], 0},
		{"short header", gro[:4], 0},
	} {
		assert.Equal(t, tc.want, groSegment(tc.p), tc.name)
	}
}

// TestGSOOneTrain: a train to one peer is one header, sent by sendmsg;
// trains up to rawTrain go as a raw system call, longer ones through
// Syscall. Each length on either side of the bound arrives whole and in
// order, on IPv4 and IPv6.
func TestGSOOneTrain(t *testing.T) {
	for _, fam := range []struct{ network, addr string }{{"udp4", "127.0.0.1:0"}, {"udp6", "[::1]:0"}} {
		for _, n := range []int{2, rawTrain, rawTrain + 1, MaxTrainSegments} {
			t.Run(fmt.Sprintf("%s/%d", fam.network, n), func(t *testing.T) {
				tx := onPath(PathBest)(listenUDP(t, fam.network, fam.addr))
				defer tx.Close()
				rx := onPath(PathMmsg)(listenUDP(t, fam.network, fam.addr))
				defer rx.Close()
				ms := make([]Message, n)
				for i := range ms {
					ms[i] = Message{Buf: bytes.Repeat([]byte{byte(i)}, 100), Addr: addrOf(t, rx)}
				}
				k, err := tx.WriteBatch(ms)
				require.NoError(t, err)
				require.Equal(t, n, k)
				in := newMsgs(8)
				require.NoError(t, rx.SetReadDeadline(time.Now().Add(5*time.Second)))
				for got := 0; got < n; {
					for j := range in {
						in[j].Buf = in[j].Buf[:cap(in[j].Buf)]
					}
					k, err := rx.ReadBatch(in)
					require.NoError(t, err, "after %d of %d", got, n)
					for _, m := range in[:k] {
						require.Equal(t, ms[got].Buf, m.Buf, "datagram %d of %d", got, n)
						got++
					}
				}
			})
		}
	}
}
