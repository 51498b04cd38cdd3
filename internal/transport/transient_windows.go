package transport

import "golang.org/x/sys/windows"

// platformTransientErrors are Windows' own transient read errors: a
// datagram larger than the buffer (the rest is discarded, the next read is
// fine) and the ICMP errors Winsock reports with its own codes.
var platformTransientErrors = []error{
	windows.WSAEMSGSIZE,
	windows.WSAECONNRESET,
	windows.WSAENETRESET,
}
