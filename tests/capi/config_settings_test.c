/* Settings by name (docs/configuration.md): genie_config_set_int/_string
 * take a client's settings and refuse a server's; genie_server_config_t takes
 * a server's and refuses the others; both check the bounds of the settings
 * table; and a server made by genie_server_create_with applies its settings
 * (max_sessions 1: a second client is refused). */
#include <stdint.h>

#include "check.h"

static genie_context_t *connect_to(int32_t port, genie_status_t *st) {
  genie_config_t *cfg;
  genie_context_t *ctx = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_config_set_string(cfg, "master_addr", "127.0.0.1"));
  REQUIRE_OK(genie_config_set_int(cfg, "master_port", port));
  REQUIRE_OK(genie_config_set_int(cfg, "timeout_ms", 5000));
  *st = genie_init(cfg, &ctx);
  genie_config_destroy(cfg);
  return ctx;
}

int main(void) {
  genie_config_t *cfg;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));

  /* A client's settings, checked against the table's bounds. */
  EXPECT_OK(genie_config_set_int(cfg, "timeout_ms", 2500));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_int(cfg, "timeout_ms", 0));
  EXPECT_DETAIL("timeout");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_int(cfg, "num_threads", 1025));
  EXPECT_DETAIL("0..1024");
  EXPECT_OK(genie_config_set_int(cfg, "graph_deltas", 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_int(cfg, "graph_deltas", 2));
  EXPECT_OK(genie_config_set_string(cfg, "cluster", "blue.team-1"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_string(cfg, "cluster", "no spaces"));
  EXPECT_DETAIL("[A-Za-z0-9._-]");
  EXPECT_OK(genie_config_set_string(cfg, "cluster", NULL)); /* back to "default" */
  EXPECT_OK(genie_config_set_string(cfg, "log_level", "info"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_string(cfg, "log_level", "loud"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_int(cfg, "cluster", 1));
  EXPECT_DETAIL("not an integer");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_int(cfg, "no_such_setting", 1));
  EXPECT_DETAIL("no_such_setting");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_int(cfg, NULL, 1));
  /* A server's own settings are not a client's. */
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_int(cfg, "max_sessions", 1));
  EXPECT_DETAIL("genie_server_config_t");

  genie_server_config_t *scfg;
  REQUIRE_OK(genie_server_config_create(&scfg));
  EXPECT_OK(genie_server_config_set_int(scfg, "max_sessions", 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_server_config_set_int(scfg, "max_sessions", -1));
  EXPECT_DETAIL("max sessions");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_server_config_set_int(scfg, "timeout_ms", 10));
  EXPECT_DETAIL("genie_config_t");
  EXPECT_OK(genie_server_config_set_string(scfg, "serve_transports", "loopback"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_server_config_set_string(scfg, "serve_transports", "Bad!"));
  EXPECT_OK(genie_server_config_set_string(scfg, "serve_transports", ""));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE,
                genie_server_config_set_int((genie_server_config_t *)cfg, "max_sessions", 1));

  /* The server applies them: one session at most. */
  genie_server_t *srv;
  REQUIRE_OK(genie_server_create_with(cfg, scfg, "127.0.0.1", 0, &srv));
  genie_server_config_destroy(scfg);
  int32_t port = 0;
  REQUIRE_OK(genie_server_port(srv, &port));
  genie_status_t st1, st2;
  genie_context_t *a = connect_to(port, &st1);
  EXPECT_STATUS(GENIE_OK, st1);
  genie_context_t *b = connect_to(port, &st2);
  EXPECT_STATUS(GENIE_ERR_CONNECTION, st2);
  genie_shutdown(b);
  genie_shutdown(a);
  genie_server_destroy(srv);
  genie_config_destroy(cfg);
  return test_summary("config_settings_test");
}
