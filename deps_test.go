package netcode_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportGraph keeps the core library lean: the root package depends on
// the standard library, golang.org/x/crypto, golang.org/x/sys,
// golang.org/x/net (ipv4 and ipv6, for packet tagging) and its own packages
// only. Prometheus (package metrics), net/http and
// x/time/rate (package backend), WebSocket (package bridge), quic-go
// (package bridge/webtransport) and go-redis (package fleet) must stay out
// of it.
func TestImportGraph(t *testing.T) {
	// go test puts its own toolchain's bin directory first in PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on this machine: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{
		"golang.org/x/crypto/",
		"golang.org/x/sys/",
		"golang.org/x/net/ipv4",
		"golang.org/x/net/ipv6",
		"golang.org/x/net/bpf",
		"golang.org/x/net/internal/",
		"github.com/gonetcode/netcode",
	}
	forbidden := []string{
		"github.com/gonetcode/netcode/metrics",
		"github.com/gonetcode/netcode/backend",
		"github.com/gonetcode/netcode/bridge",
		"github.com/gonetcode/netcode/fleet",
		"github.com/redis/",
		"github.com/go-redis/",
		"github.com/quic-go/",
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies")
	}
	for _, d := range deps {
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(d, a)
		}
		for _, f := range forbidden {
			ok = ok && d != f && !strings.HasPrefix(d, f+"/")
		}
		if !ok {
			t.Errorf("the netcode package depends on %s", d)
		}
	}
	std, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, std)
	}
	for _, d := range strings.Fields(string(std)) {
		if d == "net/http" {
			t.Error("the netcode package depends on net/http")
		}
	}
}

// TestImportGraphQUIC keeps quic-go (HTTP/3 and WebTransport) in package
// bridge/webtransport, which serves the bridge over it: the WebSocket
// bridge (packages bridge and bridge/transport, which the Go client in a
// browser builds on) and the core library do not depend on it.
func TestImportGraphQUIC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on this machine: %v", err)
	}
	for _, pkg := range []string{".", "./bridge", "./bridge/transport"} {
		out, err := exec.Command(goTool, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list printed no dependencies of %s", pkg)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "github.com/quic-go/") || strings.HasPrefix(d, "github.com/gonetcode/netcode/bridge/webtransport") {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}

// TestImportGraphCute keeps the Cute dialect as lean as the core library:
// package cute and its internal packages depend on the standard library,
// filippo.io/edwards25519 (hydro_sign's group arithmetic), the
// golang.org/x packages the core library uses and the module's own
// packages, never on net/http, Prometheus, WebSocket or the backend. And
// the netcode package does not pull in the dialect or its curve library.
func TestImportGraphCute(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on this machine: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "./cute/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{
		"filippo.io/edwards25519",
		"golang.org/x/crypto/",
		"golang.org/x/sys/",
		"golang.org/x/net/ipv4",
		"golang.org/x/net/ipv6",
		"golang.org/x/net/bpf",
		"golang.org/x/net/internal/",
		"github.com/gonetcode/netcode",
	}
	forbidden := []string{
		"net/http",
		"github.com/gonetcode/netcode/metrics",
		"github.com/gonetcode/netcode/backend",
		"github.com/gonetcode/netcode/bridge",
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies")
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("the cute packages depend on %s", d)
			}
		}
		if !strings.Contains(strings.SplitN(d, "/", 2)[0], ".") {
			continue // the standard library
		}
		ok := false
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(d, a)
		}
		if !ok {
			t.Errorf("the cute packages depend on %s", d)
		}
	}
	root, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, root)
	}
	for _, d := range strings.Fields(string(root)) {
		if strings.HasPrefix(d, "filippo.io/") || strings.HasPrefix(d, "github.com/gonetcode/netcode/cute") {
			t.Errorf("the netcode package depends on %s", d)
		}
	}
}

// TestTestingScaffoldStaysInTests: internal/testing holds test scaffolding
// (simulated networks, scenario runners, vector loaders, token minting for
// tests); no library package, command or example program may import it
// outside its tests. The scaffold's packages may import each other.
func TestTestingScaffoldStaysInTests(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on this machine: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const scaffold = "github.com/gonetcode/netcode/internal/testing/"
	pkgs := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkgs++
		if strings.HasPrefix(f[0], scaffold) {
			continue
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, scaffold) {
				t.Errorf("%s imports %s outside its tests", f[0], imp)
			}
		}
	}
	if pkgs == 0 {
		t.Fatal("go list printed no packages")
	}
}
