//go:build !linux

package itch

// adviseHuge does nothing where transparent huge pages are not Linux's.
func adviseHuge[T any]([]T) {}
