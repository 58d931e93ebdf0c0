#include "dataplane/dpdk/engine.hpp"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_gpudev.h>
#include <rte_lcore.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memory.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.hpp"
#include "dataplane/dpdk/session.hpp"

namespace genie::dataplane::dpdk {
namespace {

constexpr uint16_t kBurst = 32;
constexpr uint16_t kRingSize = 1024;
constexpr unsigned kPoolCache = RTE_MEMPOOL_CACHE_MAX_SIZE;  // 512

uint32_t env_u32(const char* name, uint32_t def, uint32_t lo, uint32_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  const unsigned long x = std::strtoul(v, &end, 10);
  if (*end != '\0' || x < lo || x > hi)
    fail(GENIE_ERR_INVALID_ARGUMENT, name, "='", v, "' is not a number in ", lo, "..", hi);
  return static_cast<uint32_t>(x);
}

std::vector<std::string> eal_args() {
  std::vector<std::string> args{"genie"};
  if (const char* v = std::getenv("GENIE_DPDK_EAL"); v != nullptr && *v != '\0') {
    std::istringstream in(v);
    for (std::string a; in >> a;) args.push_back(a);
    return args;
  }
  int cpu = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < static_cast<int>(CPU_SETSIZE); ++c)
      if (CPU_ISSET(c, &set)) {
        cpu = c;
        break;
      }
  for (const char* a : {"-l", "", "--no-huge", "-m", "512", "--no-shconf", "--no-pci", "--no-telemetry",
                        "--log-level=*:warning"})
    args.push_back(a);
  args[2] = std::to_string(cpu);
  return args;
}

}  // namespace

void Mailbox::post(Event e) {
  std::lock_guard<std::mutex> lk(mu);
  events.push_back(std::move(e));
  if (async != nullptr) uv_async_send(async);
  cv.notify_all();
}

namespace {
std::mutex g_mu;
Engine* g_engine = nullptr;

// EAL's runtime directory (/var/run/dpdk/PREFIX for root, else under
// XDG_RUNTIME_DIR or /tmp) holds the shared configuration, memory maps and
// multi-process socket that secondary processes attach to. Genie starts
// none, and EAL never removes the directory, so every process left one
// behind per --file-prefix. It goes when the process exits. Its files go
// only where this process is the primary with shared files on: then it
// holds the configuration's lock, and no other primary can be using the
// same directory. Otherwise (--no-shconf, --in-memory, a secondary) the
// directory may be another process's, and it is only removed if empty.
char g_runtime_dir[PATH_MAX];
bool g_runtime_files_ours = false;

void remove_runtime_dir() {
  if (g_runtime_files_ours) {
    if (DIR* d = opendir(g_runtime_dir)) {
      while (const dirent* e = readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          unlinkat(dirfd(d), e->d_name, 0);
      closedir(d);
    }
  }
  rmdir(g_runtime_dir);
}

void remove_runtime_dir_at_exit(const std::vector<std::string>& args) {
  bool shared_files = rte_eal_process_type() == RTE_PROC_PRIMARY;
  for (const std::string& a : args)
    if (a == "--no-shconf" || a == "--in-memory") shared_files = false;
  const char* dir = rte_eal_get_runtime_dir();
  if (dir == nullptr || std::strlen(dir) >= sizeof g_runtime_dir) return;
  std::strcpy(g_runtime_dir, dir);
  g_runtime_files_ours = shared_files;
  std::atexit(remove_runtime_dir);
}
}  // namespace

Engine* Engine::started() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_engine;
}

Engine& Engine::get(const TransportHost* host) {
  Engine*& engine = g_engine;
  static std::string failed;
  std::lock_guard<std::mutex> lk(g_mu);
  if (engine != nullptr) return *engine;
  if (!failed.empty()) fail(GENIE_ERR_UNSUPPORTED, failed);
  try {
    std::unique_ptr<Engine> e(new Engine(host));  // freed if it cannot start
    e->start();
    engine = e.release();  // lives until the process exits: EAL cannot start twice
    return *engine;
  } catch (const Error& err) {
    failed = err.detail();
    throw;
  }
}

Engine::Engine(const TransportHost* host) : host_(host) {}

