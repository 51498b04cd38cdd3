// Package reliable adds acknowledgements, fragmentation and reliability on
// top of an unreliable message connection such as a *netcode.Conn.
//
// Endpoint is a port of mas-bandwidth/reliable 1.4.0, byte for byte
// compatible with it on the wire: every packet carries a sequence number
// and acks for the last 32 packets received, packets larger than a
// threshold are fragmented and reassembled, and the endpoint estimates RTT,
// packet loss and bandwidth with the reference's float32 arithmetic, bit
// for bit. It does no I/O and reads no clock: use it directly to talk to a
// C program linked with reliable, or to build your own protocol on its
// acks.
package reliable
