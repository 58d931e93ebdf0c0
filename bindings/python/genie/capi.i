/*
 * capi.i — SWIG 4 interface of the low-level module genie.capi over
 * include/genie.h. The idiomatic API is the pure-Python package around it
 * (genie/__init__.py); this layer only converts arguments:
 *
 *  - every genie_status_t < 0 raises the Python exception class the package
 *    registered for that code (with .code and .detail, read from
 *    genie_last_error() on the same thread right after the call); 0 gives
 *    None, a positive state (GENIE_IN_PROGRESS) its int;
 *  - out-parameters become return values (handles as SWIG pointers);
 *  - byte buffers use the buffer protocol: genie_tensor_write and
 *    genie_graph_add_constant read straight from the caller's buffer,
 *    genie_tensor_read writes straight into a writable one (no copies);
 *  - the GIL is released around every call into the library (-threads), so
 *    a completion callback (which takes the GIL) can run while another
 *    thread waits; Python callbacks run through a C trampoline.
 */
%module(package="genie") capi

%{
#define SWIG_FILE_WITH_INIT
#include <Python.h>
#include <genie.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
%}

%include <stdint.i>

/* -------------------------------------------------------------------------
 * Errors: raised through a factory the package registers.
 * ------------------------------------------------------------------------- */
%{
static PyObject *genie_py_error_factory = NULL;

/* Sets the Python error for `status`, with the calling thread's detail. */
static void genie_py_raise(genie_status_t status) {
  const char *detail = genie_last_error();
  if (genie_py_error_factory) {
    PyObject *exc = PyObject_CallFunction(genie_py_error_factory, "is", (int)status, detail);
    if (exc) {
      PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
      Py_DECREF(exc);
    }
    return; /* the factory's own exception, if it failed */
  }
  PyErr_Format(PyExc_RuntimeError, "%s: %s", genie_status_str(status), detail);
}
%}

%inline %{
/* Registers factory(code:int, detail:str) -> exception instance. */
static PyObject *genie_py_set_error_factory(PyObject *factory) {
  Py_XINCREF(factory);
  Py_XSETREF(genie_py_error_factory, factory);
  Py_RETURN_NONE;
}
%}

%typemap(out) genie_status_t {
  if ($1 < 0) {
    genie_py_raise($1);
    SWIG_fail;
  }
  if ($1 == 0) {
    Py_INCREF(Py_None);
    $result = Py_None;
  } else {
    $result = PyLong_FromLong((long)$1);
  }
}

/* -------------------------------------------------------------------------
 * Out-parameters.
 * ------------------------------------------------------------------------- */
%define GENIE_OUT_HANDLE(TYPE)
%typemap(in, numinputs=0) TYPE **out (TYPE *tmp) { tmp = NULL; $1 = &tmp; }
%typemap(argout) TYPE **out {
  $result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(SWIG_as_voidptr(tmp$argnum), $descriptor(TYPE *), 0));
}
%enddef
GENIE_OUT_HANDLE(genie_config_t)
GENIE_OUT_HANDLE(genie_context_t)
GENIE_OUT_HANDLE(genie_tensor_t)
GENIE_OUT_HANDLE(genie_graph_t)
GENIE_OUT_HANDLE(genie_future_t)
GENIE_OUT_HANDLE(genie_server_t)
GENIE_OUT_HANDLE(genie_server_config_t)

