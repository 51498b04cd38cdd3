//go:build linux

// Package lossnet runs a test in a private network namespace in which the
// traffic to one address crosses a slow, lossy link, so that a browser
// and the servers it talks to, all inside the namespace, see loss and
// delay that nothing on the host does.
//
// The link is a TUN device, Dev, holding the namespace's address Local
// and routing Peer. A packet sent to Peer leaves through the device; the
// test's reflector reads it, swaps its source and destination addresses
// (which leaves every checksum as it was) and writes it back, so that it
// arrives at Local from Peer. A client that dials Peer:port thus reaches a
// server listening on Local:port (or on any address), and every packet of
// that connection, either way, leaves through the device once. The delay
// and loss are applied there: by the kernel's netem qdisc on the device
// when the kernel has sch_netem, otherwise by the reflector itself, which
// holds each packet for the delay and drops each with the given
// probability (some kernels, such as the one CI's virtual machines run,
// are built without netem). Traffic on the namespace's loopback, such as
// the DevTools connection to the browser or a bridge's UDP to a netcode
// server on 127.0.0.1, is not touched.
//
// A test calls [Enter] first. Outside the namespace, Enter creates it,
// runs the same test binary inside it (ip netns exec) for just that
// test, copies its output to the test log, fails the test if it failed,
// deletes the namespace and returns false; the test then returns. The
// test inside runs at real-time priority (chrt), so that a busy machine
// does not move its figures. Inside,
// Enter brings the link up and returns true, and the test goes on.
package lossnet

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The link's addresses and device. Servers listen on Local (or on any
// address); clients dial Peer.
const (
	Local = "10.77.0.1"
	Peer  = "10.77.0.2"
	Dev   = "nclossy0"
)

// envNamespace names the namespace in the child's environment; its
// presence tells Enter that it runs inside.
const envNamespace = "NETCODE_LOSSNET_NS"

// Link is the impairment, applied to each packet in each direction.
type Link struct {
	// Delay is the one-way delay: a round trip takes 2*Delay.
	Delay time.Duration
	// Loss is the probability that a packet is dropped, 0 to 1.
	Loss float64
}

// Impairment says how the link was impaired inside the namespace.
var Impairment string

