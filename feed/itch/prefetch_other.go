//go:build !amd64

package itch

// prefetchEvent does nothing on this architecture: the look-ahead then
// only costs its reading ahead.
func prefetchEvent(table, table2, bidEnd uintptr, bidLines int, askEnd uintptr, askLines int, inst uintptr) {
}
