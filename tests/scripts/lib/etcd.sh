# Shared by the etcd test scripts (source it after lib/servers.sh): skips
# (exit 77, saying why) without etcd, etcdctl or the etcd store plugin;
# sets ETCD and ETCDCTL; free_port prints a free TCP port on 127.0.0.1.
ETCD=$(command -v etcd || true)
ETCDCTL=$(command -v etcdctl || true)
if [ -z "$ETCD" ] || [ -z "$ETCDCTL" ]; then
  echo "SKIP: etcd / etcdctl not installed (Debian etcd-server, etcd-client)"; exit 77
fi
[ -f "$B/libgenie_store_etcd.so" ] || { echo "SKIP: the etcd store plugin was not built (no libcurl at configure time)"; exit 77; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
