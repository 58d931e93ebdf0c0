// Package capi is the raw SWIG layer over include/genie.h (see capi.swig).
// It is internal: use package genie.
package capi

// The header is this repository's include/genie.h (the binding is written
// against it; genie.Init checks the library's ABI against it at run time);
// the library comes from pkg-config (genie.pc: set PKG_CONFIG_PATH for a
// non-system prefix).

// #cgo CPPFLAGS: -I${SRCDIR}/../../../../include
// #cgo pkg-config: genie
import "C"