%typemap(in, numinputs=0) size_t *out (size_t tmp), size_t *nbytes (size_t tmp) { tmp = 0; $1 = &tmp; }
%typemap(argout) size_t *out, size_t *nbytes {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromSize_t(tmp$argnum));
}
%typemap(in, numinputs=0) uint64_t *out (uint64_t tmp) { tmp = 0; $1 = &tmp; }
%typemap(argout) uint64_t *out {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromUnsignedLongLong(tmp$argnum));
}
%typemap(in, numinputs=0) int32_t *out (int32_t tmp) { tmp = 0; $1 = &tmp; }
%typemap(argout) int32_t *out {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromLong(tmp$argnum));
}
%typemap(in, numinputs=0) int *out (int tmp) { tmp = 0; $1 = &tmp; }
%typemap(argout) int *out {
  $result = SWIG_Python_AppendOutput($result, PyBool_FromLong(tmp$argnum));
}
%typemap(in, numinputs=0) const char **out (const char *tmp) { tmp = NULL; $1 = &tmp; }
%typemap(argout) const char **out {
  $result = SWIG_Python_AppendOutput($result, PyUnicode_FromString(tmp$argnum ? tmp$argnum : ""));
}
%typemap(in, numinputs=0) genie_dtype_t *dtype (genie_dtype_t tmp) { tmp = GENIE_DTYPE_INVALID; $1 = &tmp; }
%typemap(argout) genie_dtype_t *dtype {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromLong((long)tmp$argnum));
}
/* genie_tensor_get_semantics: (phase, role, layer) as ints. */
%typemap(in, numinputs=0) genie_phase_t *phase (genie_phase_t tmp) { tmp = GENIE_PHASE_UNKNOWN; $1 = &tmp; }
%typemap(in, numinputs=0) genie_tensor_role_t *role (genie_tensor_role_t tmp) { tmp = GENIE_TENSOR_ROLE_UNSPECIFIED; $1 = &tmp; }
%typemap(in, numinputs=0) int32_t *layer (int32_t tmp) { tmp = -1; $1 = &tmp; }
%typemap(argout) genie_phase_t *phase, genie_tensor_role_t *role, int32_t *layer {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromLong((long)tmp$argnum));
}
%typemap(in, numinputs=0) (int64_t *shape, size_t *ndim) (int64_t tmp[GENIE_MAX_DIMS], size_t n) {
  n = 0;
  $1 = tmp;
  $2 = &n;
}
%typemap(argout) (int64_t *shape, size_t *ndim) {
  PyObject *t = PyTuple_New((Py_ssize_t)n$argnum);
  size_t i;
  for (i = 0; t && i < n$argnum; ++i) PyTuple_SET_ITEM(t, (Py_ssize_t)i, PyLong_FromLongLong(tmp$argnum[i]));
  $result = SWIG_Python_AppendOutput($result, t);
}
/* genie_graph_import_onnx: the graph, then a list of the weight tensors (the
 * array itself released with genie_free, each tensor owned by the caller). */
%typemap(in, numinputs=0) genie_graph_t **out_graph (genie_graph_t *tmp) { tmp = NULL; $1 = &tmp; }
%typemap(argout) genie_graph_t **out_graph {
  $result = SWIG_Python_AppendOutput($result, SWIG_NewPointerObj(SWIG_as_voidptr(tmp$argnum), $descriptor(genie_graph_t *), 0));
}
%typemap(in, numinputs=0) (genie_tensor_t ***out_weights, size_t *out_num_weights) (genie_tensor_t **tmp, size_t n) {
  tmp = NULL;
  n = 0;
  $1 = &tmp;
  $2 = &n;
}
%typemap(argout) (genie_tensor_t ***out_weights, size_t *out_num_weights) {
  PyObject *l = PyList_New((Py_ssize_t)n$argnum);
  size_t i;
  for (i = 0; l && i < n$argnum; ++i)
    PyList_SET_ITEM(l, (Py_ssize_t)i, SWIG_NewPointerObj(SWIG_as_voidptr(tmp$argnum[i]), $descriptor(genie_tensor_t *), 0));
  $result = SWIG_Python_AppendOutput($result, l);
}
%typemap(arginit) (genie_tensor_t ***out_weights, size_t *out_num_weights) "tmp$argnum = NULL;";
%typemap(freearg) (genie_tensor_t ***out_weights, size_t *out_num_weights) { genie_free(tmp$argnum); }
/* Returned strings released with genie_free. */
%typemap(in, numinputs=0) (char **out_json, size_t *out_len) (char *tmp, size_t n) { tmp = NULL; n = 0; $1 = &tmp; $2 = &n; }
%typemap(argout) (char **out_json, size_t *out_len) {
  $result = SWIG_Python_AppendOutput($result, PyUnicode_FromStringAndSize(tmp$argnum, (Py_ssize_t)n$argnum));
}
%typemap(arginit) (char **out_json, size_t *out_len) "tmp$argnum = NULL;";
%typemap(freearg) (char **out_json, size_t *out_len) { genie_free(tmp$argnum); }
%typemap(in, numinputs=0) char **out_json (char *tmp) { tmp = NULL; $1 = &tmp; }
%typemap(argout) char **out_json {
  $result = SWIG_Python_AppendOutput($result, PyUnicode_FromString(tmp$argnum ? tmp$argnum : ""));
}
%typemap(arginit) char **out_json "tmp$argnum = NULL;";
%typemap(freearg) char **out_json { genie_free(tmp$argnum); }

