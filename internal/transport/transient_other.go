//go:build !windows

package transport

// platformTransientErrors: the portable list in transientErrors covers
// this platform.
var platformTransientErrors []error
