#include "sim/base/did_you_mean.hpp"
#include "sim/base/json_reader.hpp"
#include "sim/base/input_file.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/base/units.hpp"

namespace fabricsim {

namespace {

// Escapes one JSON pointer token (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string pointer_token(const std::string& key) {
  std::string o;
  for (char c : key) {
    if (c == '~') o += "~0";
    else if (c == '/') o += "~1";
    else o += c;
  }
  return o;
}

// Builds the DOM through nlohmann's own SAX DOM builder while checking what the DOM parser does not: nesting
// depth (every later walk over the document -- copies, dumps, destruction -- recurses once per level),
// duplicate keys (the DOM keeps the last one silently) and, in parse_error, numbers out of double range.
class CheckedSax {
 public:
  using dom_t = nlohmann::detail::json_sax_dom_parser<Json>;
  CheckedSax(Json& out, const std::string& source) : dom_(out, false), source_(source) {}

  bool null() { return value(dom_.null()); }
  bool boolean(bool b) { return value(dom_.boolean(b)); }
  bool number_integer(Json::number_integer_t v) { return value(dom_.number_integer(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return value(dom_.number_unsigned(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& s) { return value(dom_.number_float(v, s)); }
  bool string(Json::string_t& v) { return value(dom_.string(v)); }
  bool binary(Json::binary_t& v) { return value(dom_.binary(v)); }
  bool start_object(std::size_t n) {
    open(false);
    return dom_.start_object(n);
  }
  bool key(Json::string_t& k) {
    Frame& f = frames_.back();
    if (!f.keys.insert(k).second)
      throw InputError(where(k), "duplicate key '" + text_excerpt(k, 40) +
                                     "' (a JSON object may name each key once)");
    f.key = k;
    return dom_.key(k);
  }
  bool end_object() {
    frames_.pop_back();
    return value(dom_.end_object());
  }
  bool start_array(std::size_t n) {
    open(true);
    return dom_.start_array(n);
  }
  bool end_array() {
    frames_.pop_back();
    return value(dom_.end_array());
  }
  bool parse_error(std::size_t byte, const std::string& token, const nlohmann::detail::exception& e) {
    error_byte_ = byte;
    error_ = e.what();
    error_id_ = e.id;
    token_ = token;
    return false;
  }

  std::string error_, token_;
  int error_id_ = 0;
  std::size_t error_byte_ = 0;

 private:
  struct Frame {
    bool array = false;
    std::size_t index = 0;
    std::string key;
    std::set<std::string> keys;
  };
  void open(bool array) {
    if (frames_.size() >= kMaxJsonDepth)
      throw InputError(where(""), "nesting deeper than " + std::to_string(kMaxJsonDepth) +
                                      " levels of arrays/objects (no fabricsim input needs that many)");
    frames_.push_back(Frame{array, 0, {}, {}});
  }
  bool value(bool ok) {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return ok;
  }
  // JSON pointer of the value being read (abbreviated past 160 characters), optionally plus `last` key.
  std::string where(const std::string& last) const {
    std::string p;
    for (const auto& f : frames_) {
      if (&f == &frames_.back() && !last.empty()) break;
      p += "/" + (f.array ? std::to_string(f.index) : pointer_token(text_excerpt(f.key, 40)));
      if (p.size() > 160) {
        p += "/...";
        break;
      }
    }
    if (!last.empty() && p.size() <= 160) p += "/" + pointer_token(last.substr(0, 40));
    return source_ + ": " + (p.empty() ? "/" : p);
  }

  dom_t dom_;
  std::string source_;
  std::vector<Frame> frames_;
};

}  // namespace

std::string text_excerpt(const std::string& s, std::size_t max_chars) {
  return s.size() <= max_chars ? s : s.substr(0, max_chars) + "...";
}

std::string json_excerpt(const Json& v, std::size_t max_chars) {
  std::string s;
  if (v.is_array()) {
    if (v.empty()) return "[]";
    s = "an array of " + std::to_string(v.size()) + " element" + (v.size() == 1 ? "" : "s");
  } else if (v.is_object()) {
    if (v.empty()) return "{}";
    s = "an object with " + std::to_string(v.size()) + " key" + (v.size() == 1 ? "" : "s");
  } else if (v.is_string()) {
    const auto& str = v.get_ref<const std::string&>();
    // Dump only a prefix so a multi-megabyte string is never copied whole into a message.
    Json head = str.substr(0, max_chars);
    s = head.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (str.size() > max_chars) s.insert(s.size() - 1, "...");
    return s;
  } else {
    s = v.dump();  // a number, boolean or null: short
  }
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

Json parse_json_text(const std::string& text, const std::string& source_name) {
  if (text.size() > kMaxJsonBytes)
    throw InputError(source_name, "file is " + std::to_string(text.size()) + " bytes; JSON inputs are limited to " +
                                      std::to_string(kMaxJsonBytes) + " bytes");
  Json out;
  CheckedSax sax(out, source_name);
  if (Json::sax_parse(text, &sax)) return out;
  // file:line:column of the error (the byte count nlohmann passes to parse_error).
  // For an out-of-range number, the position of its first character.
  std::size_t at = sax.error_byte_;
  if (sax.error_id_ == 406 && at >= sax.token_.size()) at -= sax.token_.size() - 1;
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < text.size() && i + 1 < at; ++i) {
    if (text[i] == '\n') {
      line = line + 1;
      col = 1;
    } else {
      ++col;
    }
  }
  const std::string loc = source_name + ":" + std::to_string(line) + ":" + std::to_string(col);
  if (sax.error_id_ == 406)  // out_of_range.406: number overflow parsing '1e400'
    throw InputError(loc, "number " + json_excerpt(Json(sax.token_), 40) +
                              " is out of range (expected a finite number, |x| < 1.8e308)");
  std::string msg = sax.error_;
  auto pos = msg.find("syntax error");
  if (pos != std::string::npos) msg = msg.substr(pos);
  if (msg.size() > 200) msg = msg.substr(0, 200) + "...";
  throw InputError(loc, "invalid JSON (" + msg + ")");
}

std::string read_input_file(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  // A directory opens as an empty stream on Linux: said as what it is, not as an empty (invalid) input.
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "expected a file, found a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open file for reading");
  auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw InputError(path, "file is " + std::to_string(size) + " bytes; inputs are limited to " +
                               std::to_string(max_bytes) + " bytes");
  // Read in chunks and stop at the limit: a device or pipe (/dev/zero, a FIFO) has no file size to check
  // above, and reading it whole would never end or exhaust memory.
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw InputError(path, "more than " + std::to_string(max_bytes) +
                                 " bytes read; inputs are limited to that size");
  }
  return text;
}

Json load_json_file(const std::string& path) { return parse_json_text(read_input_file(path, kMaxJsonBytes), path); }

void json_fail(const JsonPath& at, const std::string& expected) { throw InputError(at.str(), expected); }

namespace {
std::string type_name(const Json& v) { return v.type_name(); }
}  // namespace

ObjectReader::ObjectReader(const Json& j, JsonPath path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object()) json_fail(path_, "expected an object, found " + type_name(j_));
}

bool ObjectReader::has(const std::string& key) const {
  seen_.insert(key);  // a key the reader asks about is one it knows, whether or not this object has it
  return j_.contains(key);
}

const Json& ObjectReader::raw(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end()) json_fail(path_.child(key), "missing required field '" + key + "'");
  return *it;
}

