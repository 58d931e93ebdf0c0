package capi

// #include <stdint.h>
import "C"

import "runtime/cgo"

// EventFunc receives one cluster event: its genie_event_type_t bit and its
// JSON text (copied: valid after the call).
type EventFunc func(eventType uint32, eventJSON string)

// genieGoEvent is the Go end of the C trampoline of genie_go_subscribe: it
// runs on the context's loop thread and calls the EventFunc registered
// under `handle` (a cgo.Handle, deleted only after genie_unsubscribe or
// genie_shutdown returned, so it is valid here).
//
//export genieGoEvent
func genieGoEvent(eventType C.uint32_t, eventJSON *C.char, handle C.uintptr_t) {
	if fn, ok := cgo.Handle(handle).Value().(EventFunc); ok {
		fn(uint32(eventType), C.GoString(eventJSON))
	}
}
