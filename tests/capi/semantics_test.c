/* Blind mode (genie_config_set_semantics 0, GENIE_SEMANTICS=off): the
 * GPT-2-tiny decode loop (samples/c/gpt2_decode.h) embedded, remote with
 * semantics on and remote with semantics off, against one server on
 * 127.0.0.1, steps interleaved: every step's logits and tokens agree; blind
 * mode makes one remote call per operation, sends no graph deltas, keeps
 * the weights and caches in this process (they travel with every step) and
 * moves far more bytes per step than semantic mode, by the client's
 * counters. The setting's environment variable and its bad values. */
#include <math.h>
#include <stdlib.h>

#include "../../samples/c/gpt2_decode.h"
#include "check.h"

static double client_counter(genie_context_t *ctx, const char *key) {
  char *json = NULL, pat[96];
  const char *p;
  double v = -1;
  if (genie_context_server_info(ctx, &json) != GENIE_OK) return -1;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  p = strstr(json, "\"client\":");
  if (p && (p = strstr(p, pat)) != NULL) v = strncmp(p + strlen(pat), "false", 5) == 0 ? 0
                                            : strncmp(p + strlen(pat), "true", 4) == 0 ? 1
                                                                                       : strtod(p + strlen(pat), NULL);
  genie_free(json);
  return v;
}

static double wire_bytes(genie_context_t *ctx) {
  return client_counter(ctx, "graph_bytes_sent") + client_counter(ctx, "tensor_bytes_written") +
         client_counter(ctx, "tensor_bytes_read");
}

static genie_context_t *remote_ctx(int32_t port, int semantics) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_config_set_master_addr(cfg, "127.0.0.1"));
  REQUIRE_OK(genie_config_set_master_port(cfg, port));
  REQUIRE_OK(genie_config_set_semantics(cfg, semantics));
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  return ctx;
}

int main(void) {
  const int steps = 6;
  gd_dims_t dims;
  gd_model_t m;
  genie_config_t *cfg = NULL;
  genie_server_t *server = NULL;
  genie_context_t *ce = NULL, *cs, *cb, *cenv = NULL;
  gd_session_t se, ss, sb;
  float *le, *ls, *lb;
  double bs0, bb0, nb0, bs, bb;
  int32_t port = 0;
  int i, j, same = 1;
  const int nodes_per_step = 21 * 2 + 2; /* gpt2_decode.h: 21 per layer, then lnf and lm_head */

  /* The setter's handle check; the environment variable's values. */
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_semantics(NULL, 0));
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 1));
  setenv("GENIE_SEMANTICS", "maybe", 1);
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_init(cfg, &cenv));
  EXPECT_DETAIL("GENIE_SEMANTICS");
  unsetenv("GENIE_SEMANTICS");
  genie_config_destroy(cfg);

  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_server_create(cfg, "127.0.0.1", 0, &server));
  REQUIRE_OK(genie_server_port(server, &port));
  genie_config_destroy(cfg);

  /* GENIE_SEMANTICS=off turns a remote context blind. */
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_master_addr(cfg, "127.0.0.1"));
  REQUIRE_OK(genie_config_set_master_port(cfg, port));
  setenv("GENIE_SEMANTICS", "off", 1);
  REQUIRE_OK(genie_init(cfg, &cenv));
  unsetenv("GENIE_SEMANTICS");
  genie_config_destroy(cfg);
  CHECK(client_counter(cenv, "semantics") == 0);
  genie_shutdown(cenv);

  dims = gd_tiny_dims(1); /* hidden 32, 2 layers, vocabulary 50 */
  gd_model_init(&m, dims, 11);
  le = (float *)malloc(sizeof(float) * (size_t)dims.vocab);
  ls = (float *)malloc(sizeof(float) * (size_t)dims.vocab);
  lb = (float *)malloc(sizeof(float) * (size_t)dims.vocab);
  REQUIRE_OK(genie_init(NULL, &ce));
  cs = remote_ctx(port, 1);
  cb = remote_ctx(port, 0);
  CHECK(client_counter(cs, "semantics") == 1);
  CHECK(client_counter(cb, "semantics") == 0);
  gd_session_open(&se, ce, &m, NULL, 0);
  gd_session_open(&ss, cs, &m, NULL, 0);
  gd_session_open(&sb, cb, &m, NULL, 0);
  /* A blind "remote" tensor keeps the name it was asked for. */
  CHECK(strcmp(genie_tensor_device(sb.in[1]), "remote:0") == 0);

  gd_step(&se, le);
  gd_step(&ss, ls);
  gd_step(&sb, lb); /* warm-up: the semantic side's weights are on the server already */
  bs0 = wire_bytes(cs);
  bb0 = wire_bytes(cb);
  nb0 = client_counter(cb, "graph_submits_full");
  for (i = 0; i < steps; ++i) {
    gd_step(&se, le);
    gd_step(&ss, ls);
    gd_step(&sb, lb);
    for (j = 0; j < dims.vocab; ++j)
      if (fabsf(le[j] - ls[j]) > 1e-4f * (1.0f + fabsf(le[j])) || fabsf(le[j] - lb[j]) > 1e-4f * (1.0f + fabsf(le[j])))
        same = 0;
    CHECK(se.token == ss.token && se.token == sb.token);
  }
  CHECK(same);
  /* Blind: the caches the last step produced came back to this process. */
  {
    const size_t kslot = 2 + 8;
    CHECK(strcmp(genie_tensor_device(sb.in[kslot]), "cpu:0") == 0);
    CHECK(strcmp(genie_tensor_device(ss.in[kslot]), "cpu:0") != 0);
  }
  /* One remote call per operation, each in full. */
  CHECK(client_counter(cb, "graph_submits_full") - nb0 == (double)(steps * nodes_per_step));
  CHECK(client_counter(cb, "graph_submits_delta") == 0);
  bs = (wire_bytes(cs) - bs0) / steps;
  bb = (wire_bytes(cb) - bb0) / steps;
  printf("bytes per decode step: semantic %.0f, blind %.0f (%.1fx)\n", bs, bb, bb / bs);
  /* The weights alone are ~105 kB a step blind; semantic mode sends the
   * embedding, a graph delta and reads the logits. */
  CHECK(bs > 0 && bb > 20 * bs);

  gd_session_close(&se);
  gd_session_close(&ss);
  gd_session_close(&sb);
  genie_shutdown(ce);
  genie_shutdown(cs);
  genie_shutdown(cb);
  genie_server_destroy(server);
  gd_model_free(&m);
  free(le);
  free(ls);
  free(lb);
  return test_summary("semantics_test");
}