// Mbuf pools hand out the mbufs freed last. DPDK's default pool is a FIFO
// ring, fronted by a LIFO cache per lcore of at most 512 mbufs: with a
// window of packets in flight larger than the cache, every mbuf taken
// comes from the far end of the ring, the least recently used of the
// pool's thousands, and each packet's mbuf and header miss the CPU caches
// on both ends (at 64-byte fragments that was half of a packet's cost).
// The "stack" pool driver (librte_mempool_stack, shipped with DPDK) is
// LIFO; where it is not there the default stays.
void Engine::prefer_lifo_pools() {
  for (unsigned i = 0; i < rte_mempool_ops_table.num_ops; ++i)
    if (std::strcmp(rte_mempool_ops_table.ops[i].name, kLifoPoolOps) == 0) {
      rte_mbuf_set_user_mempool_ops(kLifoPoolOps);
      return;
    }
}

void Engine::start() {
  cfg_.window = env_u32("GENIE_DPDK_WINDOW", 512, 1, 4096);
  cfg_.rto_ms = env_u32("GENIE_DPDK_RTO_MS", 20, 1, 60000);
  cfg_.retries = env_u32("GENIE_DPDK_RETRIES", 12, 1, 1000);
  cfg_.nack_us = env_u32("GENIE_DPDK_NACK_US", 200, 1, 1000000);
  cfg_.connect_ms = env_u32("GENIE_DPDK_CONNECT_MS", 3000, 1, 600000);
  cfg_.drop = env_u32("GENIE_DPDK_TEST_DROP", 0, 0, 1000);
  cfg_.corrupt = env_u32("GENIE_DPDK_TEST_CORRUPT", 0, 0, 1000);
  cfg_.dup = env_u32("GENIE_DPDK_TEST_DUP", 0, 0, 1000);
  cfg_.reorder = env_u32("GENIE_DPDK_TEST_REORDER", 0, 0, 1000);
  cfg_.backlog_limit = uint64_t{env_u32("GENIE_DPDK_BACKLOG_MB", 256, 1, 1u << 20)} << 20;
  cfg_.drop_after = env_u32("GENIE_DPDK_TEST_DROP_AFTER", 0, 0, 1u << 30);
  cfg_.tx_mbufs = env_u32("GENIE_DPDK_TEST_TX_MBUFS", 8191, 64, 8191);

  std::vector<std::string> args = eal_args();
  std::vector<char*> argv;
  std::string joined;
  for (std::string& a : args) {
    argv.push_back(a.data());
    joined += (joined.empty() ? "" : " ") + a;
  }
  argv.push_back(nullptr);
  // EAL pins the calling thread to its main lcore: this thread is the
  // application's (or a loop's), so it gets its own CPU set back.
  cpu_set_t before;
  const bool had_affinity = pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0;
  const int eal_rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (had_affinity) pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  if (eal_rc < 0)
    fail(GENIE_ERR_UNSUPPORTED, "DPDK EAL did not initialise (", rte_strerror(rte_errno), ") with '", joined,
         "' (GENIE_DPDK_EAL sets the arguments)");
  // Registered before the polling thread's stop (below): handlers run in
  // reverse order, so the thread has stopped when the directory goes.
  remove_runtime_dir_at_exit(args);

  prefer_lifo_pools();

  gpus_ = rte_gpu_count_avail();
  gpu_reason_ =
      gpus_ == 0
          ? "no gpudev device (Debian's DPDK 22.11 has no CUDA gpudev driver), so GPU memory cannot back "
            "DPDK buffers here"
          : cat(gpus_, " gpudev device(s), but this build does not place DPDK buffers in GPU memory yet");

  const char* want = std::getenv("GENIE_DPDK_PORT");
  bool found = false;
  if (want != nullptr && *want != '\0') {
    found = rte_eth_dev_get_port_by_name(want, &port_) == 0;
    if (!found) fail(GENIE_ERR_UNSUPPORTED, "GENIE_DPDK_PORT: no DPDK port named '", want, "'");
  } else {
    uint16_t p;
    RTE_ETH_FOREACH_DEV(p) {
      port_ = p;
      found = true;
      break;
    }
  }
  if (!found)
    fail(GENIE_ERR_UNSUPPORTED,
         "EAL initialised but there is no DPDK port (add a virtual device to GENIE_DPDK_EAL, e.g. "
         "--vdev=net_ring0, or bind a NIC to DPDK)");
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port_, name);
  port_name_ = name;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_, &info) != 0)
    fail(GENIE_ERR_UNSUPPORTED, "rte_eth_dev_info_get(", name, ") failed");
  loopback_port_ = std::strcmp(info.driver_name, "net_ring") == 0;
  uint16_t mtu = 1500;
  rte_eth_dev_get_mtu(port_, &mtu);
  // Virtual ports take jumbo packets, so the fixed cost of a packet is
  // spread over six times the bytes: a ring passes pointers (any length);
  // memif copies into slots of its ring (bsize=, 2048 bytes by default) and
  // chains slots slowly, so a packet fills one slot, up to 9000 bytes
  // (docs/dpdk.md: give memif bsize=9216).
  if (loopback_port_) mtu = 9000;
  if (std::strcmp(info.driver_name, "net_memif") == 0) {
    uint32_t bsize = 2048;
    const rte_devargs* da = info.device != nullptr ? rte_dev_devargs(info.device) : nullptr;
    if (da != nullptr && da->args != nullptr)
      if (const char* b = std::strstr(da->args, "bsize=")) bsize = static_cast<uint32_t>(std::strtoul(b + 6, nullptr, 10));
    mtu = static_cast<uint16_t>(std::clamp<uint32_t>(bsize, 1024 + kEthHeaderSize, 9000 + kEthHeaderSize) - kEthHeaderSize);
  }
  cfg_.mtu = env_u32("GENIE_DPDK_MTU", mtu, kPacketHeaderSize + 64, 9600);

  const int socket =
      static_cast<int>(rte_socket_id()) == SOCKET_ID_ANY ? 0 : static_cast<int>(rte_socket_id());
  // Header mbufs hold the Ethernet and Genie headers and a Nack's ranges;
  // every fragment byte leaves from an external buffer.
  const uint16_t hdr_room = static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + 1024);
  // The per-lcore caches as large as DPDK allows: a send window's mbufs
  // (512 packets by default) come back to the cache they left from.
  const unsigned cache = cfg_.tx_mbufs >= 1024 ? kPoolCache : 0;
  pool_ = rte_pktmbuf_pool_create("genie_pkt", cfg_.tx_mbufs, cache, 0, hdr_room, socket);
  ext_pool_ = rte_pktmbuf_pool_create("genie_ext", 2 * cfg_.tx_mbufs + 1, cache, 0, 0, socket);
  if (pool_ == nullptr || ext_pool_ == nullptr)
    fail(GENIE_ERR_UNSUPPORTED, "cannot create DPDK mbuf pools (", rte_strerror(rte_errno),
         "): give EAL more memory (-m in GENIE_DPDK_EAL)");
  hdr_stash_.set_pool(MempoolSource{pool_});
  ext_stash_.set_pool(MempoolSource{ext_pool_});
  const uint32_t rx_room = (RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(2048, cfg_.mtu + kEthHeaderSize) + 63) & ~63u;
  setup_rx_pool(socket, static_cast<uint16_t>(rx_room));
  rte_eth_conf conf{};
  if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  int rc = rte_eth_dev_configure(port_, 1, 1, &conf);
  if (rc == 0) rc = rte_eth_rx_queue_setup(port_, 0, kRingSize, socket, nullptr, rx_pool_);
  if (rc == 0) rc = rte_eth_tx_queue_setup(port_, 0, kRingSize, socket, nullptr);
  if (rc == 0) rc = rte_eth_dev_start(port_);
  if (rc != 0) fail(GENIE_ERR_UNSUPPORTED, "cannot start DPDK port ", name, ": ", rte_strerror(-rc));
  rte_eth_promiscuous_enable(port_);
  rte_eth_macaddr_get(port_, &mac_);
  thread_ = std::thread([this] { poll(); });
  // The polling thread runs until the process exits; it stops before the
  // statics it may use (the log) are destroyed.
  std::atexit([] {
    if (g_engine != nullptr && g_engine->thread_.joinable()) {
      g_engine->stop_ = true;
      g_engine->thread_.join();
    }
  });
}