/* -------------------------------------------------------------------------
 * Input arrays.
 * ------------------------------------------------------------------------- */
%{
/* Converts a sequence of ints into a malloc'd array (NULL + exception on
 * error; an empty sequence gives a 1-element buffer so the pointer is never
 * NULL). */
static int64_t *genie_py_int64s(PyObject *seq, size_t *count) {
  PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
  Py_ssize_t n, i;
  int64_t *v;
  if (!fast) return NULL;
  n = PySequence_Fast_GET_SIZE(fast);
  v = (int64_t *)malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!v) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return NULL;
  }
  for (i = 0; i < n; ++i) {
    long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (x == -1 && PyErr_Occurred()) {
      free(v);
      Py_DECREF(fast);
      return NULL;
    }
    v[i] = (int64_t)x;
  }
  Py_DECREF(fast);
  *count = (size_t)n;
  return v;
}

static double *genie_py_doubles(PyObject *seq, size_t *count) {
  PyObject *fast = PySequence_Fast(seq, "expected a sequence of floats");
  Py_ssize_t n, i;
  double *v;
  if (!fast) return NULL;
  n = PySequence_Fast_GET_SIZE(fast);
  v = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!v) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return NULL;
  }
  for (i = 0; i < n; ++i) {
    double x = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
    if (x == -1.0 && PyErr_Occurred()) {
      free(v);
      Py_DECREF(fast);
      return NULL;
    }
    v[i] = x;
  }
  Py_DECREF(fast);
  *count = (size_t)n;
  return v;
}

/* A sequence of str (None or "" for an omitted input) as a malloc'd array of
 * borrowed UTF-8 pointers; `keep` holds the sequence alive. */
static const char **genie_py_strings(PyObject *seq, size_t *count, PyObject **keep) {
  PyObject *fast = PySequence_Fast(seq, "expected a sequence of str");
  Py_ssize_t n, i;
  const char **v;
  if (!fast) return NULL;
  n = PySequence_Fast_GET_SIZE(fast);
  v = (const char **)malloc(sizeof(char *) * (size_t)(n ? n : 1));
  if (!v) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return NULL;
  }
  for (i = 0; i < n; ++i) {
    PyObject *o = PySequence_Fast_GET_ITEM(fast, i);
    if (o == Py_None) {
      v[i] = NULL;
      continue;
    }
    v[i] = PyUnicode_AsUTF8(o);
    if (!v[i]) {
      free(v);
      Py_DECREF(fast);
      return NULL;
    }
  }
  *count = (size_t)n;
  *keep = fast;
  return v;
}
%}

%typemap(arginit) (const int64_t *shape, size_t ndim), (const int64_t *values, size_t count) "$1 = NULL;";
%typemap(in) (const int64_t *shape, size_t ndim), (const int64_t *values, size_t count) {
  $1 = genie_py_int64s($input, &$2);
  if (!$1) SWIG_fail;
}
%typemap(freearg) (const int64_t *shape, size_t ndim), (const int64_t *values, size_t count) { free((void *)$1); }

%typemap(arginit) (const double *values, size_t count) "$1 = NULL;";
%typemap(in) (const double *values, size_t count) {
  $1 = genie_py_doubles($input, &$2);
  if (!$1) SWIG_fail;
}
%typemap(freearg) (const double *values, size_t count) { free((void *)$1); }

%typemap(arginit) (const char *const *inputs, size_t n_inputs), (const char *const *outputs, size_t n_outputs) "$1 = NULL; keep$argnum = NULL;";
%typemap(in) (const char *const *inputs, size_t n_inputs) (PyObject *keep), (const char *const *outputs, size_t n_outputs) (PyObject *keep) {
  keep = NULL;
  $1 = genie_py_strings($input, &$2, &keep);
  if (!$1) SWIG_fail;
}
%typemap(freearg) (const char *const *inputs, size_t n_inputs), (const char *const *outputs, size_t n_outputs) {
  free((void *)$1);
  Py_XDECREF(keep$argnum);
}

