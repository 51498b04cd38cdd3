package reliable

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/stretchr/testify/require"
)

// peerEnv names the environment variable that makes TestStreamPeer the
// receiving process of BenchmarkStreamThroughput.
const peerEnv = "RELIABLE_STREAM_PEER"

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestStreamPeer is the receiving process of BenchmarkStreamThroughput,
// which starts this test binary again with peerEnv set; otherwise it does
// nothing. It listens on UDP loopback, prints its address, reads one
// Stream to its end and prints the CPU time that took.
func TestStreamPeer(t *testing.T) {
	if os.Getenv(peerEnv) == "" {
		t.Skip("the receiving process of BenchmarkStreamThroughput; runs only when started by it")
	}
	l, err := netcode.Listen("udp4", "127.0.0.1:0", serverConfig())
	require.NoError(t, err)
	defer l.Close()
	fmt.Printf("addr %s\n", l.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := l.AcceptConn(ctx)
	require.NoError(t, err)
	s, err := NewStream(nc, nil)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	n, err := s.Read(buf) // the first bytes: the transfer starts
	require.NoError(t, err)
	cpu0 := cpuTime(t)
	m, err := io.CopyBuffer(io.Discard, s, buf)
	require.NoError(t, err)
	cpu := cpuTime(t) - cpu0
	sent := s.Stats().Endpoint.PacketsSent
	require.NoError(t, s.Close())
	fmt.Printf("received %d cpu %d packets %d\n", int64(n)+m, cpu.Nanoseconds(), sent)
}

// BenchmarkStreamThroughput measures one Stream with default settings
// over netcode on UDP loopback, with the receiver in a process of its own
// (this test binary again, as TestStreamPeer), so that each side's CPU
// time is its own: MB/s of goodput, and the sender's and the receiver's
// CPU seconds per GB (from getrusage), the figures a loaded machine moves
// least. Each iteration writes 1 MiB; -benchtime 256x moves 256 MiB.
// -cpuprofile profiles the sender; RELIABLE_STREAM_PEER_CPUPROFILE=file
// the receiver.
func BenchmarkStreamThroughput(b *testing.B) {
	args := []string{"-test.run=^TestStreamPeer$", "-test.count=1"}
	if prof := os.Getenv(peerEnv + "_CPUPROFILE"); prof != "" {
		args = append(args, "-test.cpuprofile="+prof) // the receiver's profile
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), peerEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	defer func() {
		_ = cmd.Process.Kill() // after a failure; harmless once it exited
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	field := func(key string) string {
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) >= 2 && f[0] == key {
				return lines.Text()
			}
		}
		b.Fatalf("receiver process printed no %q line", key)
		return ""
	}
	addr := netip.MustParseAddrPort(strings.Fields(field("addr"))[1])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := netcode.DialContext(ctx, mint(b, addr))
	require.NoError(b, err)
	s, err := NewStream(nc, nil)
	require.NoError(b, err)

	buf := make([]byte, goodputChunk)
	pattern(buf, 1)
	b.SetBytes(goodputChunk)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime(b)
	for range b.N {
		if _, err := s.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Close()) // returns once the receiver acknowledged everything
	cpu, wall := cpuTime(b)-cpu0, time.Since(start)
	st := s.Stats()
	b.StopTimer()

	f := strings.Fields(field("received"))
	got, _ := strconv.ParseInt(f[1], 10, 64)
	rcpu, _ := strconv.ParseInt(f[3], 10, 64)
	io.Copy(io.Discard, out) // let it finish: write its profile, exit
	total := float64(b.N) * goodputChunk
	require.Equal(b, int64(total), got, "bytes received")
	b.ReportMetric(total/wall.Seconds()/1e6, "MB/s")
	b.ReportMetric(cpu.Seconds()/(total/1e9), "send-CPU-s/GB")
	b.ReportMetric(float64(rcpu)/1e9/(total/1e9), "recv-CPU-s/GB")
	acks, _ := strconv.ParseInt(f[5], 10, 64)
	mib := total / (1 << 20)
	b.ReportMetric(float64(st.Endpoint.PacketsSent)/mib, "pkts/MiB")
	b.ReportMetric(float64(st.Resent)/mib, "resent/MiB")
	b.ReportMetric(float64(acks)/mib, "acks/MiB")
	b.ReportMetric(0, "ns/op")
}
