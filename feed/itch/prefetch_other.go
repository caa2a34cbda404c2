//go:build !amd64

package itch

// prefetch does nothing on this architecture: the look-ahead then only
// costs its copies.
func prefetch(uintptr) {}

// prefetchBack does nothing on this architecture.
func prefetchBack(uintptr, int) {}