void Engine::setup_rx_pool(int socket, uint16_t room) {
  constexpr uint32_t kRxMbufs = 8191;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  RxMemory& r = rx_mem_;
  r.mbufs = kRxMbufs;
  r.elt_size = room;
  r.length = (size_t{kRxMbufs} * room + page - 1) / page * page;
  void* mem = mmap(nullptr, r.length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED)
    fail(GENIE_ERR_UNSUPPORTED, "cannot map ", r.length, " bytes for the DPDK receive pool: ", std::strerror(errno));
  r.base = static_cast<uint8_t*>(mem);
  // In IOVA-as-VA mode (no hugepages, or an IOMMU) a page's IOVA is its
  // address; otherwise the pages get no IOVA and only virtual devices (which
  // copy by address) can receive into them.
  r.iova_va = rte_eal_iova_mode() == RTE_IOVA_VA;
  std::vector<rte_iova_t> iovas;
  if (r.iova_va)
    for (size_t off = 0; off < r.length; off += page) iovas.push_back(reinterpret_cast<uintptr_t>(r.base + off));
  if (rte_extmem_register(r.base, r.length, r.iova_va ? iovas.data() : nullptr,
                          static_cast<unsigned>(iovas.size()), page) != 0)
    fail(GENIE_ERR_UNSUPPORTED, "rte_extmem_register of the DPDK receive pool failed: ", rte_strerror(rte_errno));
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_, &info) == 0 && info.device != nullptr && r.iova_va)
    r.dma_mapped = rte_dev_dma_map(info.device, r.base, reinterpret_cast<uintptr_t>(r.base), r.length) == 0;
  rte_pktmbuf_extmem ext{};
  ext.buf_ptr = r.base;
  ext.buf_iova = r.iova_va ? reinterpret_cast<uintptr_t>(r.base) : RTE_BAD_IOVA;
  ext.buf_len = r.length;
  ext.elt_size = room;
  rx_pool_ = rte_pktmbuf_pool_create_extbuf("genie_rx", kRxMbufs, kPoolCache, 0, room, socket, &ext, 1);
  if (rx_pool_ == nullptr)
    fail(GENIE_ERR_UNSUPPORTED, "cannot create the DPDK receive pool over registered memory (",
         rte_strerror(rte_errno), ")");
  // The port's ring holds kRingSize of them; the per-lcore caches up to
  // 1.5 kPoolCache each (the flush threshold); the rest may wait in
  // sessions' windows and channels' mailboxes.
  held_limit_ = kRxMbufs - kRingSize - 3 * kPoolCache - 64;
}

