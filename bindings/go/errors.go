package genie

import (
	"fmt"
	"runtime"

	"genie.dev/genie/internal/capi"
)

// Status is a genie_status_t: 0 success, negative errors, positive
// non-error states. The numeric values are frozen by include/genie.h.
type Status int32

// Status codes (include/genie.h).
var (
	StatusOK               = Status(capi.GENIE_OK)
	StatusInProgress       = Status(capi.GENIE_IN_PROGRESS)
	StatusInvalidArgument  = Status(capi.GENIE_ERR_INVALID_ARGUMENT)
	StatusInvalidHandle    = Status(capi.GENIE_ERR_INVALID_HANDLE)
	StatusOutOfMemory      = Status(capi.GENIE_ERR_OUT_OF_MEMORY)
	StatusDtypeMismatch    = Status(capi.GENIE_ERR_DTYPE_MISMATCH)
	StatusShapeMismatch    = Status(capi.GENIE_ERR_SHAPE_MISMATCH)
	StatusSizeMismatch     = Status(capi.GENIE_ERR_SIZE_MISMATCH)
	StatusUnknownOp        = Status(capi.GENIE_ERR_UNKNOWN_OP)
	StatusInvalidAttribute = Status(capi.GENIE_ERR_INVALID_ATTRIBUTE)
	StatusInvalidGraph     = Status(capi.GENIE_ERR_INVALID_GRAPH)
	StatusParse            = Status(capi.GENIE_ERR_PARSE)
	StatusTooLarge         = Status(capi.GENIE_ERR_TOO_LARGE)
	StatusNotFound         = Status(capi.GENIE_ERR_NOT_FOUND)
	StatusUnsupported      = Status(capi.GENIE_ERR_UNSUPPORTED)
	StatusTimeout          = Status(capi.GENIE_ERR_TIMEOUT)
	StatusConnection       = Status(capi.GENIE_ERR_CONNECTION)
	StatusAuth             = Status(capi.GENIE_ERR_AUTH)
	StatusProtocol         = Status(capi.GENIE_ERR_PROTOCOL)
	StatusVersionMismatch  = Status(capi.GENIE_ERR_VERSION_MISMATCH)
	StatusShutdown         = Status(capi.GENIE_ERR_SHUTDOWN)
	StatusIO               = Status(capi.GENIE_ERR_IO)
	StatusCancelled        = Status(capi.GENIE_ERR_CANCELLED)
	StatusInternal         = Status(capi.GENIE_ERR_INTERNAL)
)

// String is the status's name from the library, e.g. "GENIE_ERR_PARSE".
func (s Status) String() string { return capi.Genie_status_str(int(s)) }

// Error is every error this package returns: the Genie status code, the
// detail message (what was wrong: the node, the attribute, the dimension),
// and the operation that failed.
//
// Compare with the sentinels using errors.Is (errors.Is(err,
// genie.ErrUnknownOp)); get at the code and detail with errors.As:
//
//	var gerr *genie.Error
//	if errors.As(err, &gerr) { log.Print(gerr.Code, gerr.Detail) }
type Error struct {
	Code   Status // a negative GENIE_ERR_* code
	Detail string // genie_last_error() of the failing call ("" for a sentinel)
	Op     string // what failed, e.g. "genie_graph_add_node"
}

func (e *Error) Error() string {
	msg := e.Code.String()
	if e.Op != "" {
		msg = e.Op + ": " + msg
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return "genie: " + msg
}

// Is makes errors.Is(err, sentinel) match on the status code: a sentinel is
// an *Error with no detail and no operation.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Detail == "" && t.Op == ""
}

// Sentinels, one per error code, for errors.Is.
var (
	ErrInvalidArgument  = &Error{Code: StatusInvalidArgument}
	ErrInvalidHandle    = &Error{Code: StatusInvalidHandle}
	ErrOutOfMemory      = &Error{Code: StatusOutOfMemory}
	ErrDtypeMismatch    = &Error{Code: StatusDtypeMismatch}
	ErrShapeMismatch    = &Error{Code: StatusShapeMismatch}
	ErrSizeMismatch     = &Error{Code: StatusSizeMismatch}
	ErrUnknownOp        = &Error{Code: StatusUnknownOp}
	ErrInvalidAttribute = &Error{Code: StatusInvalidAttribute}
	ErrInvalidGraph     = &Error{Code: StatusInvalidGraph}
	ErrParse            = &Error{Code: StatusParse}
	ErrTooLarge         = &Error{Code: StatusTooLarge}
	ErrNotFound         = &Error{Code: StatusNotFound}
	ErrUnsupported      = &Error{Code: StatusUnsupported}
	ErrTimeout          = &Error{Code: StatusTimeout}
	ErrConnection       = &Error{Code: StatusConnection}
	ErrAuth             = &Error{Code: StatusAuth}
	ErrProtocol         = &Error{Code: StatusProtocol}
	ErrVersionMismatch  = &Error{Code: StatusVersionMismatch}
	ErrShutdown         = &Error{Code: StatusShutdown}
	ErrIO               = &Error{Code: StatusIO}
	ErrCancelled        = &Error{Code: StatusCancelled}
	ErrInternal         = &Error{Code: StatusInternal}
)

// call runs one fallible C call and turns a failure into an *Error with the
// call's detail message. The detail is thread-local in C, so the goroutine
// stays on its OS thread from the call until the detail has been read.
func call(op string, f func() int) error {
	runtime.LockOSThread()
	st := f()
	var err error
	if st < 0 {
		err = &Error{Code: Status(st), Detail: capi.Genie_last_error(), Op: op}
	}
	runtime.UnlockOSThread()
	return err
}

// errorf makes an error detected on the Go side (closed handle, a Go slice
// that does not fit the tensor ...), shaped like the library's own.
func errorf(code Status, op, format string, args ...interface{}) error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...), Op: op}
}
