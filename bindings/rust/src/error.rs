use std::ffi::CStr;
use std::fmt;

use crate::ffi;

/// What went wrong: one kind per `GENIE_ERR_*` code of include/genie.h.
/// New codes are appended to the header over time, so match with a `_`
/// arm; a code this crate does not know yet is [`ErrorKind::Unknown`]
/// (the number stays available from [`Error::code`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidArgument,
    InvalidHandle,
    OutOfMemory,
    DtypeMismatch,
    ShapeMismatch,
    SizeMismatch,
    UnknownOp,
    InvalidAttribute,
    InvalidGraph,
    Parse,
    TooLarge,
    NotFound,
    Unsupported,
    Timeout,
    Connection,
    Auth,
    Protocol,
    VersionMismatch,
    Shutdown,
    Io,
    Cancelled,
    Internal,
    /// A code newer than this crate.
    Unknown,
}

const KINDS: [(i32, ErrorKind); 22] = [
    (ffi::GENIE_ERR_INVALID_ARGUMENT, ErrorKind::InvalidArgument),
    (ffi::GENIE_ERR_INVALID_HANDLE, ErrorKind::InvalidHandle),
    (ffi::GENIE_ERR_OUT_OF_MEMORY, ErrorKind::OutOfMemory),
    (ffi::GENIE_ERR_DTYPE_MISMATCH, ErrorKind::DtypeMismatch),
    (ffi::GENIE_ERR_SHAPE_MISMATCH, ErrorKind::ShapeMismatch),
    (ffi::GENIE_ERR_SIZE_MISMATCH, ErrorKind::SizeMismatch),
    (ffi::GENIE_ERR_UNKNOWN_OP, ErrorKind::UnknownOp),
    (ffi::GENIE_ERR_INVALID_ATTRIBUTE, ErrorKind::InvalidAttribute),
    (ffi::GENIE_ERR_INVALID_GRAPH, ErrorKind::InvalidGraph),
    (ffi::GENIE_ERR_PARSE, ErrorKind::Parse),
    (ffi::GENIE_ERR_TOO_LARGE, ErrorKind::TooLarge),
    (ffi::GENIE_ERR_NOT_FOUND, ErrorKind::NotFound),
    (ffi::GENIE_ERR_UNSUPPORTED, ErrorKind::Unsupported),
    (ffi::GENIE_ERR_TIMEOUT, ErrorKind::Timeout),
    (ffi::GENIE_ERR_CONNECTION, ErrorKind::Connection),
    (ffi::GENIE_ERR_AUTH, ErrorKind::Auth),
    (ffi::GENIE_ERR_PROTOCOL, ErrorKind::Protocol),
    (ffi::GENIE_ERR_VERSION_MISMATCH, ErrorKind::VersionMismatch),
    (ffi::GENIE_ERR_SHUTDOWN, ErrorKind::Shutdown),
    (ffi::GENIE_ERR_IO, ErrorKind::Io),
    (ffi::GENIE_ERR_CANCELLED, ErrorKind::Cancelled),
    (ffi::GENIE_ERR_INTERNAL, ErrorKind::Internal),
];

impl ErrorKind {
    /// The kind of a `genie_status_t` error code.
    pub fn from_code(code: i32) -> ErrorKind {
        KINDS.iter().find(|(c, _)| *c == code).map(|(_, k)| *k).unwrap_or(ErrorKind::Unknown)
    }

    /// The `GENIE_ERR_*` code of this kind (`None` for `Unknown`).
    pub fn code(self) -> Option<i32> {
        KINDS.iter().find(|(_, k)| *k == self).map(|(c, _)| *c)
    }
}

/// An error of a Genie call: its kind, the numeric status code and the
/// library's detail message (what was wrong: the node, the attribute, the
/// dimension ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    code: i32,
    detail: String,
}

/// `Result<T, genie::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `kind` with a detail message (for errors found on the Rust
    /// side, shaped like the library's own).
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Error {
        Error { kind, code: kind.code().unwrap_or(ffi::GENIE_ERR_INTERNAL), detail: detail.into() }
    }

    /// The error of a failed call that returned `code`, with the calling
    /// thread's `genie_last_error()` detail. Call right after the failure.
    pub(crate) fn last(code: ffi::genie_status_t) -> Error {
        // SAFETY: genie_last_error never returns NULL; the string is valid
        // until the next Genie call on this thread and is copied at once.
        let detail = unsafe { CStr::from_ptr(ffi::genie_last_error()) }.to_string_lossy().into_owned();
        Error { kind: ErrorKind::from_code(code), code, detail }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The `genie_status_t` code (negative).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The detail message ("" if the library gave none).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The code's name, e.g. "GENIE_ERR_PARSE".
    pub fn code_name(&self) -> &'static str {
        status_str(self.code)
    }
}

pub(crate) fn status_str(code: i32) -> &'static str {
    // SAFETY: genie_status_str returns a static string, never NULL.
    unsafe { CStr::from_ptr(ffi::genie_status_str(code)) }.to_str().unwrap_or("unknown status")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{}", self.code_name())
        } else {
            write!(f, "{}: {}", self.code_name(), self.detail)
        }
    }
}

impl std::error::Error for Error {}

/// Turns a status into `Ok(())` or the error with its detail.
pub(crate) fn check(st: ffi::genie_status_t) -> Result<()> {
    if st < 0 {
        Err(Error::last(st))
    } else {
        Ok(())
    }
}
