#include "sched/learned_cost.hpp"

#include <cjson/cJSON.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "sched/graph_view.hpp"
#include "sched/profile_cache.hpp"

namespace genie::sched {

namespace {

// Version of the file's format; a file of another version is ignored (and
// replaced by the next save).
constexpr int kLearnedVersion = 1;
constexpr int kMaxBucket = 80;  // 2^80 FLOPs + bytes: beyond any node

}  // namespace

CostLearner::CostLearner(std::string file) : file_(std::move(file)) { load(); }

std::shared_ptr<CostLearner> CostLearner::shared(const std::string& file) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::weak_ptr<CostLearner>> by_file;
  std::lock_guard<std::mutex> lk(mu);
  std::weak_ptr<CostLearner>& slot = by_file[file];
  std::shared_ptr<CostLearner> l = slot.lock();
  if (!l) {
    l = std::make_shared<CostLearner>(file);
    slot = l;
  }
  return l;
}

std::string CostLearner::file_for_profile(const std::string& profile_file) {
  if (profile_file.empty()) return "";
  std::string base = profile_file;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
  return base + ".learned.json";
}

int CostLearner::bucket(double work) {
  if (!(work >= 2)) return 0;
  return std::min(kMaxBucket, static_cast<int>(std::floor(std::log2(work))));
}

double CostLearner::factor(OpCode c, double work) const {
  const int b = bucket(work);
  std::shared_lock<std::shared_mutex> lk(mu_);
  if (cells_.empty()) return 1;
  // Its own bucket, else the nearest within two (the smaller first).
  for (int d : {0, -1, 1, -2, 2}) {
    const int at = b + d;
    if (at < 0 || at > kMaxBucket) continue;
    if (auto it = cells_.find(key(c, at)); it != cells_.end()) return std::exp(it->second.log_factor);
  }
  return 1;
}

void CostLearner::observe(OpCode c, double work, double model_s, double measured_s) {
  if (!(model_s > 0) || !(measured_s > 0) || !std::isfinite(model_s) || !std::isfinite(measured_s)) return;
  const double limit = std::log(kMaxFactor);
  const double x = std::clamp(std::log(measured_s / model_s), -limit, limit);
  std::unique_lock<std::shared_mutex> lk(mu_);
  Cell& cell = cells_[key(c, bucket(work))];
  ++cell.count;
  if (cell.count == 1) {
    cell.log_factor = x;
  } else {
    // The mean of the first 1/kAlpha observations (no start value to decay
    // from), then the exponentially weighted one.
    const double w = std::max(kAlpha, 1.0 / static_cast<double>(cell.count));
    cell.log_factor += w * std::clamp(x - cell.log_factor, -kMaxStep, kMaxStep);
  }
  ++observations_;
  dirty_ = true;
}

void CostLearner::observe_run(size_t n_nodes, double run_s, double nodes_s) {
  if (n_nodes == 0 || !(run_s > 0) || !(nodes_s >= 0) || !std::isfinite(run_s) || !std::isfinite(nodes_s))
    return;
  const double x = std::max(0.0, run_s - nodes_s) / static_cast<double>(n_nodes);
  std::unique_lock<std::shared_mutex> lk(mu_);
  ++gap_count_;
  // As a cell, in seconds: a step moves it by at most e^kMaxStep times (or
  // a microsecond from nothing).
  const double w = std::max(kAlpha, 1.0 / static_cast<double>(gap_count_));
  const double limit = std::max(gap_s_ * (std::exp(kMaxStep) - 1), 1e-6);
  gap_s_ = gap_count_ == 1 ? x : std::max(0.0, gap_s_ + w * std::clamp(x - gap_s_, -limit, limit));
  dirty_ = true;
}

double CostLearner::gap_s() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return gap_s_;
}

uint64_t CostLearner::observations() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return observations_;
}

size_t CostLearner::cells() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return cells_.size();
}

void CostLearner::load() {
  if (file_.empty()) return;
  std::string text;
  if (!read_text_file(file_, &text)) return;
  cJSON* root = cJSON_ParseWithLength(text.data(), text.size());
  if (!root) return;
  const cJSON* ver = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON* cells = cJSON_GetObjectItemCaseSensitive(root, "cells");
  if (cJSON_IsNumber(ver) && ver->valuedouble == kLearnedVersion && cJSON_IsArray(cells)) {
    const double limit = std::log(kMaxFactor);
    const cJSON* gap = cJSON_GetObjectItemCaseSensitive(root, "gap_s");
    const cJSON* gap_n = cJSON_GetObjectItemCaseSensitive(root, "gap_count");
    if (cJSON_IsNumber(gap) && gap->valuedouble >= 0 && gap->valuedouble < 1 && cJSON_IsNumber(gap_n) &&
        gap_n->valuedouble >= 1) {
      gap_s_ = gap->valuedouble;
      gap_count_ = static_cast<uint64_t>(gap_n->valuedouble);
    }
    const cJSON* c;
    cJSON_ArrayForEach(c, cells) {
      const cJSON* op = cJSON_GetObjectItemCaseSensitive(c, "op");
      const cJSON* b = cJSON_GetObjectItemCaseSensitive(c, "bucket");
      const cJSON* f = cJSON_GetObjectItemCaseSensitive(c, "factor");
      const cJSON* n = cJSON_GetObjectItemCaseSensitive(c, "count");
      OpCode code;
      // A damaged cell is skipped; the others still load.
      if (!cJSON_IsString(op) || !op_class_from_name(op->valuestring, &code) || !cJSON_IsNumber(b) ||
          b->valuedouble < 0 || b->valuedouble > kMaxBucket || !cJSON_IsNumber(f) || !(f->valuedouble > 0) ||
          !std::isfinite(f->valuedouble) || !cJSON_IsNumber(n) || !(n->valuedouble >= 1))
        continue;
      Cell& cell = cells_[key(code, static_cast<int>(b->valuedouble))];
      cell.log_factor = std::clamp(std::log(f->valuedouble), -limit, limit);
      cell.count = static_cast<uint64_t>(n->valuedouble);
    }
  }
  cJSON_Delete(root);
}

bool CostLearner::save() {
  if (file_.empty()) return false;
  cJSON* root = cJSON_CreateObject();
  if (!root) return false;
  {
    std::unique_lock<std::shared_mutex> lk(mu_);
    if (!dirty_) {
      cJSON_Delete(root);
      return true;
    }
    cJSON_AddNumberToObject(root, "version", kLearnedVersion);
    cJSON_AddNumberToObject(root, "gap_s", gap_s_);
    cJSON_AddNumberToObject(root, "gap_count", static_cast<double>(gap_count_));
    cJSON* cells = cJSON_AddArrayToObject(root, "cells");
    for (const auto& [k, cell] : cells_) {
      cJSON* c = cJSON_CreateObject();
      cJSON_AddStringToObject(c, "op", op_class_name(static_cast<OpCode>(k >> 8)));
      cJSON_AddNumberToObject(c, "bucket", static_cast<double>(k & 0xff));
      cJSON_AddNumberToObject(c, "factor", std::exp(cell.log_factor));
      cJSON_AddNumberToObject(c, "count", static_cast<double>(cell.count));
      cJSON_AddItemToArray(cells, c);
    }
    dirty_ = false;
  }
  char* text = cJSON_Print(root);
  cJSON_Delete(root);
  const bool ok = text && write_text_file(file_, std::string(text) + "\n");
  cJSON_free(text);
  if (!ok) {
    std::unique_lock<std::shared_mutex> lk(mu_);
    dirty_ = true;  // tried again at the next save
  }
  return ok;
}

}  // namespace genie::sched
