// Writes Chakra protobuf `.et` files (and chakra_jsonizer-style protobuf JSON) by hand, from the field numbers
// of et_def.proto (mlcommons/chakra@21585d8, vendored in workloads/chakra/): Node 1 id, 2 name, 3 type,
// 4 ctrl_deps, 5 data_deps (packed), 7 duration_micros, 10 attr; AttributeProto 1 name, 9 int64_val,
// 28 bool_list, 29 string_val; GlobalMetadata 1 version. The tests build their traces with this instead of the
// importer's generated code, so an encoding the importer misreads is caught, not mirrored.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace fabricsim::et_test {

inline std::string varint(std::uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  return s + static_cast<char>(v);
}
inline std::string field_varint(int f, std::uint64_t v) { return varint(static_cast<std::uint64_t>(f) << 3) + varint(v); }
inline std::string field_bytes(int f, const std::string& b) {
  return varint((static_cast<std::uint64_t>(f) << 3) | 2) + varint(b.size()) + b;
}

struct EtNode {
  std::uint64_t id = 0;
  std::string name;
  int type = 4;  // COMP_NODE
  std::vector<std::uint64_t> data_deps, ctrl_deps;
  std::uint64_t duration_us = 0;
  std::vector<std::pair<std::string, std::int64_t>> int_attrs;  // comm_type, comm_size, comm_src, ...
  std::vector<std::pair<std::string, std::string>> str_attrs;   // pg_name
};

inline std::string encode(const EtNode& n) {
  auto packed = [](int f, const std::vector<std::uint64_t>& v) {
    std::string b;
    for (auto x : v) b += varint(x);
    return v.empty() ? std::string() : field_bytes(f, b);
  };
  std::string m = field_varint(1, n.id) + field_bytes(2, n.name) + field_varint(3, static_cast<std::uint64_t>(n.type)) +
                  packed(4, n.ctrl_deps) + packed(5, n.data_deps) + field_varint(7, n.duration_us);
  for (const auto& [k, v] : n.int_attrs) m += field_bytes(10, field_bytes(1, k) + field_varint(9, static_cast<std::uint64_t>(v)));
  for (const auto& [k, v] : n.str_attrs) m += field_bytes(10, field_bytes(1, k) + field_bytes(29, v));
  return m;
}

// A rank's `.et`: varint32-length-delimited GlobalMetadata{version "0.0.4"}, then the nodes.
inline void write_et(const std::string& path, const std::vector<EtNode>& nodes) {
  const std::string md = field_bytes(1, "0.0.4");
  std::string out = varint(md.size()) + md;
  for (const auto& n : nodes) {
    const std::string m = encode(n);
    out += varint(m.size()) + m;
  }
  std::ofstream(path, std::ios::binary) << out;
}

// The same nodes as chakra_jsonizer writes them: protobuf-JSON objects back to back, camelCase keys, int64 as
// strings, enum names.
inline void write_jsonizer(const std::string& path, const std::vector<EtNode>& nodes) {
  static const char* kType[] = {"INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE",
                                "COMP_NODE",    "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE"};
  auto ids = [](const std::vector<std::uint64_t>& v) {
    std::string s = "[";
    for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", \"" : "\"") + std::to_string(v[k]) + "\"";
    return s + "]";
  };
  std::string out = "{\n  \"version\": \"0.0.4\"\n}\n";
  for (const auto& n : nodes) {
    out += "{\n  \"id\": \"" + std::to_string(n.id) + "\",\n  \"name\": \"" + n.name + "\",\n  \"type\": \"" + kType[n.type] + "\"";
    if (!n.ctrl_deps.empty()) out += ",\n  \"ctrlDeps\": " + ids(n.ctrl_deps);
    if (!n.data_deps.empty()) out += ",\n  \"dataDeps\": " + ids(n.data_deps);
    if (n.duration_us) out += ",\n  \"durationMicros\": \"" + std::to_string(n.duration_us) + "\"";
    std::string attrs;
    for (const auto& [k, v] : n.int_attrs)
      attrs += std::string(attrs.empty() ? "" : ", ") + "{\"name\": \"" + k + "\", \"int64Val\": \"" + std::to_string(v) + "\"}";
    for (const auto& [k, v] : n.str_attrs)
      attrs += std::string(attrs.empty() ? "" : ", ") + "{\"name\": \"" + k + "\", \"stringVal\": \"" + v + "\"}";
    if (!attrs.empty()) out += ",\n  \"attr\": [" + attrs + "]";
    out += "\n}\n";
  }
  std::ofstream(path, std::ios::binary) << out;
}

}  // namespace fabricsim::et_test
