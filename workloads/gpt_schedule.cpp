#include "workloads/gpt.hpp"

// Layer 4, schedule: in which order a pipeline stage runs the forward and backward passes of its
// micro-batches (1F1B, Megatron's interleaved 1F1B) and which consecutive passes are overlapped.
#include <algorithm>
#include <deque>
#include <utility>

#include "workloads/gpt_detail.hpp"

namespace fabricsim::workloads::gpt_detail {

std::int64_t pipeline_warmup(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t st, std::int64_t n,
                             std::int64_t extra_warm) {
  // Megatron-Core get_pp_rank_microbatches (megatron/core/pipeline_parallel/schedules.py at
  // NVIDIA/Megatron-LM@d98e8a64dd, lines 929-987): 1F1B (v = 1) p - st - 1; interleaved
  // (p - st - 1) * 2 + (v - 1) * N (+ 1 with overlap_moe_expert_parallel_comm); at most every chunk pass.
  const std::int64_t warm = v == 1 ? p - st - 1 : (p - st - 1) * 2 + (v - 1) * n + extra_warm;
  return std::min(warm, m * v);
}

std::vector<std::pair<std::int64_t, std::int64_t>> interleaved_table(std::int64_t m, std::int64_t v, std::int64_t n) {
  // Megatron-Core get_schedule_table (schedules.py @d98e8a64dd, lines 989-1017): groups of N consecutive
  // micro-batches, each group run through chunk 0, then chunk 1, ...; the last group takes every micro-batch
  // left (min + N >= m), so with m not a multiple of N it holds m mod N (or N + m mod N) of them.
  std::vector<std::pair<std::int64_t, std::int64_t>> table;
  for (std::int64_t lo = 0; lo < m; lo += n) {
    const std::int64_t hi = lo + n >= m ? m : lo + n;
    for (std::int64_t ch = 0; ch < v; ++ch)
      for (std::int64_t mb = lo; mb < hi; ++mb) table.emplace_back(mb, ch);
    if (hi == m) break;
  }
  return table;
}

std::vector<GptSlot> pipeline_order(std::int64_t p, std::int64_t v, std::int64_t m, std::int64_t st, std::int64_t n,
                                    std::int64_t extra_warm) {
  std::vector<GptSlot> order;
  const std::int64_t warm = pipeline_warmup(p, v, m, st, n, extra_warm);
  if (v == 1) {
    // 1F1B (Narayanan et al. SC'21 Sec. 2.2.1): p - st - 1 warm-up forwards, then one forward one backward.
    for (std::int64_t k = 0; k < warm; ++k) order.push_back({true, k, 0});
    for (std::int64_t k = 0; k < m - warm; ++k) {
      order.push_back({true, warm + k, 0});
      order.push_back({false, k, 0});
    }
    for (std::int64_t k = m - warm; k < m; ++k) order.push_back({false, k, 0});
  } else {
    // Interleaved 1F1B (SC'21 Sec. 2.2.2; Megatron-Core forward_backward_pipelining_with_interleaving): the
    // k-th forward runs table[k]; the k-th backward runs table[k]'s micro-batch through chunk v - 1 - chunk
    // (get_model_chunk_id with forward=False; each chunk's backwards pop its forwards' inputs in order).
    const auto table = interleaved_table(m, v, n);
    auto fslot = [&](std::int64_t k) {
      const auto& e = table[static_cast<std::size_t>(k)];
      return GptSlot{true, e.first, e.second};
    };
    auto bslot = [&](std::int64_t k) {
      const auto& e = table[static_cast<std::size_t>(k)];
      return GptSlot{false, e.first, v - 1 - e.second};
    };
    const std::int64_t total = m * v;
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
// the other run as an overlapped pair (forward_backward_chunk). Zero bubble (`zb`, dualpipe.py enable_zb):
// the backwards of step 3 (nB1W1F1), of the second half of step 6 and of step 7 (nWB0) compute only the
// input gradient and queue their weight gradients (WeightGradStore.flush); each W step runs the oldest
// queued one (WeightGradStore.pop, FIFO) -- one in each step-3 and step-7 iteration, the rest (step 8)
// at the end. Overlapped pairs and the other backwards run whole, as in dualpipe.py.
GptSchedule dualpipe_schedule(std::int64_t p, std::int64_t m, std::int64_t st, bool zb) {
  const std::int64_t H = p / 2, hr = std::min(st, p - 1 - st), half = m / 2;
  const std::int64_t second = st >= H ? 1 : 0;
  const bool middle = st == H - 1 || st == H;
  std::int64_t fnext[2] = {0, 0}, bnext[2] = {0, 0};
  auto F = [&](std::int64_t phase) {
    const std::int64_t d = phase ^ second;
    return GptSlot{true, d * half + fnext[d]++, d};
  };
  std::deque<GptSlot> wq;  // WeightGradStore.funcs_queue
  auto B = [&](std::int64_t phase, bool split = false) {
    const std::int64_t d = phase ^ second;
    GptSlot b{false, d * half + bnext[d]++, d};
    if (split && zb) {
      b.input_only = true;
      GptSlot w = b;
      w.input_only = false, w.weight = true;
      wq.push_back(w);
    }
    return b;
  };
  GptSchedule s;
  auto one = [&](GptSlot a) { s.groups.push_back({{a}}); };
  auto W = [&]() {
    if (wq.empty()) return;  // zb off: nothing was queued
    one(wq.front());
    wq.pop_front();
  };
  auto pair = [&](GptSlot f, GptSlot b) { s.groups.push_back({{f, b}}); };
  for (std::int64_t i = 0; i < (H - hr - 1) * 2; ++i) one(F(0));           // 1: nF0
  for (std::int64_t i = 0; i < hr + 1; ++i) one(F(0)), one(F(1));          // 2: nF0F1
  for (std::int64_t i = 0; i < H - hr - 1; ++i) one(B(1, true)), W(), one(F(1));  // 3: nB1W1F1
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
  bool split = false;                                                      // 6: nB1B0
  for (std::int64_t i = 0; i < hr + 1; ++i) {  // the second half of its backwards split
    if (i == (hr + 1) / 2 && hr % 2 == 1) split = true;
    one(B(1, split));
    if (i == (hr + 1) / 2 && hr % 2 == 0) split = true;
    one(B(0, split));
  }
  for (std::int64_t i = 0; i < H - hr - 1; ++i) W(), one(B(0, true));      // 7: nWB0
  while (!wq.empty()) W();                                                 // 8: nW (hr + 1 of them)
  return s;
}

}  // namespace

GptSchedule gpt_schedule(const GptConfig& c, std::int64_t st, std::int64_t m) {
  const std::int64_t p = c.pipeline_model_parallel_size, v = c.vp();
  if (c.dualpipe()) return dualpipe_schedule(p, m, st, c.dualpipe_zero_bubble);
  const bool a2a_ovl = c.moe.enabled() && c.moe.overlap_moe_expert_parallel_comm;
  // With A2A overlap the interleaved schedule runs one more warm-up forward, so that the forward and the
  // backward of every steady-state pair are independent (Megatron-Core pipeline_parallel/schedules.py,
  // get_pp_rank_microbatches: "we schedule one extra micro-batch forward step before the 1f1b stages").
  const std::int64_t extra = a2a_ovl && v > 1 ? 1 : 0;
  const std::vector<GptSlot> order = pipeline_order(p, v, m, st, c.microbatch_group(), extra);
  GptSchedule s;
  if (a2a_ovl && v > 1) {
    // Megatron-Core's combined 1F1B (schedules.py forward_backward_pipelining_with_interleaving, steady
    // loop: forward k + warm-up count with backward k) pairs exactly the steady-state (forward, backward)
    // slots; warm-up forwards and cool-down backwards run alone. A stage whose warm-up already covers every
    // micro-batch (get_pp_rank_microbatches' are_all_microbatches_in_warmup: stage 0 with micro-batches =
    // PP) has no steady state and no pair.
    const std::int64_t total = m * v;
    const std::int64_t warm = pipeline_warmup(p, v, m, st, c.microbatch_group(), extra);
    for (std::int64_t k = 0; k < warm; ++k) s.groups.push_back({{order[static_cast<std::size_t>(k)]}});
    for (std::int64_t k = 0; k < total - warm; ++k) {
      const std::size_t at = static_cast<std::size_t>(warm + 2 * k);
      s.groups.push_back({{order[at], order[at + 1]}});
    }
    for (std::size_t k = static_cast<std::size_t>(warm + 2 * (total - warm)); k < order.size(); ++k)
      s.groups.push_back({{order[k]}});
    return s;
  }
  // Without virtual stages (a fabricsim extension; Megatron requires them with PP > 1 for the overlap):
  // pairs of consecutive slots of opposite direction and different micro-batches overlap. (forward,
  // backward) pairs anywhere; (backward, forward) only on the first stage, whose forward waits for no
  // pipeline message (elsewhere that forward's input needs this backward's gradient to have gone upstream
  // first: the pair would deadlock).
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
