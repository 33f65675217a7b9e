#include "replay/a2a_imbalance.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace fabricsim::sim {

using workloads::CollOp;
using workloads::OpKind;

std::vector<std::vector<double>> balanced_a2a_matrix(const std::vector<std::vector<double>>& m) {
  const std::size_t n = m.size();
  double total = 0, diag = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) total += m[i][j], diag += i == j ? m[i][j] : 0.0;
  std::vector<std::vector<double>> b = m;
  if (n == 0 || !(total > 0)) return b;
  const double target = total / double(n);
  const double tol = 1e-12 * target;
  // Line k of b: row k (rows) or column k; its sum; one scaling pass over all rows or all columns (false, and the
  // pass stopped there, at the first line that sums to 0).
  auto at = [&b](std::size_t k, std::size_t x, bool rows) -> double& { return rows ? b[k][x] : b[x][k]; };
  auto line_sum = [&](std::size_t k, bool rows) {
    double s = 0;
    for (std::size_t x = 0; x < n; ++x) s += at(k, x, rows);
    return s;
  };
  auto scale = [&](bool rows) {
    for (std::size_t k = 0; k < n; ++k) {
      const double s = line_sum(k, rows);
      if (!(s > 0)) return false;
      for (std::size_t x = 0; x < n; ++x) at(k, x, rows) *= target / s;
    }
    return true;
  };
  bool ok = false;
  for (int it = 0; it < 1000 && !ok; ++it) {
    if (!(scale(true) && scale(false))) break;  // rows, then columns
    ok = true;
    for (std::size_t i = 0; i < n && ok; ++i) ok = std::abs(line_sum(i, true) - target) <= tol;  // rows still balanced?
  }
  if (!ok) {
    // No row/column scaling balances it: even spread of the off-diagonal and of the diagonal totals.
    const double off = n > 1 ? (total - diag) / double(n * (n - 1)) : 0.0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) b[i][j] = i == j ? diag / double(n) : off;
    return b;
  }
  // Snap entries equal to total / n^2 up to rounding (a uniform router's matrix) to exactly that value, so
  // the balanced counterparts of the layers of one group compare (and cache) equal.
  const double u = target / double(n);
  for (auto& row : b)
    for (double& x : row)
      if (std::abs(x - u) <= 1e-9 * u) x = u;
  return b;
}

namespace {
bool same(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  double mx = 0, d = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < a.size(); ++j) mx = std::max(mx, std::abs(a[i][j])), d = std::max(d, std::abs(a[i][j] - b[i][j]));
  return d <= 1e-12 * mx;
}
}  // namespace

A2aImbalance all_to_all_imbalance(const workloads::Trace& trace, CommModel& comm) {
  A2aImbalance out;
  // Per communicator index: whether its matrix is balanced already (costs nothing).
  std::map<std::int32_t, bool> balanced;
  // Per distinct call (communicator, bytes, algorithm): skewed - balanced.
  std::map<std::tuple<std::int32_t, double, std::string>, double> delta;
  // The replay priced each (communicator, bytes) once with the first call's algorithm (CommModel caches by
  // communicator and bytes): its price is this call's only where every call there names the same algorithm.
  std::map<std::pair<std::int32_t, double>, std::set<std::string>> algorithms;
  for (const auto& rt : trace.ranks)
    for (const auto& op : rt.ops)
      if (op.kind == OpKind::Collective && op.coll == CollOp::AllToAllv && op.comm >= 0)
        algorithms[{op.comm, op.bytes}].insert(op.algorithm);
  bool any = false;
  for (const auto& rt : trace.ranks) {
    double sum = 0;
    bool has = false;
    for (const auto& op : rt.ops) {
      if (op.kind != OpKind::Collective || op.coll != CollOp::AllToAllv || op.comm < 0) continue;
      const workloads::Communicator& c = trace.comms[static_cast<std::size_t>(op.comm)];
      if (c.a2a_matrix.empty()) continue;
      ++out.calls, has = true;
      auto bit = balanced.find(op.comm);
      if (bit != balanced.end() && bit->second) continue;
      auto key = std::make_tuple(op.comm, op.bytes, op.algorithm);
      auto dit = delta.find(key);
      if (dit == delta.end()) {
        // The balanced matrix is fitted again for each distinct call of the communicator (a few per layer, and
        // cheaper than the call) rather than kept for every communicator.
        workloads::Communicator u = c;
        u.a2a_matrix = c.a2a_uniform.empty() ? balanced_a2a_matrix(c.a2a_matrix) : c.a2a_uniform;
        if (bit == balanced.end()) bit = balanced.emplace(op.comm, same(u.a2a_matrix, c.a2a_matrix)).first;
        if (bit->second) continue;
        // The skewed call as the replay priced it when it did so on an idle fabric (the engine model always,
        // the shared one for calls whose links nothing else used), else priced here.
        std::optional<CommTiming> replayed;
        if (algorithms[{op.comm, op.bytes}].size() == 1)
          replayed = comm.replayed_idle_price(c, op.coll, op.bytes, op.algorithm);
        const double skewed = (replayed ? *replayed : comm.idle_collective(c, op.coll, op.bytes, op.algorithm)).duration_s;
        // The balanced calls of the layers of one group are alike: the engine models' idle_collective prices
        // calls with the same schedule inputs once.
        const double balanced_s = comm.idle_collective(u, op.coll, op.bytes, op.algorithm).duration_s;
        ++out.priced;
        dit = delta.emplace(key, skewed - balanced_s).first;
      }
      sum += dit->second;
    }
    if (has) out.seconds = any ? std::max(out.seconds, sum) : sum, any = true;
  }
  return out;
}

}  // namespace fabricsim::sim
