package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReport feeds recorded go test -json streams to the report and checks
// what a reader sees: go test's lines without -v, the failed tests' output,
// and each skip with its reason.
func TestReport(t *testing.T) {
	tests := []struct {
		name    string
		verbose bool
		in      string
		want    string
	}{
		{"a pass and a skip", false, `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: chromium not found on $PATH\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
{"Action":"pass","Package":"p"}
`, "ok  \tp\t0.01s\n    --- SKIP: TestB: b_test.go:9: chromium not found on $PATH\n1 tests skipped (listed above with their reasons)\n"},
		{"a failure", false, `{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"=== RUN   TestC\n"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: boom\n"}
{"Action":"output","Package":"p","Test":"TestC","Output":"--- FAIL: TestC (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}
{"Action":"fail","Package":"p"}
`, "    c_test.go:3: boom\n--- FAIL: TestC (0.00s)\nFAIL\tp\t0.01s\n"},
		{"a test that never ends: the binary times out", false, `{"Action":"run","Package":"p","Test":"TestD"}
{"Action":"output","Package":"p","Test":"TestD","Output":"=== RUN   TestD\n"}
{"Action":"output","Package":"p","Test":"TestD","Output":"    d_test.go:7: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.01s\n"}
{"Action":"fail","Package":"p"}
`, "    d_test.go:7: waiting\npanic: test timed out after 1s\nFAIL\tp\t1.01s\n"},
		{"a build failure and go test's own error", false, `{"ImportPath":"q [q.test]","Action":"build-output","Output":"q/x.go:1:1: expected 'package'\n"}
{"ImportPath":"q [q.test]","Action":"build-fail"}
{"Action":"output","Package":"q","Output":"FAIL\tq [build failed]\n"}
{"Action":"fail","Package":"q"}
go: warning: "./nothing/..." matched no packages
`, "q/x.go:1:1: expected 'package'\nFAIL\tq [build failed]\ngo: warning: \"./nothing/...\" matched no packages\n"},
		{"-v prints go test's output", true, `{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"skip","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.01s\n"}
`, "=== RUN   TestA\nok  \tp\t0.01s\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			require.NoError(t, newReport(&out, tc.verbose).run(strings.NewReader(tc.in)))
			assert.Equal(t, tc.want, out.String())
		})
	}
}
