package metrics_test

import (
	"bufio"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/metrics"
)

// Serve a server's counters at /metrics.
func ExampleNewCollector() {
	key, _ := crypto.GenerateKey()
	l, err := netcode.Listen("udp", "127.0.0.1:0", &netcode.ServerConfig{ProtocolID: 1, PrivateKey: key})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(l, prometheus.Labels{"server": "eu-1"}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux) // http.ListenAndServe(":9090", mux) in a real server
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "netcode_server_clients") || strings.HasPrefix(sc.Text(), "netcode_server_denied") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// netcode_server_clients{server="eu-1"} 0
	// netcode_server_denied_sent_total{server="eu-1"} 0
}
