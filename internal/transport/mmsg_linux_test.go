package transport

import (
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestLinuxUsesMmsg(t *testing.T) {
	for _, tc := range []struct {
		network, addr string
		family        int
	}{
		{"udp4", "127.0.0.1:0", unix.AF_INET},
		{"udp6", "[::1]:0", unix.AF_INET6},
		{"udp", ":0", unix.AF_INET6},
	} {
		uc := listenUDP(t, tc.network, tc.addr)
		c, ok := New(uc).(*mmsgConn)
		require.True(t, ok, tc.network)
		if tc.network == "udp" && uc.LocalAddr().(*net.UDPAddr).IP.To4() != nil {
			tc.family = unix.AF_INET // no IPv6 on this host
		}
		assert.Equal(t, tc.family, c.family, tc.network)
		uc.Close()
	}
}

func TestListenBuffers(t *testing.T) {
	c, err := Listen("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer c.Close()
	rc, err := c.(*mmsgConn).c.SyscallConn()
	require.NoError(t, err)
	var rcv, snd int
	require.NoError(t, rc.Control(func(fd uintptr) {
		rcv, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		snd, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	}))
	// Linux doubles the value asked for; a limited host may give less.
	t.Logf("SO_RCVBUF %d, SO_SNDBUF %d", rcv, snd)
	assert.Positive(t, rcv)
	assert.Positive(t, snd)
}

// FuzzSockaddr checks that every destination survives the trip through the
// raw sockaddr encoding and back (unmapped), for both socket families, and
// that decoding arbitrary bytes never panics.
func FuzzSockaddr(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1}, uint16(40000), []byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, uint16(1), []byte{})
	f.Add([]byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, uint16(65535), make([]byte, 28))
	f.Fuzz(func(t *testing.T, ip []byte, port uint16, raw []byte) {
		var sa unix.RawSockaddrInet6
		copy((*[unix.SizeofSockaddrInet6]byte)(unsafe.Pointer(&sa))[:], raw)
		_ = decodeSockaddr(&sa, uint32(len(raw)))

		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		ap := netip.AddrPortFrom(a, port)
		for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
			c := &mmsgConn{family: fam}
			var h unix.Msghdr
			sa = unix.RawSockaddrInet6{}
			if !c.encodeSockaddr(&sa, &h, ap) {
				assert.True(t, fam == unix.AF_INET && !a.Unmap().Is4(), "%v refused by family %d", ap, fam)
				continue
			}
			got := decodeSockaddr(&sa, h.Namelen)
			assert.Equal(t, a.Unmap(), got.Addr())
			assert.Equal(t, port, got.Port())
		}
	})
}

// TestMmsghdrLayout checks the local struct mmsghdr against the C layout:
// a msghdr, an unsigned int, and padding to the pointer alignment.
func TestMmsghdrLayout(t *testing.T) {
	var h mmsghdr
	assert.Equal(t, uintptr(unix.SizeofMsghdr), unsafe.Offsetof(h.Len))
	assert.Equal(t, uintptr(unix.SizeofMsghdr)+unsafe.Sizeof(uintptr(0)), unsafe.Sizeof(h))
}

// TestScratchFollowsUse checks that a socket carries only the batch scratch
// its owner uses: read headers for the batches it reads, and write scratch
// only once it writes a batch. A process with thousands of client sockets
// (a bridge's relay) would otherwise hold 14 KiB of headers per socket.
func TestScratchFollowsUse(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		readBatch, writeSize int
	}{
		{"client", 8, 10},
		{"server", 64, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rx := listenUDP(t, "udp4", "127.0.0.1:0")
			defer rx.Close()
			tx := listenUDP(t, "udp4", "127.0.0.1:0")
			defer tx.Close()
			r := New(rx).(*mmsgConn)
			w := New(tx).(*mmsgConn)
			assert.Empty(t, r.r.hdrs, "read scratch before the first read")
			assert.Empty(t, w.wfree, "write scratch before the first batched write")

			to := rx.LocalAddr().(*net.UDPAddr).AddrPort()
			out := make([]Message, tc.writeSize)
			for i := range out {
				out[i] = Message{Buf: []byte{byte(i)}, Addr: to}
			}
			n, err := w.WriteBatch(out)
			require.NoError(t, err)
			require.Equal(t, tc.writeSize, n)
			require.Len(t, w.wfree, 1, "the batch's scratch is kept for the next")
			assert.GreaterOrEqual(t, len(w.wfree[0].hdrs), tc.writeSize)

			in := make([]Message, tc.readBatch)
			for i := range in {
				in[i].Buf = make([]byte, MaxDatagram)
			}
			got := 0
			for got < tc.writeSize {
				n, err := r.ReadBatch(in)
				require.NoError(t, err)
				got += n
			}
			assert.Len(t, r.r.hdrs, tc.readBatch, "read scratch sized to the batches read")
		})
	}
}
