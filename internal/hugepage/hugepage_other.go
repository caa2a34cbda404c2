//go:build !linux

// Package hugepage asks Linux to back large buffers with transparent huge
// pages; elsewhere it does nothing.
package hugepage

// Size is the size of a transparent huge page on amd64 and arm64.
const Size = 2 << 20

// Advise does nothing where transparent huge pages are not Linux's.
func Advise[T any]([]T) {}
