package genie

import (
	"strings"
	"sync"
)

// handle owns one C handle. Calls hold the read lock for their duration, so
// Close (which takes the write lock) never frees a handle a C call is using
// on another goroutine, and a closed handle never reaches C: it is answered
// with ErrInvalidHandle. Holding the lock also keeps the Go object (and so
// its finalizer) alive until the C call has returned.
type handle struct {
	mu   sync.RWMutex
	p    uintptr
	kind string // "tensor", "graph" ... for error messages
}

// acquire returns the C handle with the read lock held (release with
// h.mu.RUnlock), or an INVALID_HANDLE error if it was closed.
func (h *handle) acquire(op string) (uintptr, error) {
	h.mu.RLock()
	if h.p == 0 {
		h.mu.RUnlock()
		return 0, errorf(StatusInvalidHandle, op, "the %s was closed", h.kind)
	}
	return h.p, nil
}

// acquireExclusive is acquire with the write lock (release with
// h.mu.Unlock), for objects that are not thread-safe in C (graphs).
func (h *handle) acquireExclusive(op string) (uintptr, error) {
	h.mu.Lock()
	if h.p == 0 {
		h.mu.Unlock()
		return 0, errorf(StatusInvalidHandle, op, "the %s was closed", h.kind)
	}
	return h.p, nil
}

// close releases the C handle once (later calls do nothing).
func (h *handle) close(destroy func(uintptr)) {
	h.mu.Lock()
	p := h.p
	h.p = 0
	h.mu.Unlock()
	if p != 0 {
		destroy(p)
	}
}

// checkNames rejects names with a NUL byte: C would see a shorter name (and
// name lists are passed to C as NUL-separated strings).
func checkNames(op string, names ...string) error {
	for _, n := range names {
		if strings.IndexByte(n, 0) >= 0 {
			return errorf(StatusInvalidArgument, op, "name %q contains a NUL byte", n)
		}
	}
	return nil
}

// joinNames packs names for the C side: each followed by a NUL.
func joinNames(names []string) string {
	n := 0
	for _, s := range names {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range names {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return b.String()
}
