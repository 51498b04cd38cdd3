package transport

import "sync/atomic"

// Path is the way New drives a *net.UDPConn: which of the kernel's
// batching it uses. New picks the best the system has; tests force each
// path in turn (ForcePath), so that every one of them is exercised on
// every machine that has it.
type Path int32

const (
	// PathBest is the default: on Linux, sendmmsg and recvmmsg, with
	// trains of datagrams to one destination sent as one UDP GSO
	// super-datagram (UDP_SEGMENT) where the kernel has it; one datagram
	// per system call elsewhere.
	PathBest Path = iota
	// PathMmsg is sendmmsg and recvmmsg without segmentation offload:
	// what a Linux kernel older than 4.18 gets.
	PathMmsg
	// PathPlain is one datagram per system call through package net:
	// what systems other than Linux get.
	PathPlain
)

func (p Path) String() string {
	switch p {
	case PathBest:
		return "best"
	case PathMmsg:
		return "mmsg"
	case PathPlain:
		return "plain"
	}
	return "Path(?)"
}

// Paths lists every path, for tests that run on each.
var Paths = []Path{PathBest, PathMmsg, PathPlain}

var forcedPath atomic.Int32 // a Path

// ForcePath makes New set up the sockets it wraps from now on with path p
// (PathBest where the system lacks what p asks for is not a choice it
// makes: it takes the next best), and returns the path in force before.
// It is for tests: a process normally leaves it at PathBest.
func ForcePath(p Path) (previous Path) {
	return Path(forcedPath.Swap(int32(p)))
}
