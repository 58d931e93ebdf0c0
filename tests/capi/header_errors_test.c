/* Every function of include/genie.h, called with bad input, returns a code
 * its comment's "Errors:" line documents, and never crashes: every handle
 * NULL; every handle of the wrong kind (a configuration where a graph is
 * expected ...); and valid handles with every other pointer NULL. Functions
 * that return no status must give the answer their comment names for a bad
 * handle. The table is generated from the header by
 * scripts/gen-header-errors.py (tests/scripts/header_errors_table_test.sh
 * fails when it is stale). */
#include "header_errors_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int documented(const probe_fn_t *f, long got) {
  for (size_t i = 0; i < f->n_codes; ++i)
    if (f->codes[i] == got) return 1;
  return 0;
}

static int failures = 0;

static void check(const probe_fn_t *f, const char *probe, long got,
                  int ok_allowed) {
  if (f->returns == PROBE_STATUS) {
    if ((got == GENIE_OK && ok_allowed) || (got < 0 && documented(f, got)))
      return;
    ++failures;
    fprintf(stderr, "%s (%s): returned %s, not in its Errors: line (%s)\n",
            f->name, probe, genie_status_str((genie_status_t)got),
            genie_last_error());
    return;
  }
  if (f->returns == PROBE_VOID || f->bad_handle_value == PROBE_NO_VALUE) return;
  if (got != f->bad_handle_value) {
    ++failures;
    fprintf(stderr, "%s (%s): returned %ld, its comment says %ld\n", f->name,
            probe, got, f->bad_handle_value);
  }
}

static genie_status_t make_handles(probe_handles_t *h) {
  genie_status_t st;
  memset(h, 0, sizeof *h);
  if ((st = genie_config_create(&h->config)) != GENIE_OK) return st;
  if ((st = genie_server_config_create(&h->server_config)) != GENIE_OK) return st;
  if ((st = genie_config_set_use_env(h->config, 0)) != GENIE_OK) return st;
  if ((st = genie_config_set_num_threads(h->config, 1)) != GENIE_OK) return st;
  if ((st = genie_init(h->config, &h->context)) != GENIE_OK) return st;
  int64_t shape[1] = {4};
  if ((st = genie_tensor_alloc(h->context, GENIE_DTYPE_F32, shape, 1, "cpu",
                               &h->tensor)) != GENIE_OK)
    return st;
  if ((st = genie_graph_create("probe", &h->graph)) != GENIE_OK) return st;
  const char *in[1] = {"x"}, *out[1] = {"y"};
  if ((st = genie_graph_add_input(h->graph, "x", GENIE_DTYPE_F32, shape, 1)) ||
      (st = genie_graph_add_node(h->graph, "relu", "r", in, 1, out, 1)) ||
      (st = genie_graph_mark_output(h->graph, "y")))
    return st;
  genie_tensor_t *bind[1] = {h->tensor};
  if ((st = genie_graph_submit(h->context, h->graph, in, bind, 1,
                               &h->future)) != GENIE_OK)
    return st;
  if ((st = genie_future_wait(h->future, 10000)) != GENIE_OK) return st;
  return genie_server_create(h->config, "127.0.0.1", 0, &h->server);
}

int main(void) {
  probe_handles_t h;
  genie_status_t st = make_handles(&h);
  if (st != GENIE_OK) {
    fprintf(stderr, "setup failed: %s: %s\n", genie_status_str(st),
            genie_last_error());
    return 1;
  }
  size_t n = sizeof probe_table / sizeof probe_table[0];
  size_t calls = 0, invalid_handle = 0, invalid_argument = 0;
  for (size_t i = 0; i < n; ++i) {
    const probe_fn_t *f = &probe_table[i];
    if (f->null_handles) {
      long got = f->null_handles(&h);
      check(f, "NULL handles", got, 0);
      invalid_handle += got == GENIE_ERR_INVALID_HANDLE;
      ++calls;
    }
    if (f->wrong_kind) {
      long got = f->wrong_kind(&h);
      check(f, "handles of the wrong kind", got, 0);
      invalid_handle += got == GENIE_ERR_INVALID_HANDLE;
      ++calls;
    }
    if (f->null_args) {
      long got = f->null_args(&h);
      check(f, "NULL arguments", got, 1);
      invalid_argument += got == GENIE_ERR_INVALID_ARGUMENT;
      ++calls;
    }
  }
  /* The probes reached the checks they are meant for (a table that stopped
   * calling functions, or calls that fail for another reason, shows here). */
  if (invalid_handle < 60 || invalid_argument < 30) {
    fprintf(stderr, "too few INVALID_HANDLE (%zu) or INVALID_ARGUMENT (%zu) answers\n",
            invalid_handle, invalid_argument);
    ++failures;
  }
  /* The valid handles still work after every bad call. */
  if (genie_is_initialized(h.context) != 1 ||
      genie_future_poll(h.future) != GENIE_OK) {
    fprintf(stderr, "a valid handle was damaged by a bad call\n");
    ++failures;
  }
  genie_server_destroy(h.server);
  genie_future_destroy(h.future);
  genie_graph_destroy(h.graph);
  genie_tensor_destroy(h.tensor);
  genie_shutdown(h.context);
  genie_config_destroy(h.config);
  genie_server_config_destroy(h.server_config);
  printf("%zu functions, %zu bad calls (%zu INVALID_HANDLE, %zu INVALID_ARGUMENT), %d failures\n",
         n, calls, invalid_handle, invalid_argument, failures);
  return failures ? 1 : 0;
}