// Enter runs the calling test inside a network namespace with link (see
// the package documentation) and reports whether the caller is inside.
// Outside, it needs root (or sudo without a password), iproute2's ip and
// /dev/net/tun; it skips t without them, saying why, unless required is
// true, when it fails t instead.
func Enter(t *testing.T, link Link, required bool) (inside bool) {
	t.Helper()
	if ns := os.Getenv(envNamespace); ns != "" {
		setUp(t, link)
		return true
	}
	sudo, why := rootPrefix()
	if why == "" {
		why = missing()
	}
	if why != "" {
		if required {
			t.Fatalf("lossnet: %s", why)
		}
		t.Skipf("lossnet: %s, so the test cannot make its network namespace", why)
	}
	ns := fmt.Sprintf("netcode-loss-%d", os.Getpid())
	run := func(args ...string) error {
		cmd := exec.Command(sudo[0], append(sudo[1:], args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := run("ip", "netns", "add", ns); err != nil {
		if required {
			t.Fatalf("lossnet: %v", err)
		}
		t.Skipf("lossnet: cannot make a network namespace here (%v)", err)
	}
	defer func() {
		if err := run("ip", "netns", "delete", ns); err != nil {
			t.Errorf("lossnet: %v", err)
		}
	}()
	args := append(sudo[1:], "ip", "netns", "exec", ns)
	// At real-time priority (chrt -r 1), above everything else on the
	// machine, so that the figures are the link's and not those of a
	// machine busy with other work: on a 2-core machine at load average 25,
	// stalls for the CPU made both transports' p99 over 200 ms, and under
	// chrt WebTransport's was 32.5 ms. What runs inside is light (a page at
	// 10 Hz, the bridge, an echo server); the kernel keeps 5% of each
	// second for the rest anyway (sched_rt_runtime_us).
	if p, err := exec.LookPath("chrt"); err == nil && exec.Command(sudo[0], append(sudo[1:], p, "--rr", "1", "true")...).Run() == nil {
		args = append(args, p, "--rr", "1")
	} else {
		t.Log("lossnet: chrt --rr is not available here: the test runs at normal priority, and a busy machine moves its figures")
	}
	args = append(args, "env", envNamespace+"="+ns)
	for _, kv := range os.Environ() { // sudo may reset the environment: pass what the test reads
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH", k == "HOME", k == "CI", k == "TMPDIR", k == "GOCOVERDIR", strings.HasPrefix(k, "NETCODE_"):
			args = append(args, kv)
		}
	}
	args = append(args, os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
		args = append(args, "-test.timeout", time.Until(d).Round(time.Second).String())
	}
	cmd := exec.CommandContext(ctx, sudo[0], args...)
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Fatalf("lossnet: the test inside namespace %s: %v", ns, err)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("lossnet: the test did not pass inside namespace %s", ns)
	}
	return false
}

// rootPrefix returns the command prefix that runs a command as root:
// env when root already, sudo -n when that works without a password; or
// why neither.
func rootPrefix() ([]string, string) {
	if os.Geteuid() == 0 {
		return []string{"env"}, ""
	}
	if p, err := exec.LookPath("sudo"); err == nil && exec.Command(p, "-n", "true").Run() == nil {
		return []string{p, "-n"}, ""
	}
	return nil, "not root, and sudo -n does not work"
}

// missing names what the namespace needs and the machine lacks, or "".
func missing() string {
	if _, err := exec.LookPath("ip"); err != nil {
		return "iproute2's ip is not on $PATH (apt-get install iproute2)"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return "no /dev/net/tun"
	}
	return ""
}

// setUp brings up the namespace's loopback and the link, inside.
func setUp(t *testing.T, link Link) {
	t.Helper()
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("lossnet: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	ip("link", "set", "lo", "up")
	tun, err := openTUN(Dev)
	if err != nil {
		t.Fatalf("lossnet: %v", err)
	}
	ip("addr", "add", Local+"/32", "dev", Dev)
	ip("link", "set", Dev, "mtu", "1500", "up")
	ip("route", "add", Peer+"/32", "dev", Dev)

	r := &reflector{tun: tun, queue: make(chan packet, 4096), done: make(chan struct{})}
	netem := exec.Command("tc", "qdisc", "add", "dev", Dev, "root", "netem",
		"delay", fmt.Sprintf("%dus", link.Delay.Microseconds()),
		"loss", strconv.FormatFloat(link.Loss*100, 'f', -1, 64)+"%", "limit", "10000")
	if out, err := netem.CombinedOutput(); err == nil {
		Impairment = fmt.Sprintf("tc netem on %s: delay %v, loss %g%% each way", Dev, link.Delay, link.Loss*100)
	} else {
		r.link = link
		Impairment = fmt.Sprintf("the reflector on %s (no tc netem here: %s): delay %v, loss %g%% each way",
			Dev, bytes.TrimSpace(out), link.Delay, link.Loss*100)
	}
	t.Logf("lossnet: %s", Impairment)
	r.start()
	t.Cleanup(r.close)
}

func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun"), nil // non-blocking: Close ends a Read
}

type packet struct {
	due time.Time
	b   []byte
}

// reflector sends each packet that leaves the device back into it, with
// its addresses swapped, after link.Delay, or drops it with probability
// link.Loss. Packets keep their order (the delay is constant).
type reflector struct {
	tun   *os.File
	link  Link
	queue chan packet // read, waiting for their time; full: dropped, as by a qdisc's limit
	done  chan struct{}
	wg    sync.WaitGroup
}

func (r *reflector) start() {
	r.wg.Add(2)
	go r.read()
	go r.write()
}

func (r *reflector) close() {
	close(r.done)
	r.tun.Close()
	r.wg.Wait()
}

func (r *reflector) read() {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6c6f73736e6574))
	buf := make([]byte, 65536)
	for {
		n, err := r.tun.Read(buf)
		if err != nil {
			return // closed; or the device is gone, when nothing crosses the link any more
		}
		p := buf[:n]
		if n < 20 || p[0]>>4 != 4 {
			continue // only IPv4 is routed to the device
		}
		if r.link.Loss > 0 && rng.Float64() < r.link.Loss {
			continue
		}
		var a [4]byte
		copy(a[:], p[12:16])
		copy(p[12:16], p[16:20])
		copy(p[16:20], a[:])
		select {
		case r.queue <- packet{due: time.Now().Add(r.link.Delay), b: bytes.Clone(p)}:
		default:
		}
	}
}

func (r *reflector) write() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			return
		case p := <-r.queue:
			if d := time.Until(p.due); d > 0 {
				select {
				case <-r.done:
					return
				case <-time.After(d):
				}
			}
			r.tun.Write(p.b) // an error (the device is down) is a lost packet
		}
	}
}
