//! ONNX import (docs/onnx.md) and op libraries (docs/custom-ops.md).

use std::ptr;

use crate::error::{check, Error, ErrorKind, Result};
use crate::{cstring, ffi, opt_cstring, opt_ptr, Context, Future, Graph, Tensor};

/// An ONNX model imported into a graph: the graph (whose inputs are the
/// model's inputs followed by its weights) and the weights, resident on the
/// device they were uploaded to until dropped.
#[derive(Debug)]
pub struct OnnxModel {
    pub graph: Graph,
    /// Each weight input of `graph` with its tensor, in input order.
    pub weights: Vec<(String, Tensor)>,
    /// The model's own inputs, bound at `submit`, in order.
    pub inputs: Vec<String>,
}

impl OnnxModel {
    /// Runs the model with its weights bound and `inputs` binding the
    /// model's own inputs by name.
    pub fn submit(&self, ctx: &Context, inputs: &[(&str, &Tensor)]) -> Result<Future> {
        let mut all: Vec<(&str, &Tensor)> = inputs.to_vec();
        all.extend(self.weights.iter().map(|(n, t)| (n.as_str(), t)));
        ctx.submit(&self.graph, &all)
    }
}

impl Context {
    /// Imports the bytes of a .onnx file (genie_graph_import_onnx),
    /// uploading its initializers to `device` (None: the context's default
    /// device, the server in remote mode). A node Genie cannot map fails
    /// with `ErrorKind::Unsupported` naming it.
    pub fn import_onnx(&self, model: &[u8], device: Option<&str>) -> Result<OnnxModel> {
        let dev = opt_cstring("device", device)?;
        let mut graph = ptr::null_mut();
        let mut array: *mut *mut ffi::genie_tensor_t = ptr::null_mut();
        let mut n = 0usize;
        // SAFETY: live context; model is read for model.len() bytes; the
        // out-parameters are valid and written only on success.
        check(unsafe {
            ffi::genie_graph_import_onnx(
                self.raw_ptr(),
                model.as_ptr().cast(),
                model.len(),
                opt_ptr(&dev),
                &mut graph,
                &mut array,
                &mut n,
            )
        })?;
        // Owned at once, so that any failure below releases everything.
        // SAFETY: Genie returned a graph and `n` tensor handles in `array`,
        // which we free after taking the handles.
        let graph = unsafe { Graph::from_raw(graph) };
        let tensors: Vec<Tensor> = (0..n).map(|i| unsafe { Tensor::from_raw(*array.add(i)) }).collect();
        unsafe { ffi::genie_free(array.cast()) };
        let names = graph.inputs()?;
        if names.len() < tensors.len() {
            return Err(Error::new(ErrorKind::Internal, "the imported graph has fewer inputs than weights"));
        }
        let first = names.len() - tensors.len();
        let weights = names[first..].iter().cloned().zip(tensors).collect();
        Ok(OnnxModel { inputs: names[..first].to_vec(), weights, graph })
    }
}

/// Loads a vendor's op library (genie_op_library_load): a shared object
/// exporting `genie_op_library_init`, which registers custom ops for this
/// process; graphs then use them by name. Loading it twice does nothing.
pub fn load_op_library(path: &str) -> Result<()> {
    let p = cstring("op library path", path)?;
    // SAFETY: the path is a NUL-terminated string read during the call.
    check(unsafe { ffi::genie_op_library_load(p.as_ptr()) })
}

/// Whether custom op `name` is registered in this process.
pub fn op_registered(name: &str) -> bool {
    match cstring("op name", name) {
        // SAFETY: a NUL-terminated string read during the call.
        Ok(n) => unsafe { ffi::genie_op_is_registered(n.as_ptr()) == 1 },
        Err(_) => false,
    }
}