void Engine::tx_pools(uint64_t out[4]) const {
  out[0] = pool_->size;
  out[1] = rte_mempool_avail_count(pool_) + hdr_stash_.held();
  out[2] = ext_pool_->size;
  out[3] = rte_mempool_avail_count(ext_pool_) + ext_stash_.held();
}

void Engine::give_back(std::vector<rte_mbuf*>& mbufs) {
  std::lock_guard<std::mutex> lk(back_mu_);
  if (back_.empty()) {
    back_.swap(mbufs);
  } else {
    back_.insert(back_.end(), mbufs.begin(), mbufs.end());
    mbufs.clear();
  }
}

uint64_t Engine::now_ns() const {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void Engine::run(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mu_);
  cmds_.push_back(std::move(fn));
}

uint16_t Engine::bind(uint16_t endpoint, std::shared_ptr<ListenBox> box) {
  std::lock_guard<std::mutex> lk(mu_);
  if (endpoint == 0) {
    for (int i = 0; i < 65535 && (next_endpoint_ == 0 || listeners_.count(next_endpoint_) != 0); ++i)
      ++next_endpoint_;
    if (listeners_.count(next_endpoint_) != 0 || next_endpoint_ == 0)
      fail(GENIE_ERR_IO, "every DPDK endpoint is in use");
    endpoint = next_endpoint_++;
  }
  if (listeners_.count(endpoint) != 0)
    fail(GENIE_ERR_IO, "DPDK endpoint ", endpoint, " on port ", port_name_, " is already in use");
  listeners_[endpoint] = std::move(box);
  return endpoint;
}

