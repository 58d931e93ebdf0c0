use std::ffi::CStr;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use crate::error::check;
use crate::{cstring, ffi, opt_cstring, opt_ptr, take_cstring, DType, Element, Modality, Phase, Result, Role};

/// A node of a graph: its name and its operator (Graph::nodes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub op: String,
}

/// A DAG of tensor operations with semantic annotations (docs/operators.md
/// lists the operators). `Send` but not `Sync`: the C graph is not
/// thread-safe, so it is built through `&mut self` on one thread at a time;
/// submit it to any context.
#[derive(Debug)]
pub struct Graph {
    raw: NonNull<ffi::genie_graph_t>,
}

// SAFETY: a graph may move between threads; it is not Sync (header: a graph
// under construction is not thread-safe).
unsafe impl Send for Graph {}

fn ptrs(v: &[std::ffi::CString]) -> Vec<*const c_char> {
    v.iter().map(|c| c.as_ptr()).collect()
}

impl Graph {
    /// An empty graph (`name` may be None).
    pub fn new(name: Option<&str>) -> Result<Graph> {
        let n = opt_cstring("graph name", name)?;
        let mut raw = ptr::null_mut();
        // SAFETY: the name is copied; raw is a valid out-pointer.
        check(unsafe { ffi::genie_graph_create(opt_ptr(&n), &mut raw) })?;
        Ok(Graph { raw: NonNull::new(raw).expect("genie_graph_create gave NULL") })
    }

    /// A graph from its JSON form (docs/graph-format.md).
    pub fn from_json(json: &str) -> Result<Graph> {
        let mut raw = ptr::null_mut();
        // SAFETY: json is read for json.len() bytes.
        check(unsafe { ffi::genie_graph_from_json(json.as_ptr().cast(), json.len(), &mut raw) })?;
        Ok(Graph { raw: NonNull::new(raw).expect("genie_graph_from_json gave NULL") })
    }

    /// Takes ownership of a graph handle Genie returned.
    pub(crate) unsafe fn from_raw(raw: *mut ffi::genie_graph_t) -> Graph {
        Graph { raw: NonNull::new(raw).expect("Genie returned a NULL graph") }
    }

    pub(crate) fn raw(&self) -> *const ffi::genie_graph_t {
        self.raw.as_ptr()
    }

    /// Declares an input; a -1 dimension takes the bound tensor's size.
    pub fn add_input(&mut self, name: &str, dtype: DType, shape: &[i64]) -> Result<()> {
        let n = cstring("name", name)?;
        // SAFETY: live graph, exclusive; arguments read during the call.
        check(unsafe {
            ffi::genie_graph_add_input(self.raw.as_ptr(), n.as_ptr(), dtype.raw(), shape.as_ptr(), shape.len())
        })
    }

    /// Adds a constant whose bytes (exactly dtype × shape) are copied in.
    pub fn add_constant(&mut self, name: &str, dtype: DType, shape: &[i64], data: &[u8]) -> Result<()> {
        let n = cstring("name", name)?;
        // SAFETY: live graph; data valid for data.len() bytes.
        check(unsafe {
            ffi::genie_graph_add_constant(
                self.raw.as_ptr(),
                n.as_ptr(),
                dtype.raw(),
                shape.as_ptr(),
                shape.len(),
                data.as_ptr().cast(),
                data.len(),
            )
        })
    }

    /// Adds a constant of `T`'s dtype.
    pub fn add_constant_slice<T: Element>(&mut self, name: &str, shape: &[i64], data: &[T]) -> Result<()> {
        // SAFETY: viewing plain numbers as bytes.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) };
        self.add_constant(name, T::DTYPE, shape, bytes)
    }

