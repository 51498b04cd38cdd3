// Package kcpbench compares the throughput of package reliable's Stream
// with github.com/xtaci/kcp-go/v5 and TCP. It is a module of its own so
// that kcp-go never becomes a dependency of the netcode module; it holds
// benchmarks only:
//
//	cd reliable/internal/kcpbench && go test -bench . -benchmem
package kcpbench