void Engine::unbind(uint16_t endpoint) {
  std::lock_guard<std::mutex> lk(mu_);
  listeners_.erase(endpoint);
}

void Engine::adopt(const std::shared_ptr<Session>& s) {
  uint32_t id;
  do {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    id = static_cast<uint32_t>(rng_ ^ (now_ns() >> 3));
  } while (id == 0 || sessions_.count(id) != 0);
  s->id = id;
  sessions_[id] = s;
}

void Engine::forget(uint32_t id) {
  auto it = sessions_.find(id);
  if (it != sessions_.end()) {
    retired_.push_back(std::move(it->second));
    sessions_.erase(it);
  }
  if (last_id_ == id) {
    last_id_ = 0;
    last_ = nullptr;
  }
}

Session* Engine::find(uint32_t id) {
  if (id == last_id_ && last_ != nullptr) return last_;
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  last_id_ = id;
  last_ = it->second.get();
  return last_;
}

rte_mbuf* Engine::attach(const void* data, uint16_t len, rte_mbuf_ext_shared_info* shinfo) {
  rte_mbuf* m = ext_stash_.take();
  if (m == nullptr) return nullptr;
  rte_mbuf_ext_refcnt_update(shinfo, 1);
  // Virtual devices copy from the virtual address; a NIC that DMAs needs
  // the memory registered with rte_extmem_register and its IOVA here.
  rte_pktmbuf_attach_extbuf(m, const_cast<void*>(data), RTE_BAD_IOVA, len, shinfo);
  m->data_len = len;
  m->pkt_len = len;
  return m;
}

void Engine::transmit(const PacketHeader& h, const rte_ether_addr& dst, const uint8_t* inline_bytes,
                      uint16_t inline_len, rte_mbuf* tail) {
  rte_mbuf* m = hdr_stash_.take();
  if (m == nullptr) {
    if (tail != nullptr) rte_pktmbuf_free(tail);
    return;  // as if lost on the wire
  }
  // The header is built and the CRC taken over it and the payload where
  // they are (the stack, the sender's memory) before the mbuf is written:
  // the mbuf's buffer was last read by another thread (the receiving
  // channel's), and reading back bytes just stored there would wait for
  // those cache lines to come back; plain stores do not wait.
  uint8_t hdr[kPacketHeaderSize];
  encode_header(h, hdr);
  uint32_t crc = crc32c(inline_bytes, inline_len, header_crc(hdr));
  if (tail != nullptr) crc = chain_crc(crc, tail, 0, tail->pkt_len);
  store_crc(hdr, crc);
  auto* d =
      reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kEthHeaderSize + kPacketHeaderSize + inline_len));
  auto* eth = reinterpret_cast<rte_ether_hdr*>(d);
  eth->dst_addr = dst;
  eth->src_addr = mac_;
  eth->ether_type = rte_cpu_to_be_16(kEtherType);
  std::memcpy(d + kEthHeaderSize, hdr, kPacketHeaderSize);
  if (inline_len > 0) std::memcpy(d + kEthHeaderSize + kPacketHeaderSize, inline_bytes, inline_len);
  if (tail != nullptr && rte_pktmbuf_chain(m, tail) != 0) {
    rte_pktmbuf_free(m);
    rte_pktmbuf_free(tail);
    return;
  }
  count(stats_.tx_packets);
  const uint64_t nth = stats_.tx_packets.load(std::memory_order_relaxed);
  if (cfg_.drop_after != 0 && nth > cfg_.drop_after) {
    count(stats_.test_dropped);
    rte_pktmbuf_free(m);
    return;
  }
  if (cfg_.drop | cfg_.corrupt | cfg_.dup | cfg_.reorder) {
    auto roll = [this](uint32_t per_mille) {
      rng_ ^= rng_ << 13;
      rng_ ^= rng_ >> 7;
      rng_ ^= rng_ << 17;
      return per_mille > 0 && rng_ % 1000 < per_mille;
    };
    if (roll(cfg_.drop)) {
      count(stats_.test_dropped);
      rte_pktmbuf_free(m);
      return;
    }
    if (roll(cfg_.corrupt)) {
      count(stats_.test_corrupted);
      d[kEthHeaderSize + 40] ^= 0x10;  // tensor_size: only the CRC can tell
    }
    if (roll(cfg_.dup)) {
      // A clone (indirect mbufs over the same bytes), not the same mbuf
      // twice: a receiver trims the mbufs it keeps to their payload.
      if (rte_mbuf* twin = rte_pktmbuf_clone(m, ext_pool_)) txq_.push_back(twin);
    }
    if (roll(cfg_.reorder) && held_ == nullptr) {
      held_ = m;
      return;
    }
  }
  txq_.push_back(m);
  if (held_ != nullptr && held_ != m) txq_.push_back(std::exchange(held_, nullptr));
  if (txq_.size() % kBurst == 0 && !loopback_port_) flush();
}

