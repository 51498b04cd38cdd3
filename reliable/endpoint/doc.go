// Package endpoint is a byte-exact port of the Endpoint of the C library
// reliable (mas-bandwidth/reliable), which netcode's users pair with it:
// packet sequence numbers, acks of the last 33 packets in every header,
// fragmentation and reassembly of packets larger than a datagram, and the
// round-trip time, loss and bandwidth estimates. It sends and receives
// nothing itself: its owner feeds it received packets and the time, and
// it hands packets to send to Config.Transmit and received payloads to
// Config.Process. Its headers and behaviour match the reference's golden
// vectors.
//
// An Endpoint authenticates nothing. As the reference does, its
// reassembly keeps the first fragment that arrives for each fragment id of
// a sequence, so whoever can put datagrams on the path can corrupt a
// fragmented packet by sending its fragment first. Over a netcode Conn only
// the authenticated peer can send; on a transport anyone can write to, give
// the Endpoint authenticated datagrams or carry integrity in the payload.
//
// Package reliable builds Sessions and Streams, with reliable ordered
// delivery, on top of an Endpoint; use this package directly only to
// speak to a peer that uses the C library's Endpoint alone.
package endpoint
