#include "sim/base/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "sim/base/error.hpp"

namespace fabricsim {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "12.5GB/s" into number 12.5 and suffix "GB/s".
bool split_number(std::string_view s, double& value, std::string& suffix) {
  s = trim(s);
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' ||
                          s[i] == 'E' || s[i] == '+' || s[i] == '-')) {
    // Stop at an 'e' that begins a unit rather than an exponent (none of our units start with e).
    ++i;
  }
  if (i == 0) return false;
  std::string num(s.substr(0, i));
  char* end = nullptr;
  value = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(value)) return false;
  suffix = std::string(trim(s.substr(i)));
  return true;
}

[[noreturn]] void fail(std::string_view what, std::string_view text, std::string_view expected) {
  // Quote at most 60 characters of the input: a message is one line whatever the user passed.
  std::string shown(text.substr(0, 60));
  if (text.size() > 60) shown += "...";
  throw InputError(std::string(what), "cannot parse '" + shown + "': expected " + std::string(expected));
}

}  // namespace

double parse_double(std::string_view text, std::string_view what) {
  double v = 0;
  std::string suffix;
  if (!split_number(text, v, suffix) || !suffix.empty()) fail(what, text, "a number");
  return v;
}

long long parse_int(std::string_view text, std::string_view what) {
  auto t = trim(text);
  long long v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || t.empty()) fail(what, text, "an integer");
  return v;
}

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  double v = 0;
  std::string suffix;
  constexpr const char* expected = "a size such as 8, 1K, 64M, 8G, 2GiB or 4MB";
  if (!split_number(text, v, suffix) || v < 0) fail(what, text, expected);
  std::string s = lower(suffix);
  if (!s.empty() && s.back() == 'b' && s != "b") {
    // "KB"/"MB"/"GB" are decimal, "KiB" etc. binary; bare "K"/"M"/"G" binary (nccl-tests convention).
    if (s.size() >= 3 && s[s.size() - 2] == 'i') {
      s = s.substr(0, s.size() - 2);
    } else {
      s.pop_back();
      double mul = 1;
      if (s == "k") mul = 1e3;
      else if (s == "m") mul = 1e6;
      else if (s == "g") mul = 1e9;
      else if (s == "t") mul = 1e12;
      else fail(what, text, expected);
      const double bytes = std::round(v * mul);
      if (!(bytes < 18446744073709551616.0)) fail(what, text, "a size below 2^64 bytes");  // before the cast
      return static_cast<std::uint64_t>(bytes);
    }
  }
  double mul = 1;
  if (s.empty() || s == "b") mul = 1;
  else if (s == "k") mul = 1024.0;
  else if (s == "m") mul = 1024.0 * 1024;
  else if (s == "g") mul = 1024.0 * 1024 * 1024;
  else if (s == "t") mul = 1024.0 * 1024 * 1024 * 1024;
  else fail(what, text, expected);
  double bytes = v * mul;
  if (bytes != std::floor(bytes)) fail(what, text, "a whole number of bytes");
  if (!(bytes < 18446744073709551616.0)) fail(what, text, "a size below 2^64 bytes");  // before the cast
  return static_cast<std::uint64_t>(bytes);
}

double parse_bandwidth(std::string_view text, std::string_view what) {
  double v = 0;
  std::string suffix;
  constexpr const char* expected = "a positive bandwidth with its unit, such as 400Gbps, 25GB/s or 25GiB/s";
  if (!split_number(text, v, suffix)) fail(what, text, expected);
  std::string s = lower(suffix);
  // Normalise "/s" and "ps" endings.
  bool bits = false;
  double mul = 1;
  if (!s.empty()) {
    std::string unit = s;
    if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "/s") unit = unit.substr(0, unit.size() - 2);
    else if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "ps") unit = unit.substr(0, unit.size() - 2);
    else fail(what, text, expected);
    // Case matters for b (bit) vs B (byte): look at the original suffix.
    std::string orig = suffix.substr(0, unit.size());
    if (orig.empty()) fail(what, text, expected);
    char last = orig.back();
    if (last == 'b') bits = true;
    else if (last == 'B') bits = false;
    else fail(what, text, expected);
    std::string prefix = unit.substr(0, unit.size() - 1);
    if (prefix.empty()) mul = 1;
    else if (prefix == "k") mul = 1e3;
    else if (prefix == "m") mul = 1e6;
    else if (prefix == "g") mul = 1e9;
    else if (prefix == "t") mul = 1e12;
    else if (prefix == "ki") mul = 1024.0;
    else if (prefix == "mi") mul = 1024.0 * 1024;
    else if (prefix == "gi") mul = 1024.0 * 1024 * 1024;
    else fail(what, text, expected);
  }
  double bps = v * mul / (bits ? 8.0 : 1.0);
  if (!(bps > 0) || !std::isfinite(bps)) fail(what, text, expected);
  return bps;
}

double parse_time(std::string_view text, std::string_view what) {
  double v = 0;
  std::string suffix;
  constexpr const char* expected = "a non-negative time such as 1.5us, 700ns, 2ms or seconds as a number";
  if (!split_number(text, v, suffix) || v < 0) fail(what, text, expected);
  std::string s = lower(suffix);
  double mul = 1;
  if (s.empty() || s == "s") mul = 1;
  else if (s == "ms") mul = 1e-3;
  else if (s == "us") mul = 1e-6;
  else if (s == "ns") mul = 1e-9;
  else fail(what, text, expected);
  return v * mul;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 5) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

std::string format_bandwidth(double bps) {
  char buf[64];
  if (bps >= 1e12) std::snprintf(buf, sizeof buf, "%.2f TB/s", bps / 1e12);
  else if (bps >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB/s", bps / 1e9);
  else if (bps >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MB/s", bps / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f B/s", bps);
  return buf;
}

std::string format_time(double s) {
  char buf[64];
  double a = std::fabs(s);
  if (a >= 1.0 || a == 0) std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else if (a >= 1e-6) std::snprintf(buf, sizeof buf, "%.3f us", s * 1e6);
  else std::snprintf(buf, sizeof buf, "%.1f ns", s * 1e9);
  return buf;
}

}  // namespace fabricsim