void Engine::flush() {
  size_t sent = 0;
  while (sent < txq_.size()) {
    const uint16_t n = rte_eth_tx_burst(port_, 0, txq_.data() + sent,
                                        static_cast<uint16_t>(std::min<size_t>(txq_.size() - sent, kBurst)));
    sent += n;
    if (n == 0) break;
  }
  // The port's ring is full (the peer, or on a ring port this thread, has
  // not taken its packets yet): the rest waits for the next turn rather
  // than being lost and sent again, and no new data joins it meanwhile
  // (tx_backlogged). Only past twice that bound, which the windows keep
  // it from reaching, are packets given up (the timers send them again).
  txq_.erase(txq_.begin(), txq_.begin() + static_cast<std::ptrdiff_t>(sent));
  if (txq_.size() > 2 * kTxBacklog) {
    rte_pktmbuf_free_bulk(txq_.data() + 2 * kTxBacklog, static_cast<unsigned>(txq_.size() - 2 * kTxBacklog));
    txq_.resize(2 * kTxBacklog);
  }
}

void Engine::send_rst(uint32_t dst_session, uint32_t src_session, const rte_ether_addr& dst) {
  PacketHeader h;
  h.type = PacketType::Rst;
  h.dst_session = dst_session;
  h.src_session = src_session;
  transmit(h, dst, nullptr, 0, nullptr);
}

bool Engine::handle(rte_mbuf* m) {
  constexpr uint32_t kAt = kEthHeaderSize + kPacketHeaderSize;
  uint8_t copy[kAt];
  count(stats_.rx_packets);
  if (m->pkt_len < kAt) return false;
  const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, kAt, copy));
  const auto* eth = reinterpret_cast<const rte_ether_hdr*>(p);
  if (eth->ether_type != rte_cpu_to_be_16(kEtherType)) return false;
  if (!loopback_port_ && rte_is_same_ether_addr(&eth->src_addr, &mac_)) return false;  // our own, echoed
  uint8_t hdr[kPacketHeaderSize];
  std::memcpy(hdr, p + kEthHeaderSize, kPacketHeaderSize);
  PacketHeader h;
  const char* why = nullptr;
  if (!decode_header(hdr, &h, &why)) return false;
  if (h.payload_len > m->pkt_len - kAt || packet_crc(hdr, m, kAt, h.payload_len) != h.crc) {
    count(stats_.crc_drops);
    return false;
  }
  const rte_ether_addr src = eth->src_addr;
  if (h.type == PacketType::Syn) {
    for (auto& [id, s] : sessions_)
      if (s->accepted_side && s->peer_id == h.src_session && rte_is_same_ether_addr(&s->peer_mac, &src)) {
        s->send_control(PacketType::SynAck, 0);  // our SynAck was lost
        return false;
      }
    std::shared_ptr<ListenBox> box;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = listeners_.find(static_cast<uint16_t>(h.tensor_id));
      if (h.tensor_id <= 0xFFFF && it != listeners_.end()) box = it->second;
    }
    if (!box) {
      send_rst(h.src_session, 0, src);
      return false;
    }
    auto s = std::make_shared<Session>(*this);
    adopt(s);
    s->accept_syn(h, src);
    std::lock_guard<std::mutex> lk(box->mu);
    box->incoming.push_back(s);
    if (box->async != nullptr) uv_async_send(box->async);
    return false;
  }
  Session* s = find(h.dst_session);
  if (s == nullptr || (s->peer_id != h.src_session && !(h.type == PacketType::SynAck && s->peer_id == 0))) {
    if (h.type != PacketType::Rst && h.type != PacketType::Ack) send_rst(h.src_session, h.dst_session, src);
    return false;
  }
  if (h.type == PacketType::Data && rx_mem_.holds(rte_pktmbuf_mtod(m, const uint8_t*)))
    count(stats_.rx_registered);
  // A Fin or Rst may end the session: forget() keeps it alive in retired_
  // until the end of this turn of the loop.
  return s->on_packet(h, src, m, kAt);
}