const Json* ObjectReader::raw_optional(const std::string& key) {
  seen_.insert(key);
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string ObjectReader::string(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_string()) json_fail(path_.child(key), "expected a string, found " + type_name(v));
  return v.get<std::string>();
}

std::string ObjectReader::string_or(const std::string& key, const std::string& dflt) {
  return has(key) ? string(key) : (seen_.insert(key), dflt);
}

double ObjectReader::number(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_number()) json_fail(path_.child(key), "expected a number, found " + type_name(v));
  double d = v.get<double>();
  if (!std::isfinite(d)) json_fail(path_.child(key), "expected a finite number");
  return d;
}

double ObjectReader::number_or(const std::string& key, double dflt) {
  return has(key) ? number(key) : (seen_.insert(key), dflt);
}

double ObjectReader::positive(const std::string& key) {
  double d = number(key);
  if (!(d > 0)) json_fail(path_.child(key), "expected a positive number, found " + std::to_string(d));
  return d;
}

std::int64_t ObjectReader::integer(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_number_integer()) json_fail(path_.child(key), "expected an integer, found " + json_excerpt(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    json_fail(path_.child(key), "expected an integer below 2^63, found " + json_excerpt(v));
  return v.get<std::int64_t>();
}

std::int64_t ObjectReader::integer_in(const std::string& key, std::int64_t lo, std::int64_t hi) {
  const std::int64_t x = integer(key);
  if (x < lo || x > hi)
    json_fail(path_.child(key), "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                    "], found " + std::to_string(x));
  return x;
}

std::int64_t ObjectReader::integer_in_or(const std::string& key, std::int64_t lo, std::int64_t hi,
                                         std::int64_t dflt) {
  return has(key) ? integer_in(key, lo, hi) : (seen_.insert(key), dflt);
}

std::int64_t ObjectReader::integer_or(const std::string& key, std::int64_t dflt) {
  return has(key) ? integer(key) : (seen_.insert(key), dflt);
}

bool ObjectReader::boolean_or(const std::string& key, bool dflt) {
  seen_.insert(key);
  if (!has(key)) return dflt;
  const Json& v = j_.at(key);
  if (!v.is_boolean()) json_fail(path_.child(key), "expected true or false, found " + json_excerpt(v));
  return v.get<bool>();
}

double json_bandwidth(const Json& v, const JsonPath& at) {
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    try {
      d = parse_bandwidth(v.get<std::string>(), at.str());
    } catch (const InputError&) {
      json_fail(at, "expected a positive bandwidth (bytes/s number, or a string such as \"400Gbps\" or \"25GB/s\"), found " + json_excerpt(v));
    }
  } else {
    json_fail(at, "expected a bandwidth (number in bytes/s or string with unit), found " + json_excerpt(v));
  }
  if (!(d > 0)) json_fail(at, "expected a positive bandwidth, found " + json_excerpt(v));
  if (!(d >= kMinBandwidth && d <= kMaxBandwidth))
    json_fail(at, "expected a bandwidth between 1e-3 B/s and 1e18 B/s, found " + json_excerpt(v));
  return d;
}