/* Submission bindings: a sequence of (name, tensor) pairs. */
%typemap(arginit) (const char *const *input_names, genie_tensor_t *const *inputs, size_t n_inputs) "$1 = NULL; $2 = NULL; keep$argnum = NULL;";
%typemap(in) (const char *const *input_names, genie_tensor_t *const *inputs, size_t n_inputs) (PyObject *keep) {
  Py_ssize_t n, i;
  keep = PySequence_Fast($input, "expected a sequence of (name, tensor) pairs");
  if (!keep) SWIG_fail;
  n = PySequence_Fast_GET_SIZE(keep);
  $1 = (const char **)malloc(sizeof(char *) * (size_t)(n ? n : 1));
  $2 = (genie_tensor_t **)malloc(sizeof(genie_tensor_t *) * (size_t)(n ? n : 1));
  if (!$1 || !$2) {
    PyErr_NoMemory();
    SWIG_fail;
  }
  for (i = 0; i < n; ++i) {
    PyObject *pair = PySequence_Fast_GET_ITEM(keep, i);
    void *p = NULL;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
      PyErr_SetString(PyExc_TypeError, "expected (name, tensor) pairs");
      SWIG_fail;
    }
    $1[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(pair, 0));
    if (!$1[i]) SWIG_fail;
    if (!SWIG_IsOK(SWIG_ConvertPtr(PyTuple_GET_ITEM(pair, 1), &p, $descriptor(genie_tensor_t *), 0))) {
      PyErr_SetString(PyExc_TypeError, "expected a genie_tensor_t handle");
      SWIG_fail;
    }
    $2[i] = (genie_tensor_t *)p;
  }
  $3 = (size_t)n;
}
%typemap(freearg) (const char *const *input_names, genie_tensor_t *const *inputs, size_t n_inputs) {
  free((void *)$1);
  free((void *)$2);
  Py_XDECREF(keep$argnum);
}

/* Byte buffers through the buffer protocol: held (not copied) for the call.
 * Every typemap whose freearg releases something initialises it in arginit:
 * freearg also runs when an earlier argument failed to convert. */
%typemap(arginit) (const void *src, size_t nbytes), (const void *data, size_t nbytes), (const void *model, size_t len), (void *dst, size_t nbytes) "$1 = NULL; have$argnum = 0;";
%typemap(in) (const void *src, size_t nbytes) (Py_buffer view, int have), (const void *data, size_t nbytes) (Py_buffer view, int have), (const void *model, size_t len) (Py_buffer view, int have) {
  have = 0;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
  have = 1;
  $1 = view.buf;
  $2 = (size_t)view.len;
}
%typemap(in) (void *dst, size_t nbytes) (Py_buffer view, int have) {
  have = 0;
  if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
  have = 1;
  $1 = view.buf;
  $2 = (size_t)view.len;
}
%typemap(freearg) (const void *src, size_t nbytes), (const void *data, size_t nbytes), (const void *model, size_t len), (void *dst, size_t nbytes) {
  if (have$argnum) PyBuffer_Release(&view$argnum);
}

/* JSON text: str (UTF-8) or bytes. */
%typemap(in) (const char *json, size_t len) {
  if (PyUnicode_Check($input)) {
    Py_ssize_t n = 0;
    $1 = PyUnicode_AsUTF8AndSize($input, &n);
    if (!$1) SWIG_fail;
    $2 = (size_t)n;
  } else if (PyBytes_Check($input)) {
    $1 = PyBytes_AS_STRING($input);
    $2 = (size_t)PyBytes_GET_SIZE($input);
  } else {
    PyErr_SetString(PyExc_TypeError, "JSON text must be str or bytes");
    SWIG_fail;
  }
}

/* -------------------------------------------------------------------------
 * Callbacks: C trampolines that take the GIL and call a Python function.
 * Completion callbacks (genie_future_set_callback) and cluster events
 * (genie_subscribe) share the token (genie_py_callback_t, released with
 * genie_py_callback_release once the library guarantees the callback no
 * longer runs) and the call itself (genie_py_call).
 * ------------------------------------------------------------------------- */
