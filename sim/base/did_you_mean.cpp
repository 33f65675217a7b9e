#include "sim/base/did_you_mean.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

namespace fabricsim {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  // Rows i-2, i-1 and i of the dynamic programme over prefixes of a (rows) and b (columns).
  std::vector<std::size_t> two(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = lower(a[i - 1]) == lower(b[j - 1]);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        cur[j] = std::min(cur[j], two[j - 2] + 1);
    }
    std::swap(two, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '_' || c == '-') {
      if (!out.back().empty()) out.emplace_back();
    } else {
      out.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// Every word of `name` in `known`, in order (tensor_parallel_size in tensor_model_parallel_size), or `name` a
// start of it (--target-tokens of --target-tokens-per-day).
bool contained(std::string_view name, const std::string& known) {
  if (name.size() >= 3 && known.size() > name.size() && edit_distance(name, known.substr(0, name.size())) == 0) return true;
  const auto a = words(name), b = words(known);
  if (a.size() < 2) return false;
  std::size_t j = 0;
  for (const auto& w : b)
    if (j < a.size() && w == a[j]) ++j;
  return j == a.size();
}

// The nearest of `pool` by edit distance, ties going to the name of `name`'s length; "" when still tied.
std::string nearest(std::string_view name, const std::vector<const std::string*>& pool, std::size_t& dist) {
  const std::string* pick = nullptr;
  bool tie = false;
  auto len_gap = [&](const std::string& k) { return k.size() > name.size() ? k.size() - name.size() : name.size() - k.size(); };
  dist = std::numeric_limits<std::size_t>::max();
  for (const std::string* k : pool) {
    const std::size_t d = edit_distance(name, *k);
    if (d < dist || (d == dist && pick && len_gap(*k) < len_gap(*pick))) dist = d, pick = k, tie = false;
    else if (d == dist && pick && *pick != *k && len_gap(*k) == len_gap(*pick)) tie = true;
  }
  return pick && !tie ? *pick : "";
}

}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& known) {
  std::vector<const std::string*> all, containing;
  for (const auto& k : known) {
    if (k == name) return "";
    all.push_back(&k);
    if (contained(name, k)) containing.push_back(&k);
  }
  std::size_t d = 0;
  if (!containing.empty()) return nearest(name, containing, d);
  const std::string pick = nearest(name, all, d);
  if (pick.empty()) return "";
  const std::size_t shorter = std::min(name.size(), pick.size());
  const std::size_t limit = shorter <= 2 ? 0 : std::max<std::size_t>(1, shorter / 3);
  return d <= limit ? pick : "";
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  const std::string c = closest_name(name, known);
  return c.empty() ? "" : " (did you mean '" + c + "'?)";
}

}  // namespace fabricsim
