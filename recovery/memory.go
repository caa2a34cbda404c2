package recovery

import "golang.org/x/sys/unix"

// entryBytes is the size of one entry of a store's index ring.
const entryBytes = 16

// StoreBytes returns the memory a store with cfg's limits allocates when it
// is made (its index ring and its byte ring; see StoreConfig), with the
// defaults applied to zero fields.
func StoreBytes(cfg StoreConfig) int64 {
	cfg = cfg.withDefaults()
	return int64(cfg.MaxMessages)*entryBytes + int64(cfg.MaxBytes)
}

// HostMemory returns the host's physical memory in bytes, or 0 when it
// cannot tell.
func HostMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