%ignore genie_future_set_callback;
%ignore genie_subscribe;
%{
typedef struct genie_py_callback {
  PyObject *fn; /* a future's is cleared once called */
} genie_py_callback_t;

/* Takes the GIL and calls fn(*Py_BuildValue(fmt, ...)) with a reference of
 * its own (the token may be released during the call: a subscriber may
 * unsubscribe itself). `once` clears cb->fn first. An exception raised by
 * the function is reported through sys.unraisablehook, never propagated
 * into the library's thread. */
static void genie_py_call(genie_py_callback_t *cb, int once, const char *fmt, ...) {
  PyGILState_STATE gil;
  PyObject *fn, *args, *r = NULL;
  va_list ap;
  if (!Py_IsInitialized()) return;
  gil = PyGILState_Ensure();
  fn = cb->fn;
  if (fn) {
    if (once) cb->fn = NULL; /* the reference moves to fn */
    else Py_INCREF(fn);
    va_start(ap, fmt);
    args = Py_VaBuildValue(fmt, ap);
    va_end(ap);
    if (args) r = PyObject_CallObject(fn, args);
    if (!r) PyErr_WriteUnraisable(fn);
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_DECREF(fn);
  }
  PyGILState_Release(gil);
}

static void genie_py_trampoline(genie_future_t *future, genie_status_t status, void *user_data) {
  (void)future;
  genie_py_call((genie_py_callback_t *)user_data, 1, "(i)", (int)status);
}

static void genie_py_event_trampoline(genie_event_type_t type, const char *event_json, void *user_data) {
  genie_py_call((genie_py_callback_t *)user_data, 0, "(Is)", (unsigned int)type, event_json ? event_json : "{}");
}

/* A token holding a new reference to callable `fn` (NULL + exception). */
static genie_py_callback_t *genie_py_callback_new(PyObject *fn) {
  genie_py_callback_t *cb;
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "callback must be callable");
    return NULL;
  }
  cb = (genie_py_callback_t *)malloc(sizeof *cb);
  if (!cb) {
    PyErr_NoMemory();
    return NULL;
  }
  Py_INCREF(fn);
  cb->fn = fn;
  return cb;
}

static void genie_py_callback_free(genie_py_callback_t *cb) {
  Py_CLEAR(cb->fn);
  free(cb);
}
%}

%nothread genie_py_future_set_callback;
%nothread genie_py_subscribe;
%nothread genie_py_callback_release;
%inline %{
/* Sets fn(status:int) as the completion callback of `future`. Returns a
 * token to pass to genie_py_callback_release after genie_future_destroy. */
static PyObject *genie_py_future_set_callback(genie_future_t *future, PyObject *fn) {
  genie_py_callback_t *cb = genie_py_callback_new(fn);
  genie_status_t st;
  if (!cb) return NULL;
  Py_BEGIN_ALLOW_THREADS
  st = genie_future_set_callback(future, genie_py_trampoline, cb);
  Py_END_ALLOW_THREADS
  if (st != GENIE_OK) {
    genie_py_raise(st);
    genie_py_callback_free(cb);
    return NULL;
  }
  return PyLong_FromVoidPtr(cb);
}

/* Subscribes fn(type:int, event_json:str) to the events of `mask` on `ctx`
 * (called on the context's loop thread, holding the GIL). Returns
 * (subscription id, token); release the token with
 * genie_py_callback_release after genie_unsubscribe or genie_shutdown. */
static PyObject *genie_py_subscribe(genie_context_t *ctx, unsigned int mask, PyObject *fn) {
  genie_py_callback_t *cb = genie_py_callback_new(fn);
  genie_status_t st;
  uint64_t id = 0;
  if (!cb) return NULL;
  Py_BEGIN_ALLOW_THREADS
  st = genie_subscribe(ctx, (uint32_t)mask, genie_py_event_trampoline, cb, &id);
  Py_END_ALLOW_THREADS
  if (st != GENIE_OK) {
    genie_py_raise(st);
    genie_py_callback_free(cb);
    return NULL;
  }
  return Py_BuildValue("(KN)", (unsigned long long)id, PyLong_FromVoidPtr(cb));
}

/* Frees a callback token (and its function). Call only once the library
 * guarantees the callback no longer runs (genie_future_destroy,
 * genie_unsubscribe, genie_shutdown). */
static PyObject *genie_py_callback_release(PyObject *token) {
  genie_py_callback_t *cb = (genie_py_callback_t *)PyLong_AsVoidPtr(token);
  if (!cb) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  genie_py_callback_free(cb);
  Py_RETURN_NONE;
}
%}
%nothread genie_py_set_error_factory;

/* Custom ops: Python loads op libraries (genie.load_op_library); the
 * registration itself and the callbacks' helpers are C only
 * (docs/custom-ops.md, "Python"). */
%ignore genie_op_register;
%ignore genie_op_attr_int;
%ignore genie_op_attr_float;
%ignore genie_op_attr_string;
%ignore genie_op_attr_ints;
%ignore genie_op_attr_floats;
%ignore genie_op_set_error;
%ignore genie_op_desc;
%ignore genie_op_tensor;

/* genie_init is a macro; bindings call genie_init_abi with the ABI version
 * of the header they were built against (exported as GENIE_ABI_VERSION). */
%include "genie.h"
