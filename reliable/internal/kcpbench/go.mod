module github.com/gonetcode/netcode/reliable/internal/kcpbench

go 1.26.0

require (
	github.com/gonetcode/netcode v0.0.0
	github.com/xtaci/kcp-go/v5 v5.6.24
)

require (
	github.com/klauspost/cpuid/v2 v2.2.6 // indirect
	github.com/klauspost/reedsolomon v1.12.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/tjfoc/gmsm v1.4.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/gonetcode/netcode => ../../..
