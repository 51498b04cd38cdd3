package bridge_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonetcode/netcode/bridge"
)

// TestJSHeaderFetchesWithPOST: the module's usage example asks the token
// endpoint with POST, the only method token endpoints (package backend,
// examples/browser) accept.
func TestJSHeaderFetchesWithPOST(t *testing.T) {
	fetches := regexp.MustCompile(`fetch\("/token"[^)]*\)`).FindAllString(string(bridge.JS()), -1)
	assert.NotEmpty(t, fetches, "the example fetches a token")
	for _, f := range fetches {
		assert.Contains(t, f, `method: "POST"`)
	}
}
