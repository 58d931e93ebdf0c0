#!/usr/bin/env bash
# Installs the Debian 12 packages Genie needs to build, test and run its demo.
# Idempotent: installs only what is missing; does nothing when all is there.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libcjson-dev libopenblas-dev libuv1-dev
  libprotobuf-dev protobuf-compiler zlib1g-dev libssl-dev
  libdeflate-dev  # the frame CRC-32, faster than zlib's (optional: zlib's otherwise)
  libgtest-dev libgmock-dev
  openssl  # the TLS tests make throwaway certificates with the openssl command
  binutils python3 python3-numpy
  swig python3-dev python3-pytest python3-venv python3-pip python3-setuptools  # Python binding
  # (PyTorch 2 for the frontends comes from PyPI: scripts/python-env.sh)
  golang-go cargo rustc rustfmt bindgen libclang1-14 libclang-common-14-dev  # Go and Rust bindings (bindgen loads libclang, formats with rustfmt)
  libibverbs-dev  # verbs types for the RDMA probe (the library itself is dlopen'ed)
  iperf3 libgrpc++-dev protobuf-compiler-grpc  # benchmark peers only
  libdpdk-dev dpdk  # DPDK transport plugin (EAL, mempools, net_ring/memif/af_packet, gpudev)
  libisal-dev  # the DPDK transport's folding CRC-32C (a dependency of libdpdk-dev on Debian)
  libucx-dev ucx-utils  # UCX (RDMA) transport plugin; ucx_perftest is its benchmark peer
  libgloo-dev libopenmpi-dev openmpi-bin  # genie replay: Gloo benchmark peer, MPI launch
  clang libclang-rt-14-dev  # libFuzzer harnesses
  iproute2  # network namespaces and tc netem in transport tests
  prometheus-cpp-dev  # Prometheus metrics (optional: reported as not supported without it)
  prometheus curl  # the metrics scrape test runs a real Prometheus server and queries it
  libcurl4-openssl-dev  # the etcd membership store plugin (optional: not built without it)
  etcd-server etcd-client  # the etcd cluster tests run a real etcd (and etcdctl)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
