/* Minimal assertion helpers for the C API tests (plain C99). */
#ifndef GENIE_TEST_CHECK_H
#define GENIE_TEST_CHECK_H

#include <genie.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_checks = 0;
static int g_failures = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    ++g_checks;                                                          \
    if (!(cond)) {                                                       \
      ++g_failures;                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                    \
  } while (0)

/* Asserts that `call` returns `want`; on mismatch prints both and the detail. */
#define EXPECT_STATUS(want, call)                                                 \
  do {                                                                            \
    genie_status_t got_ = (call);                                                 \
    ++g_checks;                                                                   \
    if (got_ != (want)) {                                                         \
      ++g_failures;                                                               \
      fprintf(stderr, "%s:%d: %s\n  returned %s, want %s\n  last error: %s\n",    \
              __FILE__, __LINE__, #call, genie_status_str(got_),                  \
              genie_status_str(want), genie_last_error());                        \
    }                                                                             \
  } while (0)

#define EXPECT_OK(call) EXPECT_STATUS(GENIE_OK, call)

/* Asserts that the last error message contains `needle`. */
#define EXPECT_DETAIL(needle)                                                   \
  do {                                                                          \
    ++g_checks;                                                                 \
    if (strstr(genie_last_error(), (needle)) == NULL) {                         \
      ++g_failures;                                                             \
      fprintf(stderr, "%s:%d: last error \"%s\" does not mention \"%s\"\n",     \
              __FILE__, __LINE__, genie_last_error(), (needle));                \
    }                                                                           \
  } while (0)

/* Aborts the test program: used when a later step cannot run without this one. */
#define REQUIRE_OK(call)                                                         \
  do {                                                                           \
    genie_status_t got_ = (call);                                                \
    if (got_ != GENIE_OK) {                                                      \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,  \
              genie_status_str(got_), genie_last_error());                       \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* An embedded context that ignores GENIE_* in the environment (so a test
 * run inside a remote setup stays in-process), with `threads` executor
 * threads (0: one per core); exits on failure. */
static inline genie_context_t *embedded_context(int32_t threads) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_config_set_num_threads(cfg, threads));
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  return ctx;
}

static int test_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

#endif
