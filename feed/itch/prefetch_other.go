//go:build !amd64

package itch

// prefetchBack does nothing on this architecture: the look-ahead then only
// costs its copies.
func prefetchBack(uintptr, int) {}

// prefetchFwd does nothing on this architecture.
func prefetchFwd(uintptr, int) {}