void Engine::poll() {
  rte_thread_register();  // an lcore id gives the mempools a per-thread cache
  rte_mbuf* pkts[kBurst];
  std::vector<std::function<void()>> cmds;
  std::vector<std::shared_ptr<Session>> live;
  std::vector<rte_mbuf*> back;
  uint64_t last_timer = 0;
  uint32_t idle = 0, full_bursts = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      cmds.swap(cmds_);
    }
    for (auto& fn : cmds) {
      try {
        fn();
      } catch (const std::exception& e) {
        host_->log(LogLevel::Error, cat("dpdk: a command failed: ", e.what()));
      }
    }
    const bool had_cmds = !cmds.empty();
    cmds.clear();
    {
      std::lock_guard<std::mutex> lk(back_mu_);
      back.swap(back_);
    }
    if (!back.empty()) {
      rx_held_.fetch_sub(back.size(), std::memory_order_relaxed);
      rte_pktmbuf_free_bulk(back.data(), static_cast<unsigned>(back.size()));
      back.clear();
    }
    // The clock is read before the receive burst, and the timers below use
    // that reading: whatever had arrived by then (an Ack, say) has been
    // handled when they run, even if this thread was descheduled meanwhile.
    const uint64_t now = now_ = now_ns();
    const uint16_t n = rte_eth_rx_burst(port_, 0, pkts, kBurst);
    unsigned dropped = 0;
    // The next packets are fetched while this one is handled, in two
    // stages: an mbuf four ahead (where its bytes are), then the headers
    // of the packet two ahead, whose mbuf is in the cache by then.
    for (uint16_t i = 0; i < n && i < 4; ++i) rte_prefetch0(pkts[i]);
    for (uint16_t i = 0; i < n && i < 2; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], const void*));
    for (uint16_t i = 0; i < n; ++i) {
      if (i + 4 < n) rte_prefetch0(pkts[i + 4]);
      if (i + 2 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 2], const void*));
      if (!handle(pkts[i])) pkts[dropped++] = pkts[i];
    }
    if (dropped > 0) rte_pktmbuf_free_bulk(pkts, dropped);
    rx_busy_ = n == kBurst;
    // Timers tick once a millisecond, and only once the receive ring is
    // drained: a packet still waiting there may be the Ack that makes a
    // retransmission needless (a thread descheduled for a while finds a
    // full ring). A ring that never drains still gets its tick after 256
    // full bursts in a row (counted in bursts, not time: after a stall the
    // ring's backlog takes a few bursts whatever the stall's length).
    full_bursts = n == kBurst ? full_bursts + 1 : 0;
    const bool timers = now - last_timer >= 1000000 && (n < kBurst || full_bursts >= 256);
    if (timers) last_timer = now;
    live.clear();
    for (auto& [id, s] : sessions_) live.push_back(s);
    for (auto& s : live) s->pump(now, timers);
    retired_.clear();
    if (held_ != nullptr && txq_.empty()) txq_.push_back(std::exchange(held_, nullptr));
    const bool sent = !txq_.empty();
    flush();
    if (n == 0 && !had_cmds && !sent) {
      // Idle: poll less often so that a quiet process leaves its core.
      // Before that, after a few empty turns, the core goes to whatever
      // else is runnable on it (the peer's threads, this process's loops,
      // which copy the payloads) and comes back at once if nothing is.
      if (++idle > 1000)
        ::usleep(idle > 100000 ? 500 : 20);
      else if (idle > 32)
        sched_yield();
    } else {
      idle = 0;
    }
  }
}

}  // namespace genie::dataplane::dpdk
