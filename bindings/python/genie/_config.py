"""A genie_config_t built from keyword arguments (shared by Context,
Server and discover), and a server's own genie_server_config_t; the caller
destroys them. Any setting of docs/configuration.md can also be given by
name in a ``settings`` mapping (genie_config_set_int / _string)."""

from ._lib import capi
from .enums import BACKENDS, LOG_LEVELS, _enum


def build_config(master_addr=None, port=None, timeout_ms=None, num_threads=None, log_level=None,
                 auth_token=None, node_id=None, use_env=True,
                 max_message_bytes=None, heartbeat_interval_ms=None, heartbeat_timeout_ms=None,
                 gpu_poll_interval_ms=None, health_interval_ms=None, graph_deltas=None,
                 semantics=None, dpdk_probe=None, tls_ca=None, tls_cert=None, tls_key=None,
                 tls_server_name=None, backend=None, etcd_endpoints=None, cluster=None,
                 etcd_lease_ttl_ms=None, settings=None):
    cfg = capi.genie_config_create()
    try:
        capi.genie_config_set_use_env(cfg, 1 if use_env else 0)
        if master_addr:
            host, sep, p = str(master_addr).rpartition(":")
            if sep and p.isdigit() and port is None:
                master_addr, port = host, int(p)
            capi.genie_config_set_master_addr(cfg, master_addr)
        if port is not None:
            capi.genie_config_set_master_port(cfg, int(port))
        if timeout_ms is not None:
            capi.genie_config_set_timeout_ms(cfg, int(timeout_ms))
        if num_threads is not None:
            capi.genie_config_set_num_threads(cfg, int(num_threads))
        if log_level is not None:
            capi.genie_config_set_log_level(cfg, _enum(LOG_LEVELS, log_level, "log level"))
        if auth_token is not None:
            capi.genie_config_set_auth_token(cfg, auth_token)
        if node_id is not None:
            capi.genie_config_set_node_id(cfg, node_id)
        if max_message_bytes is not None:
            capi.genie_config_set_max_message_bytes(cfg, int(max_message_bytes))
        for setter, value in ((capi.genie_config_set_heartbeat_interval_ms, heartbeat_interval_ms),
                              (capi.genie_config_set_heartbeat_timeout_ms, heartbeat_timeout_ms),
                              (capi.genie_config_set_gpu_poll_interval_ms, gpu_poll_interval_ms),
                              (capi.genie_config_set_health_interval_ms, health_interval_ms)):
            if value is not None:
                setter(cfg, int(value))
        if graph_deltas is not None:
            capi.genie_config_set_graph_deltas(cfg, 1 if graph_deltas else 0)
        if semantics is not None:
            capi.genie_config_set_semantics(cfg, 1 if semantics else 0)
        if dpdk_probe is not None:
            capi.genie_config_set_dpdk_probe(cfg, 1 if dpdk_probe else 0)
        if tls_ca is not None:
            capi.genie_config_set_tls_ca(cfg, str(tls_ca))
        if tls_cert is not None or tls_key is not None:
            capi.genie_config_set_tls_cert(cfg, None if tls_cert is None else str(tls_cert),
                                           None if tls_key is None else str(tls_key))
        if tls_server_name is not None:
            capi.genie_config_set_tls_server_name(cfg, tls_server_name)
        if backend is not None:
            capi.genie_config_set_backend(cfg, _enum(BACKENDS, backend, "backend"))
        if etcd_endpoints is not None:
            if not isinstance(etcd_endpoints, str):
                etcd_endpoints = ",".join(etcd_endpoints)
            capi.genie_config_set_etcd_endpoints(cfg, etcd_endpoints)
        if cluster is not None:
            capi.genie_config_set_cluster(cfg, cluster)
        if etcd_lease_ttl_ms is not None:
            capi.genie_config_set_etcd_lease_ttl_ms(cfg, int(etcd_lease_ttl_ms))
        apply_settings(cfg, settings, capi.genie_config_set_int, capi.genie_config_set_string)
    except BaseException:
        capi.genie_config_destroy(cfg)
        raise
    return cfg


def apply_settings(cfg, settings, set_int, set_string):
    """Sets each ``name: value`` of the mapping `settings` by name: text
    (str, or None for the default) through `set_string`, integers and
    booleans through `set_int`. The library checks names and bounds: a
    setting it does not know, or one of the other side (a server's on a
    client's configuration), raises InvalidArgumentError naming it."""
    for name, value in dict(settings or {}).items():
        if value is None or isinstance(value, str):
            set_string(cfg, name, value)
        elif isinstance(value, (bool, int)):
            set_int(cfg, name, int(value))
        else:
            raise TypeError("setting %r: expected str, int or bool, got %s"
                            % (name, type(value).__name__))


def build_server_config(settings=None):
    """A genie_server_config_t with the server-side settings of the mapping
    `settings` (docs/configuration.md, side "server")."""
    scfg = capi.genie_server_config_create()
    try:
        apply_settings(scfg, settings, capi.genie_server_config_set_int,
                       capi.genie_server_config_set_string)
    except BaseException:
        capi.genie_server_config_destroy(scfg)
        raise
    return scfg
