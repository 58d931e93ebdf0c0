"""Server: a Genie server in this process (genie_server_create)."""

from ._config import build_config, build_server_config
from ._handle import _Handle
from ._lib import capi


class Server(_Handle):
    """A server in this process (what `genie serve` runs): serves remote
    contexts on `host`:`port` (port 0 picks a free one, see .port). A host
    other than loopback needs an auth_token (at least 16 bytes) or client
    certificates (tls_ca), or allow_insecure=True on a trusted network.
    With tls_cert and tls_key it speaks only TLS 1.3; with tls_ca as well,
    clients must present a certificate chained to it. With
    ``etcd_endpoints`` it registers in that etcd under ``cluster`` with a
    lease of ``etcd_lease_ttl_ms`` (docs/cluster.md).

    Every other setting of docs/configuration.md is set by name:
    ``settings`` for those clients and servers share (``{"timeout_ms":
    2000}``), ``server_settings`` for a server's own (``{"max_sessions": 64,
    "memory_budget_bytes": 8 << 30}``). A name of the wrong side, an unknown
    name or a value out of bounds raises InvalidArgumentError."""

    def __init__(self, host=None, port=0, *, auth_token=None, num_threads=None,
                 session_grace_ms=None, max_message_bytes=None, log_level=None, use_env=True,
                 heartbeat_interval_ms=None, heartbeat_timeout_ms=None, node_id=None,
                 allow_insecure=None, tls_cert=None, tls_key=None, tls_ca=None,
                 etcd_endpoints=None, cluster=None, etcd_lease_ttl_ms=None,
                 settings=None, server_settings=None):
        own = dict(server_settings or {})
        for name, value in (("session_grace_ms", session_grace_ms),
                            ("allow_insecure", allow_insecure),
                            ("etcd_lease_ttl_ms", etcd_lease_ttl_ms)):
            if value is not None:
                own.setdefault(name, value)
        cfg = build_config(num_threads=num_threads, etcd_endpoints=etcd_endpoints, cluster=cluster,
                           log_level=log_level, auth_token=auth_token,
                           tls_cert=tls_cert, tls_key=tls_key, tls_ca=tls_ca,
                           use_env=use_env, max_message_bytes=max_message_bytes, node_id=node_id,
                           heartbeat_interval_ms=heartbeat_interval_ms,
                           heartbeat_timeout_ms=heartbeat_timeout_ms, settings=settings)
        try:
            scfg = build_server_config(own)
            try:
                self._h = capi.genie_server_create_with(cfg, scfg, host, int(port))
            finally:
                capi.genie_server_config_destroy(scfg)
        finally:
            capi.genie_config_destroy(cfg)

    @staticmethod
    def _destroy(h):
        capi.genie_server_destroy(h)

    @property
    def port(self):
        return capi.genie_server_port(self._h)

    def stop(self):
        capi.genie_server_stop(self._h)
