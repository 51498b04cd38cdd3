// Package cute speaks the Cute Protocol 1.00, the dialect of netcode that
// Cute Framework (cute_net.h 1.03) uses, byte for byte as Cute Framework's
// C code writes it (the code is the authority on the wire, not the
// standard's text).
//
// A deployment has one signing key pair, made with GenerateKeyPair. The
// web service that admits players keeps the secret key and mints a connect
// token per player with GenerateToken; the game servers hold the same key
// pair (the secret half also seals the token's secret section); the client
// receives only the 1114-byte token.
//
// This package holds the key pair, token minting and inspection, and the
// errors a Cute connection ends with. The protocol logic lives in I/O-free
// client and server cores (internal/core), on the crypto of
// internal/hydro and the wire format of internal/wire.
package cute