double json_time(const Json& v, const JsonPath& at) {
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    try {
      d = parse_time(v.get<std::string>(), at.str());
    } catch (const InputError&) {
      json_fail(at, "expected a non-negative time (seconds, or a string such as \"1.5us\"), found " + json_excerpt(v));
    }
  } else {
    json_fail(at, "expected a time (number in seconds or string with unit), found " + json_excerpt(v));
  }
  if (!(d >= 0)) json_fail(at, "expected a non-negative time, found " + json_excerpt(v));
  if (!(d >= 0 && d <= kMaxTime)) json_fail(at, "expected a time between 0 and 1e9 s, found " + json_excerpt(v));
  return d;
}

std::uint64_t json_size(const Json& v, const JsonPath& at) {
  std::uint64_t n = 0;
  bool ok = false;
  if (v.is_number_unsigned()) {
    n = v.get<std::uint64_t>(), ok = true;
  } else if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    n = static_cast<std::uint64_t>(v.get<std::int64_t>()), ok = true;
  } else if (v.is_string()) {
    try {
      n = parse_size(v.get<std::string>(), at.str()), ok = true;
    } catch (const InputError&) {
    }
  }
  if (ok && n > kMaxSize) json_fail(at, "expected a size of at most 2^60 bytes (1 EiB), found " + json_excerpt(v));
  if (ok) return n;
  json_fail(at, "expected a size in bytes (non-negative integer, or a string such as \"64M\"), found " + json_excerpt(v));
}

