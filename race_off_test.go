//go:build !race

package netcode_test

const raceEnabled = false
