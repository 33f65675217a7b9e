#include "workloads/gpt.hpp"

// Layer 4, schedule: in which order a pipeline stage runs the forward and backward passes of its
// micro-batches (1F1B, Megatron's interleaved 1F1B) and which consecutive passes are overlapped.
#include <algorithm>

#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads::gpt_detail {

std::vector<GptSlot> pipeline_order(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t st, std::int64_t extra_warm) {
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
    std::int64_t warm = std::min((p - st - 1) * 2 + (v - 1) * p + extra_warm, total);
    for (std::int64_t k = 0; k < warm; ++k) order.push_back(fslot(k));
    for (std::int64_t k = 0; k < total - warm; ++k) {
      order.push_back(fslot(warm + k));
      order.push_back(bslot(k));
    }
    for (std::int64_t k = total - warm; k < total; ++k) order.push_back(bslot(k));
  }
  return order;
}

namespace {

// DualPipe (DeepSeek-V3 arXiv:2412.19437 Sec. 3.2.1), the step order of github:deepseek-ai/DualPipe
// dualpipe/dualpipe.py DualPipe.step, steps 1-8. Rank st holds chunk 0 (stage st of the pipeline fed at
// rank 0) and chunk 1 (stage p - 1 - st of the pipeline fed at rank p - 1); each direction carries half
// of the m micro-batches (direction d's k-th micro-batch is number d m/2 + k). "Phase" 0 / 1 is chunk 0 / 1
// on the first half of the ranks and swapped on the second half. A forward of one phase and a backward of
// the other run as an overlapped pair (forward_backward_chunk). Not modelled: the zero-bubble split of
// backward into input- and weight-gradient chunks (steps 3, 6, 7, 8): each backward runs whole, so the
// weight gradients do not fill the bubbles as in the real schedule.
GptSchedule dualpipe_schedule(std::int64_t p, std::int64_t m, std::int64_t st) {
  const std::int64_t H = p / 2, hr = std::min(st, p - 1 - st), half = m / 2;
  const std::int64_t second = st >= H ? 1 : 0;
  const bool middle = st == H - 1 || st == H;
  std::int64_t fnext[2] = {0, 0}, bnext[2] = {0, 0};
  auto F = [&](std::int64_t phase) {
    const std::int64_t d = phase ^ second;
    return GptSlot{true, d * half + fnext[d]++, d};
  };
  auto B = [&](std::int64_t phase) {
    const std::int64_t d = phase ^ second;
    return GptSlot{false, d * half + bnext[d]++, d};
  };
  GptSchedule s;
  auto one = [&](GptSlot a) { s.groups.push_back({{a}}); };
  auto pair = [&](GptSlot f, GptSlot b) { s.groups.push_back({{f, b}}); };
  for (std::int64_t i = 0; i < (H - hr - 1) * 2; ++i) one(F(0));           // 1: nF0
  for (std::int64_t i = 0; i < hr + 1; ++i) one(F(0)), one(F(1));          // 2: nF0F1
  for (std::int64_t i = 0; i < H - hr - 1; ++i) one(B(1)), one(F(1));      // 3: nB1W1F1
  for (std::int64_t i = 0; i < half - p + hr + 1; ++i) {                   // 4: nF0B1F1B0
    if (i == 0 && middle) {
      one(F(0)), one(B(1));  // dualpipe.py: not overlapped on the middle ranks, to shorten the bubble
    } else {
      const GptSlot f = F(0);
      pair(f, B(1));
    }
    const GptSlot f = F(1);
    pair(f, B(0));
  }
  for (std::int64_t i = 0; i < H - hr - 1; ++i) {                          // 5: nB1F1B0
    one(B(1));
    const GptSlot f = F(1);
    pair(f, B(0));
  }
  for (std::int64_t i = 0; i < hr + 1; ++i) one(B(1)), one(B(0));          // 6: nB1B0
  for (std::int64_t i = 0; i < H - hr - 1; ++i) one(B(0));                 // 7: nWB0
  return s;
}

}  // namespace

GptSchedule gpt_schedule(const GptConfig& c, std::int64_t st, std::int64_t m) {
  const std::int64_t p = c.pipeline_model_parallel_size, v = c.vp();
  if (c.dualpipe()) return dualpipe_schedule(p, m, st);
  const bool a2a_ovl = c.moe.enabled() && c.moe.overlap_moe_expert_parallel_comm;
  // With A2A overlap the interleaved schedule runs one more warm-up forward, so that the forward and the
  // backward of every steady-state pair are independent (Megatron-Core pipeline_parallel/schedules.py,
  // get_pp_rank_microbatches: "we schedule one extra micro-batch forward step before the 1f1b stages").
  const std::vector<GptSlot> order = pipeline_order(p, v, m, st, a2a_ovl && v > 1 ? 1 : 0);
  // overlap_moe_expert_parallel_comm (Megatron-Core's combined 1F1B with EP A2A overlap): pairs of
  // consecutive slots of opposite direction and different micro-batches overlap. (forward, backward)
  // pairs anywhere; (backward, forward) only on the first stage, whose forward waits for no pipeline
  // message (elsewhere that forward's input needs this backward's gradient to have gone upstream first:
  // the pair would deadlock).
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
