use std::ffi::CStr;
use std::ptr::NonNull;

use crate::error::check;
use crate::{ffi, DType, Error, ErrorKind, Phase, Result, Role};

/// Element types a tensor can be read into or filled from as a typed slice
/// (other dtypes: use the byte functions). Sealed.
pub trait Element: Copy + Default + sealed::Sealed {
    /// The tensor dtype holding this type.
    const DTYPE: DType;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}

/// Dtype, shape and byte size of a tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub nbytes: usize,
}

/// A tensor resident on a device until dropped. Thread-safe (`Send +
/// Sync`), as the header promises; concurrent writes to overlapping bytes
/// race, as in C.
#[derive(Debug)]
pub struct Tensor {
    raw: NonNull<ffi::genie_tensor_t>,
}

// SAFETY: include/genie.h: tensors are thread-safe.
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}

impl Tensor {
    /// Takes ownership of a handle Genie returned.
    pub(crate) unsafe fn from_raw(raw: *mut ffi::genie_tensor_t) -> Tensor {
        Tensor { raw: NonNull::new(raw).expect("Genie returned a NULL tensor") }
    }

    pub(crate) fn raw(&self) -> *mut ffi::genie_tensor_t {
        self.raw.as_ptr()
    }

    /// Dtype, shape and byte size.
    pub fn info(&self) -> Result<TensorInfo> {
        let mut dtype: ffi::genie_dtype_t = 0;
        let mut shape = [0i64; ffi::GENIE_MAX_DIMS as usize];
        let (mut ndim, mut nbytes) = (0usize, 0usize);
        // SAFETY: live tensor; shape has room for GENIE_MAX_DIMS entries.
        check(unsafe { ffi::genie_tensor_info(self.raw(), &mut dtype, shape.as_mut_ptr(), &mut ndim, &mut nbytes) })?;
        let dtype = DType::from_raw(dtype)
            .ok_or_else(|| Error::new(ErrorKind::Unsupported, format!("dtype {} is newer than this crate", dtype)))?;
        Ok(TensorInfo { dtype, shape: shape[..ndim].to_vec(), nbytes })
    }

    /// Annotates the tensor with what it is: its phase, role and layer (-1
    /// unknown). Its writes and reads to a server carry this semantic tag;
    /// `Phase::Unknown`, `Role::Unspecified` and -1 clear it. A layer
    /// outside -1..=65534 is `InvalidArgument` and changes nothing.
    pub fn set_semantics(&self, phase: Phase, role: Role, layer: i32) -> Result<()> {
        // SAFETY: live tensor.
        check(unsafe { ffi::genie_tensor_set_semantics(self.raw(), phase.raw(), role.raw(), layer) })
    }

    /// The tensor's annotation ([`Tensor::set_semantics`]): `(Phase::Unknown,
    /// Role::Unspecified, -1)` while it has none.
    pub fn semantics(&self) -> Result<(Phase, Role, i32)> {
        let (mut phase, mut role, mut layer): (ffi::genie_phase_t, ffi::genie_tensor_role_t, i32) = (0, 0, -1);
        // SAFETY: live tensor; plain out-parameters.
        check(unsafe { ffi::genie_tensor_get_semantics(self.raw(), &mut phase, &mut role, &mut layer) })?;
        let newer =
            |what: &str, v: i64| Error::new(ErrorKind::Unsupported, format!("{} {} is newer than this crate", what, v));
        let phase = Phase::from_raw(phase).ok_or_else(|| newer("phase", phase as i64))?;
        let role = Role::from_raw(role).ok_or_else(|| newer("role", role as i64))?;
        Ok((phase, role, layer))
    }

    /// The canonical device string ("cpu:0", "remote:0" ...).
    pub fn device(&self) -> String {
        // SAFETY: live tensor; the string lives as long as the tensor.
        let p = unsafe { ffi::genie_tensor_device(self.raw()) };
        if p.is_null() {
            return String::new();
        }
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Copies `src` into the tensor at byte `offset` (SizeMismatch past the end).
    pub fn write_bytes(&self, offset: usize, src: &[u8]) -> Result<()> {
        // SAFETY: live tensor; src is valid for src.len() bytes.
        check(unsafe { ffi::genie_tensor_write(self.raw(), offset, src.as_ptr().cast(), src.len()) })
    }

    /// Fills `dst` from the tensor's bytes at `offset` (SizeMismatch past the end).
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        // SAFETY: live tensor; dst is valid for dst.len() bytes.
        check(unsafe { ffi::genie_tensor_read(self.raw(), offset, dst.as_mut_ptr().cast(), dst.len()) })
    }

    /// All the tensor's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.info()?.nbytes];
        self.read_bytes(0, &mut v)?;
        Ok(v)
    }

    /// Fills the whole tensor from `data`: DtypeMismatch unless the tensor
    /// holds `T`, SizeMismatch unless `data` has its element count.
    pub fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()> {
        let info = self.expect::<T>()?;
        let bytes = std::mem::size_of_val(data);
        if bytes != info.nbytes {
            return Err(Error::new(
                ErrorKind::SizeMismatch,
                format!(
                    "the slice has {} bytes, the {} tensor {:?} needs {}",
                    bytes,
                    info.dtype.name(),
                    info.shape,
                    info.nbytes
                ),
            ));
        }
        // SAFETY: live tensor; data is valid for `bytes` bytes.
        check(unsafe { ffi::genie_tensor_write(self.raw(), 0, data.as_ptr().cast(), bytes) })
    }

    /// The tensor's values (DtypeMismatch unless it holds `T`). For a server
    /// tensor this is when its bytes cross the network.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let info = self.expect::<T>()?;
        let mut v = vec![T::default(); info.nbytes / std::mem::size_of::<T>()];
        // SAFETY: live tensor; v is valid for nbytes bytes and any bit
        // pattern is a valid f32/i32/i64.
        check(unsafe { ffi::genie_tensor_read(self.raw(), 0, v.as_mut_ptr().cast(), info.nbytes) })?;
        Ok(v)
    }

    fn expect<T: Element>(&self) -> Result<TensorInfo> {
        let info = self.info()?;
        if info.dtype != T::DTYPE {
            return Err(Error::new(
                ErrorKind::DtypeMismatch,
                format!("the tensor holds {}, not {}", info.dtype.name(), T::DTYPE.name()),
            ));
        }
        Ok(info)
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once (also fine after its context shut down).
        unsafe { ffi::genie_tensor_destroy(self.raw()) }
    }
}