    /// Adds node `name` applying operator `op` to the values named in
    /// `inputs` ("" for an omitted optional input), producing `outputs`. An
    /// unknown operator is an UnknownOp error whose detail lists close names.
    pub fn add_node(&mut self, op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> Result<()> {
        let o = cstring("operator", op)?;
        let n = cstring("name", name)?;
        let ins = inputs.iter().map(|s| cstring("input", s)).collect::<Result<Vec<_>>>()?;
        let outs = outputs.iter().map(|s| cstring("output", s)).collect::<Result<Vec<_>>>()?;
        let (ip, op_) = (ptrs(&ins), ptrs(&outs));
        // SAFETY: live graph; the arrays hold the stated counts of C strings.
        check(unsafe {
            ffi::genie_graph_add_node(
                self.raw.as_ptr(),
                o.as_ptr(),
                n.as_ptr(),
                ip.as_ptr(),
                ip.len(),
                op_.as_ptr(),
                op_.len(),
            )
        })
    }

    /// Sets an integer attribute of a node.
    pub fn set_attr_int(&mut self, node: &str, key: &str, value: i64) -> Result<()> {
        let (n, k) = (cstring("node", node)?, cstring("key", key)?);
        // SAFETY: live graph; strings read during the call.
        check(unsafe { ffi::genie_graph_set_attr_int(self.raw.as_ptr(), n.as_ptr(), k.as_ptr(), value) })
    }

    /// Sets a floating-point attribute of a node.
    pub fn set_attr_float(&mut self, node: &str, key: &str, value: f64) -> Result<()> {
        let (n, k) = (cstring("node", node)?, cstring("key", key)?);
        // SAFETY: as set_attr_int.
        check(unsafe { ffi::genie_graph_set_attr_float(self.raw.as_ptr(), n.as_ptr(), k.as_ptr(), value) })
    }

    /// Sets a string attribute of a node.
    pub fn set_attr_string(&mut self, node: &str, key: &str, value: &str) -> Result<()> {
        let (n, k, v) = (cstring("node", node)?, cstring("key", key)?, cstring("value", value)?);
        // SAFETY: as set_attr_int.
        check(unsafe { ffi::genie_graph_set_attr_string(self.raw.as_ptr(), n.as_ptr(), k.as_ptr(), v.as_ptr()) })
    }

    /// Sets an integer-list attribute of a node.
    pub fn set_attr_ints(&mut self, node: &str, key: &str, values: &[i64]) -> Result<()> {
        let (n, k) = (cstring("node", node)?, cstring("key", key)?);
        // SAFETY: as set_attr_int; values read for values.len() entries.
        check(unsafe {
            ffi::genie_graph_set_attr_ints(self.raw.as_ptr(), n.as_ptr(), k.as_ptr(), values.as_ptr(), values.len())
        })
    }

    /// Sets a float-list attribute of a node.
    pub fn set_attr_floats(&mut self, node: &str, key: &str, values: &[f64]) -> Result<()> {
        let (n, k) = (cstring("node", node)?, cstring("key", key)?);
        // SAFETY: as set_attr_ints.
        check(unsafe {
            ffi::genie_graph_set_attr_floats(self.raw.as_ptr(), n.as_ptr(), k.as_ptr(), values.as_ptr(), values.len())
        })
    }

    /// Annotates a node with its execution phase.
    pub fn set_phase(&mut self, node: &str, phase: Phase) -> Result<()> {
        let n = cstring("node", node)?;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_set_phase(self.raw.as_ptr(), n.as_ptr(), phase.raw()) })
    }

    /// Annotates a node with its module path (None clears it).
    pub fn set_module(&mut self, node: &str, module_path: Option<&str>) -> Result<()> {
        let n = cstring("node", node)?;
        let m = opt_cstring("module path", module_path)?;
        // SAFETY: live graph; strings copied.
        check(unsafe { ffi::genie_graph_set_module(self.raw.as_ptr(), n.as_ptr(), opt_ptr(&m)) })
    }

    /// Annotates a node with its layer index (-1 clears it).
    pub fn set_layer(&mut self, node: &str, layer: i32) -> Result<()> {
        let n = cstring("node", node)?;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_set_layer(self.raw.as_ptr(), n.as_ptr(), layer) })
    }

    /// Annotates a node with its modality.
    pub fn set_modality(&mut self, node: &str, modality: Modality) -> Result<()> {
        let n = cstring("node", node)?;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_set_modality(self.raw.as_ptr(), n.as_ptr(), modality.raw()) })
    }

    /// Annotates a value (input, constant or node output) with its role.
    pub fn set_role(&mut self, value: &str, role: Role) -> Result<()> {
        let v = cstring("value", value)?;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_set_role(self.raw.as_ptr(), v.as_ptr(), role.raw()) })
    }

    /// Marks a value as a graph output (numbered in call order).
    pub fn mark_output(&mut self, value: &str) -> Result<()> {
        let v = cstring("value", value)?;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_mark_output(self.raw.as_ptr(), v.as_ptr()) })
    }

    /// Checks the graph and infers every shape and dtype.
    pub fn validate(&mut self) -> Result<()> {
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_validate(self.raw.as_ptr()) })
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> Result<usize> {
        let mut n = 0;
        // SAFETY: live graph; valid out-pointer.
        check(unsafe { ffi::genie_graph_num_nodes(self.raw(), &mut n) })?;
        Ok(n)
    }

    /// The nodes, in the order they were added (or listed in the JSON the
    /// graph was built from).
    pub fn nodes(&self) -> Result<Vec<Node>> {
        let n = self.num_nodes()?;
        (0..n)
            .map(|i| {
                let (mut name, mut op) = (ptr::null(), ptr::null());
                // SAFETY: live graph; borrowed strings, copied before the graph changes.
                check(unsafe { ffi::genie_graph_node_name(self.raw(), i, &mut name) })?;
                check(unsafe { ffi::genie_graph_node_op(self.raw(), i, &mut op) })?;
                let copy = |s| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
                Ok(Node { name: copy(name), op: copy(op) })
            })
            .collect()
    }

    /// Declared inputs, in declaration order.
    pub fn inputs(&self) -> Result<Vec<String>> {
        let mut n = 0;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_num_inputs(self.raw(), &mut n) })?;
        (0..n)
            .map(|i| {
                let mut s = ptr::null();
                // SAFETY: borrowed string, copied before the graph changes.
                check(unsafe { ffi::genie_graph_input_name(self.raw(), i, &mut s) })?;
                Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
            })
            .collect()
    }

    /// Outputs, in mark order (a future's output order).
    pub fn outputs(&self) -> Result<Vec<String>> {
        let mut n = 0;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_num_outputs(self.raw(), &mut n) })?;
        (0..n)
            .map(|i| {
                let mut s = ptr::null();
                // SAFETY: borrowed string, copied before the graph changes.
                check(unsafe { ffi::genie_graph_output_name(self.raw(), i, &mut s) })?;
                Ok(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
            })
            .collect()
    }

    /// Dtype and shape of a value (inferred by validate, or declared).
    pub fn value_info(&self, value: &str) -> Result<(DType, Vec<i64>)> {
        let v = cstring("value", value)?;
        let mut dtype: ffi::genie_dtype_t = 0;
        let mut shape = [0i64; ffi::GENIE_MAX_DIMS as usize];
        let mut ndim = 0usize;
        // SAFETY: live graph; shape has room for GENIE_MAX_DIMS entries.
        check(unsafe {
            ffi::genie_graph_value_info(self.raw(), v.as_ptr(), &mut dtype, shape.as_mut_ptr(), &mut ndim)
        })?;
        let dtype = DType::from_raw(dtype).ok_or_else(|| {
            crate::Error::new(crate::ErrorKind::Unsupported, format!("dtype {} is newer than this crate", dtype))
        })?;
        Ok((dtype, shape[..ndim].to_vec()))
    }

    /// Structural hash (equal for equal structure in any process).
    pub fn hash(&self) -> Result<u64> {
        let mut h = 0;
        // SAFETY: live graph.
        check(unsafe { ffi::genie_graph_hash(self.raw(), &mut h) })?;
        Ok(h)
    }

    /// The graph as JSON (docs/graph-format.md).
    pub fn to_json(&self) -> Result<String> {
        let mut s = ptr::null_mut();
        // SAFETY: live graph; `s` is freed by take_cstring.
        check(unsafe { ffi::genie_graph_to_json(self.raw(), &mut s, ptr::null_mut()) })?;
        Ok(unsafe { take_cstring(s) })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once.
        unsafe { ffi::genie_graph_destroy(self.raw.as_ptr()) }
    }
}
