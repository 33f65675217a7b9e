#include "workloads/gpt.hpp"

// Layer 4, schedule: in which order a pipeline stage runs the forward and backward passes of its
// micro-batches (1F1B, Megatron's interleaved 1F1B) and which consecutive passes are overlapped.
#include <algorithm>

#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads::gpt_detail {

std::vector<GptSlot> pipeline_order(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t st) {
  std::vector<GptSlot> order;
  auto fslot = [&](std::int64_t k) { return GptSlot{true, (k / (p * v)) * p + k % p, (k / p) % v}; };
  auto bslot = [&](std::int64_t k) { return GptSlot{false, (k / (p * v)) * p + k % p, v - 1 - (k / p) % v}; };
  if (v == 1) {
    // 1F1B (Narayanan et al. SC'21 Sec. 2.2.1): p - st - 1 warm-up forwards, then one forward one backward.
    std::int64_t warm = std::min(p - st - 1, m);
    for (std::int64_t k = 0; k < warm; ++k) order.push_back({true, k, 0});
    for (std::int64_t k = 0; k < m - warm; ++k) {
      order.push_back({true, warm + k, 0});
      order.push_back({false, k, 0});
    }
    for (std::int64_t k = m - warm; k < m; ++k) order.push_back({false, k, 0});
  } else {
    // Interleaved 1F1B (SC'21 Sec. 2.2.2; Megatron-LM's warm-up count (p - st - 1) * 2 + (v - 1) * p).
    const std::int64_t total = m * v;
    std::int64_t warm = std::min((p - st - 1) * 2 + (v - 1) * p, total);
    for (std::int64_t k = 0; k < warm; ++k) order.push_back(fslot(k));
    for (std::int64_t k = 0; k < total - warm; ++k) {
      order.push_back(fslot(warm + k));
      order.push_back(bslot(k));
    }
    for (std::int64_t k = total - warm; k < total; ++k) order.push_back(bslot(k));
  }
  return order;
}

GptSchedule gpt_schedule(const GptConfig& c, std::int64_t st, std::int64_t m) {
  const std::int64_t p = c.pipeline_model_parallel_size, v = c.vp();
  const std::vector<GptSlot> order = pipeline_order(p, v, m, st);
  // overlap_moe_expert_parallel_comm (Megatron-Core's combined 1F1B with EP A2A overlap): pairs of
  // consecutive slots of opposite direction and different micro-batches overlap. (forward, backward)
  // pairs anywhere; (backward, forward) only on the first stage, whose forward waits for no pipeline
  // message (elsewhere that forward's input needs this backward's gradient to have gone upstream first:
  // the pair would deadlock).
  const bool a2a_ovl = c.moe.enabled() && c.moe.overlap_moe_expert_parallel_comm;
  GptSchedule s;
  for (std::size_t si = 0; si < order.size(); ++si) {
    const GptSlot& sl = order[si];
    const bool pairable = a2a_ovl && si + 1 < order.size() && order[si + 1].fwd != sl.fwd &&
                          order[si + 1].mb != sl.mb && (sl.fwd || st == 0);
    if (pairable) {
      s.groups.push_back({{sl, order[si + 1]}});
      ++si;
    } else {
      s.groups.push_back({{sl}});
    }
  }
  return s;
}

}  // namespace fabricsim::workloads::gpt_detail