double ObjectReader::bandwidth(const std::string& key) { return json_bandwidth(raw(key), path_.child(key)); }
double ObjectReader::bandwidth_or(const std::string& key, double dflt) {
  return has(key) ? bandwidth(key) : (seen_.insert(key), dflt);
}
double ObjectReader::time(const std::string& key) { return json_time(raw(key), path_.child(key)); }
double ObjectReader::time_or(const std::string& key, double dflt) {
  return has(key) ? time(key) : (seen_.insert(key), dflt);
}
std::uint64_t ObjectReader::size(const std::string& key) { return json_size(raw(key), path_.child(key)); }
std::uint64_t ObjectReader::size_or(const std::string& key, std::uint64_t dflt) {
  return has(key) ? size(key) : (seen_.insert(key), dflt);
}

const Json& ObjectReader::array(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_array()) json_fail(path_.child(key), "expected an array, found " + type_name(v));
  return v;
}
const Json* ObjectReader::array_optional(const std::string& key) {
  const Json* v = raw_optional(key);
  if (v && !v->is_array()) json_fail(path_.child(key), "expected an array, found " + type_name(*v));
  return v;
}
const Json& ObjectReader::object(const std::string& key) {
  const Json& v = raw(key);
  if (!v.is_object()) json_fail(path_.child(key), "expected an object, found " + type_name(v));
  return v;
}
const Json* ObjectReader::object_optional(const std::string& key) {
  const Json* v = raw_optional(key);
  if (v && !v->is_object()) json_fail(path_.child(key), "expected an object, found " + type_name(*v));
  return v;
}

void ObjectReader::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (!seen_.count(it.key())) {
      std::string known;
      for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      json_fail(path_.child(it.key()), "unknown key '" + text_excerpt(it.key(), 40) + "'" +
                                           did_you_mean(it.key(), std::vector<std::string>(seen_.begin(), seen_.end())) +
                                           " (known keys: " + known + ")");
    }
  }
}

void check_output_path(const std::string& path, const std::string& what) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (path.empty()) throw InputError(what, "a file path (got an empty string)");
  if (p.filename().empty() || std::filesystem::is_directory(p, ec))
    throw InputError(what, "a file path (got '" + path + "', a directory)");
  const auto dir = p.parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw InputError(what, "a path in an existing directory ('" + dir.string() + "' does not exist)");
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  // POSIX calls rather than a stream so every failure has its errno (ENOSPC: "No space left on device",
  // EACCES, EROFS, EDQUOT ...). The data reaches the disk (fsync) before the rename makes it visible, so a
  // crash or kill at any point leaves either the old file or the new one, never a partial one.
  // A symbolic link is followed: the file it names is replaced, the link kept (renaming over the link would replace
  // the link itself and leave its file as it was: found by fuzzing).
  std::string target = path;
  {
    std::error_code ec;
    if (std::filesystem::is_symlink(path, ec)) {
      const auto real = std::filesystem::canonical(path, ec);
      if (!ec) target = real.string();
    }
  }
  const std::string tmp = target + ".tmp";
  auto fail = [&](const char* step, int err, bool remove_tmp) {
    if (remove_tmp) ::unlink(tmp.c_str());
    throw InputError(path, std::string("cannot write output (") + step + ": " + std::strerror(err) + ")");
  };
  auto write_all = [&](int fd, bool remove_tmp) {
    const char* p = contents.data();
    std::size_t left = contents.size();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : EIO;
        ::close(fd);
        fail("write", err, remove_tmp);
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  };
  // A device or a pipe (/dev/null, /dev/stdout, a FIFO) is written in place: renaming a temporary file over it
  // would replace the device with a regular file (found by fuzzing).
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("open", errno, false);
    write_all(fd, false);
    if (::close(fd) != 0) fail("close", errno, false);
    return;
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail("create temporary file", errno, false);
  write_all(fd, true);
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {  // EINVAL: a file type without fsync
    const int err = errno;
    ::close(fd);
    fail("fsync", err, true);
  }
  if (::close(fd) != 0) fail("close", errno, true);
  if (std::rename(tmp.c_str(), target.c_str()) != 0) fail("rename into place", errno, true);
}

}  // namespace fabricsim
