/* What the generated tests/capi/header_errors_table.h needs: the handles a
 * probe may pass, a scratch buffer for pointer arguments, and callbacks. */
#ifndef GENIE_HEADER_ERRORS_PROBE_H
#define GENIE_HEADER_ERRORS_PROBE_H

#include <genie.h>
#include <stddef.h>

typedef struct probe_handles {
  genie_config_t *config;
  genie_context_t *context;
  genie_tensor_t *tensor;
  genie_graph_t *graph;
  genie_future_t *future;
  genie_server_t *server;
  genie_server_config_t *server_config;
} probe_handles_t;

/* How a function answers: a status, nothing, a value, or a pointer. */
enum { PROBE_STATUS, PROBE_VOID, PROBE_VALUE, PROBE_POINTER };
/* A function whose comment names no value for a bad handle. */
#define PROBE_NO_VALUE (-12345L)

typedef long (*probe_call_t)(const probe_handles_t *h);

typedef struct probe_fn {
  const char *name;
  int returns;                   /* PROBE_* */
  const genie_status_t *codes;   /* documented by the Errors: line */
  size_t n_codes;
  long bad_handle_value;         /* non-status functions: documented answer */
  probe_call_t null_handles;     /* every handle NULL (others plausible) */
  probe_call_t wrong_kind;       /* every handle of another kind */
  probe_call_t null_args;        /* valid handles, every other pointer NULL */
} probe_fn_t;

/* Big enough for any out-parameter (GENIE_MAX_DIMS shapes included). */
static _Alignas(16) unsigned char probe_buf[4096];

static void probe_event_fn(genie_event_type_t type, const char *json,
                           void *user_data) {
  (void)type; (void)json; (void)user_data;
}
static void probe_future_fn(genie_future_t *future, genie_status_t status,
                            void *user_data) {
  (void)future; (void)status; (void)user_data;
}

#endif
