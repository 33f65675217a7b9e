#include "workloads/megatron_args.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "sim/base/error.hpp"
#include "workloads/gpt.hpp"
#include "workloads/importers.hpp"
#include "workloads/moe.hpp"

namespace fabricsim::workloads {

const MegatronFlag* find_megatron_flag(const std::string& option) {
  static const std::map<std::string, const MegatronFlag*> index = [] {
    std::map<std::string, const MegatronFlag*> m;
    for (const auto& f : megatron_flags()) m.emplace(f.option, &f);
    return m;
  }();
  auto it = index.find(option);
  return it == index.end() ? nullptr : it->second;
}

std::string megatron_args_at(const std::string& conj) {
  std::vector<std::string> at;
  std::istringstream commits(kMegatronArgsCommits);
  for (std::string c; commits >> c;) at.push_back("@" + c);
  std::string out = "megatron/training/arguments.py";
  for (std::size_t i = 0; i < at.size(); ++i)
    out += (i == 0 ? " " : i + 1 == at.size() ? " " + conj + " " : ", ") + at[i];
  return out;
}

namespace {

// ---- Step 1: the script's words, as bash would split them (nothing is run) ----

// A piece of a word before expansion.
struct Segment {
  enum Kind { kLiteral, kVar, kArray, kArith, kCommand } kind = kLiteral;
  std::string text;       // literal text; variable / array name; arithmetic expression; command text
  std::string fallback;   // ${VAR:-fallback}
  bool has_fallback = false;
  bool quoted = false;    // inside double quotes: no field splitting
  int line = 0;           // script line the segment starts on
  std::vector<std::size_t> breaks;  // literal text: offsets where a new script line starts (quoted newlines)
};

struct RawWord {
  std::vector<Segment> segs;
  int line = 0;
  bool array_assign = false;       // NAME=( ... ): `name`, elements in `elements`
  std::string name;
  std::vector<RawWord> elements;
};

using Statement = std::vector<RawWord>;

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(const std::string& text, const std::string& file) : s_(text), file_(file) {}

  std::vector<Statement> statements() {
    std::vector<Statement> out;
    Statement cur;
    while (true) {
      skip_blanks();
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')') {
        if (c == '\n') ++line_;
        ++i_;
        if (c == '\n') skip_heredoc_bodies();
        if (!cur.empty()) out.push_back(std::move(cur));
        cur.clear();
        continue;
      }
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
        continue;
      }
      if (skip_redirection()) continue;
      cur.push_back(word());
    }
    if (!cur.empty()) out.push_back(std::move(cur));
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(file_ + ":" + std::to_string(line_), what);
  }
  void skip_blanks() {
    while (i_ < s_.size()) {
      if (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r') {
        ++i_;
      } else if (s_[i_] == '\\' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
        i_ += 2;
        ++line_;
      } else if (s_[i_] == '\\' && i_ + 2 < s_.size() && s_[i_ + 1] == '\r' && s_[i_ + 2] == '\n') {
        i_ += 3;
        ++line_;
      } else {
        break;
      }
    }
  }
  // A here-document's body (`<<EOF` / `<<-EOF` ... a line `EOF`) is text fed to its command, not commands: the
  // lines after the command's line up to the delimiter are skipped (tabs before it stripped for `<<-`; without a
  // delimiter line the body runs to the end of the file, as bash reads it). Found by fuzzing: a body's lines were
  // read as commands.
  void skip_heredoc_bodies() {
    for (const Heredoc& h : heredocs_) {
      while (i_ < s_.size()) {
        std::size_t nl = s_.find('\n', i_);
        if (nl == std::string::npos) nl = s_.size();
        std::string text = s_.substr(i_, nl - i_);
        i_ = nl < s_.size() ? nl + 1 : nl;
        ++line_;
        if (!text.empty() && text.back() == '\r') text.pop_back();
        if (h.strip_tabs) text.erase(0, text.find_first_not_of('\t') == std::string::npos ? text.size() : text.find_first_not_of('\t'));
        if (text == h.delimiter) break;
      }
    }
    heredocs_.clear();
  }
  // A redirection (`> log`, `2>&1`, `>> out`, `< in`) is no word of the command: skipped with its target.
  bool skip_redirection() {
    std::size_t k = i_;
    while (k < s_.size() && std::isdigit(static_cast<unsigned char>(s_[k]))) ++k;
    if (k >= s_.size() || (s_[k] != '>' && s_[k] != '<')) return false;
    const std::size_t op = k;
    while (k < s_.size() && (s_[k] == '>' || s_[k] == '<')) ++k;
    const bool heredoc = s_.compare(op, k - op, "<<") == 0 && k - op == 2;
    const bool strip_tabs = heredoc && k < s_.size() && s_[k] == '-';
    if (strip_tabs) ++k;
    if (k < s_.size() && s_[k] == '&') {  // >&2, 2>&1, >&-
      ++k;
      while (k < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[k])) || s_[k] == '-')) ++k;
      i_ = k;
      return true;
    }
    i_ = k;
    skip_blanks();
    if (i_ < s_.size() && !ends_word(s_[i_])) {
      const RawWord target = word();
      if (heredoc) {  // the delimiter as written, quotes removed
        std::string d;
        for (const auto& g : target.segs) d += g.kind == Segment::kLiteral ? g.text : "$" + g.text;
        heredocs_.push_back({d, strip_tabs});
      }
    }
    return true;
  }
  static bool ends_word(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' ||
           c == ')';
  }
  void add_literal(std::vector<Segment>& segs, const std::string& t, bool quoted) {
    if (segs.empty() || segs.back().kind != Segment::kLiteral || segs.back().quoted != quoted) {
      Segment g;
      g.quoted = quoted, g.line = line_;
      segs.push_back(g);
    }
    // Each newline in the text starts a script line (where the words of a multi-line value are written).
    for (char c : t) {
      segs.back().text += c;
      if (c == '\n') ++line_, segs.back().breaks.push_back(segs.back().text.size());
    }
  }
  // Text up to the parenthesis that closes one already opened (depth 1), quotes respected.
  std::string balanced(int depth) {
    std::string t;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '\n') ++line_;
      if (c == '(') ++depth;
      if (c == ')' && --depth == 0) return t;
      t += c;
    }
    fail("unterminated $( ... )");
  }
  // After '$'.
  // A `command` substitution from the backquote at i_ to its closing one (never run: read as a command segment).
  Segment backquote(bool quoted) {
    const std::size_t close = s_.find('`', i_ + 1);
    if (close == std::string::npos) fail("unterminated backquote");
    Segment g;
    g.kind = Segment::kCommand, g.quoted = quoted, g.text = s_.substr(i_, close - i_ + 1), g.line = line_;
    i_ = close + 1;
    return g;
  }

  Segment dollar(bool quoted) {
    Segment g;
    g.quoted = quoted, g.line = line_;
    if (i_ < s_.size() && s_[i_] == '(') {
      if (i_ + 1 < s_.size() && s_[i_ + 1] == '(') {
        i_ += 2;
        g.kind = Segment::kArith;
        std::string e = balanced(2);
        if (!e.empty() && e.back() == ')') e.pop_back();
        g.text = e;
        return g;
      }
      ++i_;
      g.kind = Segment::kCommand;
      g.text = "$(" + balanced(1) + ")";
      return g;
    }
    if (i_ < s_.size() && s_[i_] == '{') {
      const std::size_t close = s_.find('}', i_);
      if (close == std::string::npos) fail("unterminated ${");
      const std::string body = s_.substr(i_ + 1, close - i_ - 1);
      i_ = close + 1;
      std::size_t n = 0;
      while (n < body.size() && is_name_char(body[n])) ++n;
      const std::string name = body.substr(0, n), rest = body.substr(n);
      if (name.empty()) {
        g.kind = Segment::kCommand;  // ${#X}, ${!X}, ...: not expanded here
        g.text = "${" + body + "}";
        return g;
      }
      g.kind = Segment::kVar;
      g.text = name;
      if (rest == "[@]" || rest == "[*]") {
        g.kind = Segment::kArray;
      } else if (rest.rfind(":-", 0) == 0 || rest.rfind("-", 0) == 0 || rest.rfind(":=", 0) == 0) {
        g.has_fallback = true;
        g.fallback = rest.substr(rest[0] == ':' ? 2 : 1);
      } else if (!rest.empty()) {
        g.kind = Segment::kCommand;
        g.text = "${" + body + "}";
      }
      return g;
    }
    if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      g.kind = Segment::kVar;
      g.text = std::string(1, s_[i_++]);
      return g;
    }
    if (i_ < s_.size() && is_name_start(s_[i_])) {
      std::size_t b = i_;
      while (i_ < s_.size() && is_name_char(s_[i_])) ++i_;
      g.kind = Segment::kVar;
      g.text = s_.substr(b, i_ - b);
      return g;
    }
    if (i_ < s_.size() && (s_[i_] == '@' || s_[i_] == '*' || s_[i_] == '#' || s_[i_] == '?')) {
      g.kind = Segment::kCommand;
      g.text = std::string("$") + s_[i_++];
      return g;
    }
    g.kind = Segment::kLiteral;
    g.text = "$";
    return g;
  }
  RawWord word() {
    RawWord w;
    w.line = line_;
    while (i_ < s_.size() && !ends_word(s_[i_])) {
      const char c = s_[i_];
      if (c == '\\') {
        if (i_ + 1 < s_.size() && s_[i_ + 1] == '\n') {
          i_ += 2, ++line_;  // a continuation ends the word
          break;
        }
        if (i_ + 1 < s_.size()) add_literal(w.segs, std::string(1, s_[i_ + 1]), false);
        i_ += 2;
      } else if (c == '\'') {
        const std::size_t close = s_.find('\'', i_ + 1);
        if (close == std::string::npos) fail("unterminated single quote");
        add_literal(w.segs, s_.substr(i_ + 1, close - i_ - 1), true);  // counts its lines
        i_ = close + 1;
      } else if (c == '"') {
        ++i_;
        bool closed = false;
        add_literal(w.segs, "", true);  // "" is a word of its own
        while (i_ < s_.size()) {
          const char d = s_[i_];
          if (d == '"') {
            ++i_, closed = true;
            break;
          }
          if (d == '\\' && i_ + 1 < s_.size() && std::string("$`\"\\\n").find(s_[i_ + 1]) != std::string::npos) {
            if (s_[i_ + 1] == '\n') {  // a continuation: no text, the next script line
              add_literal(w.segs, "", true);
              ++line_;
              w.segs.back().breaks.push_back(w.segs.back().text.size());
            } else {
              add_literal(w.segs, std::string(1, s_[i_ + 1]), true);
            }
            i_ += 2;
          } else if (d == '$') {
            ++i_;
            w.segs.push_back(dollar(true));
          } else if (d == '`') {
            w.segs.push_back(backquote(true));
          } else {
            add_literal(w.segs, std::string(1, d), true);  // counts a newline
            ++i_;
          }
        }
        if (!closed) fail("unterminated double quote");
      } else if (c == '$') {
        ++i_;
        w.segs.push_back(dollar(false));
      } else if (c == '`') {
        w.segs.push_back(backquote(false));
      } else if (c == '=' && i_ + 1 < s_.size() && s_[i_ + 1] == '(' && w.segs.size() == 1 &&
                 w.segs[0].kind == Segment::kLiteral && !w.segs[0].quoted && !w.segs[0].text.empty() &&
                 is_name_start(w.segs[0].text[0]) &&
                 std::all_of(w.segs[0].text.begin(), w.segs[0].text.end(), is_name_char)) {
        // NAME=( elements ... ): words until ')', across lines, comments allowed.
        w.array_assign = true;
        w.name = w.segs[0].text;
        i_ += 2;
        while (true) {
          skip_blanks();
          if (i_ >= s_.size()) fail("unterminated array " + w.name + "=(");
          const char d = s_[i_];
          if (d == ')') {
            ++i_;
            break;
          }
          if (d == '\n') {
            ++line_, ++i_;
            continue;
          }
          if (d == '#') {
            while (i_ < s_.size() && s_[i_] != '\n') ++i_;
            continue;
          }
          if (ends_word(d)) fail(std::string("unexpected '") + d + "' in array " + w.name + "=(");
          w.elements.push_back(word());
        }
        return w;
      } else {
        add_literal(w.segs, std::string(1, c), false);
        ++i_;
      }
    }
    return w;
  }

  const std::string& s_;
  const std::string& file_;
  std::size_t i_ = 0;
  int line_ = 1;
  struct Heredoc {
    std::string delimiter;
    bool strip_tabs = false;
  };
  std::vector<Heredoc> heredocs_;  // started on the current line, bodies after it
};

// A variable's value: text, or unresolved (the variable it depends on), or an array of words.
struct Value {
  std::string text;
  std::string unresolved;
  bool is_array = false;
  std::vector<ShellWord> elements;
  // Where the text is written: (offset in text, script line) from that offset on, offsets increasing; none for
  // --var values.
  std::vector<std::pair<std::size_t, int>> runs;
  // Line `line` from offset `at` (at least the last run's offset) on. At most one run per offset and none that
  // repeats its line, so runs stay fewer than the characters (empty variables doubled do not grow them).
  void mark(std::size_t at, int line) {
    if (!runs.empty() && runs.back().first == at) runs.pop_back();
    if (runs.empty() || runs.back().second != line) runs.push_back({at, line});
  }
  // The script line the character at `at` is written on (0: not in the script).
  int line_at(std::size_t at) const {
    const auto it = std::upper_bound(runs.begin(), runs.end(), at,
                                     [](std::size_t a, const std::pair<std::size_t, int>& r) { return a < r.first; });
    return it == runs.begin() ? 0 : std::prev(it)->second;
  }
};

// Integer arithmetic of $(( ... )): + - * / % and parentheses over integers and variables.
// $((...)) as bash evaluates it on 64-bit integers. What bash would not give a number for here -- an overflow (bash
// wraps; a launch script that wraps is not one fabricsim can read), a division of the smallest integer by -1, a
// variable that refers to itself, nesting beyond kMaxDepth -- is left unresolved (the importer's error names it):
// found by fuzzing (SIGFPE, stack overflow).
class Arith {
 public:
  Arith(const std::string& e, const std::map<std::string, Value>& vars, int depth = 0)
      : e_(e), vars_(vars), depth_(depth) {}
  std::optional<std::int64_t> eval() {
    auto v = sum();
    skip();
    if (!v || p_ != e_.size()) return std::nullopt;
    return v;
  }
  std::string unresolved;  // a variable without a (numeric) value

 private:
  void skip() {
    while (p_ < e_.size() && std::isspace(static_cast<unsigned char>(e_[p_]))) ++p_;
  }
  std::optional<std::int64_t> atom() {
    skip();
    if (p_ >= e_.size() || ++nest_ > kMaxDepth) return std::nullopt;
    if (e_[p_] == '(') {
      ++p_;
      auto v = sum();
      skip();
      if (!v || p_ >= e_.size() || e_[p_] != ')') return std::nullopt;
      ++p_;
      return v;
    }
    if (e_[p_] == '-') {
      ++p_;
      auto v = atom();
      if (!v || *v == std::numeric_limits<std::int64_t>::min()) return std::nullopt;
      return -*v;
    }
    if (std::isdigit(static_cast<unsigned char>(e_[p_]))) {
      std::int64_t v = 0;
      while (p_ < e_.size() && std::isdigit(static_cast<unsigned char>(e_[p_])))
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, e_[p_++] - '0', &v)) return std::nullopt;
      return v;
    }
    if (e_[p_] == '$') ++p_;
    bool braced = p_ < e_.size() && e_[p_] == '{';
    if (braced) ++p_;
    std::size_t b = p_;
    while (p_ < e_.size() && is_name_char(e_[p_])) ++p_;
    const std::string name = e_.substr(b, p_ - b);
    if (braced) {
      if (p_ >= e_.size() || e_[p_] != '}') return std::nullopt;
      ++p_;
    }
    if (name.empty()) return std::nullopt;
    auto it = vars_.find(name);
    if (it == vars_.end() || !it->second.unresolved.empty() || it->second.is_array) {
      if (unresolved.empty()) unresolved = it == vars_.end() || it->second.unresolved.empty() ? name : it->second.unresolved;
      return std::nullopt;
    }
    if (depth_ >= kMaxDepth) {  // a variable that refers to itself, directly or through others
      if (unresolved.empty()) unresolved = name;
      return std::nullopt;
    }
    Arith inner(it->second.text, vars_, depth_ + 1);
    auto v = inner.eval();
    if (!v && unresolved.empty()) unresolved = inner.unresolved.empty() ? name : inner.unresolved;
    return v;
  }
  std::optional<std::int64_t> product() {
    auto v = atom();
    while (v) {
      skip();
      if (p_ >= e_.size() || (e_[p_] != '*' && e_[p_] != '/' && e_[p_] != '%')) break;
      const char op = e_[p_++];
      auto r = atom();
      if (!r || ((op == '/' || op == '%') && (*r == 0 || (*r == -1 && *v == std::numeric_limits<std::int64_t>::min()))))
        return std::nullopt;
      std::int64_t out = 0;
      if (op == '*' && __builtin_mul_overflow(*v, *r, &out)) return std::nullopt;
      v = op == '*' ? out : op == '/' ? *v / *r : *v % *r;
    }
    return v;
  }
  std::optional<std::int64_t> sum() {
    auto v = product();
    while (v) {
      skip();
      if (p_ >= e_.size() || (e_[p_] != '+' && e_[p_] != '-')) break;
      const char op = e_[p_++];
      auto r = product();
      std::int64_t out = 0;
      if (!r || (op == '+' ? __builtin_add_overflow(*v, *r, &out) : __builtin_sub_overflow(*v, *r, &out))) return std::nullopt;
      v = out;
    }
    return v;
  }
  static constexpr int kMaxDepth = 64;
  const std::string& e_;
  const std::map<std::string, Value>& vars_;
  int depth_ = 0;   // variables evaluated inside variables
  int nest_ = 0;    // atoms parsed (bounds parentheses and unary minus nesting)
  std::size_t p_ = 0;
};

class Expander {
 public:
  explicit Expander(const std::map<std::string, std::string>& fixed) {
    for (const auto& [k, v] : fixed) vars_[k].text = v, fixed_.insert(k);
  }
  bool fixed(const std::string& name) const { return fixed_.count(name) > 0; }
  void set(const std::string& name, Value v) {
    if (!fixed(name)) vars_[name] = std::move(v);
  }
  // A word as one string (assignment values: no field splitting).
  Value scalar(const RawWord& w) {
    Value out;
    for (const auto& g : w.segs) append(out, g);
    return out;
  }
  // A word as the fields bash would make of it.
  std::vector<ShellWord> fields(const RawWord& w) {
    std::vector<ShellWord> out;
    ShellWord cur;
    cur.line = w.line;
    bool have = false;  // the current field exists (a quoted empty string counts)
    auto flush = [&] {
      if (have) out.push_back(cur);
      cur = ShellWord{};
      cur.line = w.line;
      have = false;
    };
    for (const auto& g : w.segs) {
      if (g.kind == Segment::kArray) {
        auto it = vars_.find(g.text);
        std::vector<ShellWord> els;
        if (it != vars_.end() && it->second.is_array) {
          els = it->second.elements;
        } else if (it != vars_.end()) {
          els.push_back(ShellWord{it->second.text, w.line, it->second.unresolved, it->second.line_at(0), ""});
        } else {
          els.push_back(ShellWord{"${" + g.text + "[@]}", w.line, g.text, 0, ""});
        }
        for (std::size_t k = 0; k < els.size(); ++k) {
          if (k > 0) flush();
          Value e;  // the element's words are written on its line
          e.runs.push_back({0, els[k].written});
          if (!g.quoted && els[k].unresolved.empty()) {
            split_into(els[k].text, e, g, cur, have, flush);
          } else {
            start(cur, have, e, 0, g);
            cur.text += els[k].text;
            if (cur.unresolved.empty()) cur.unresolved = els[k].unresolved;
            have = true;
          }
        }
        continue;
      }
      Value v;
      append(v, g);
      if (g.quoted || g.kind == Segment::kLiteral || !v.unresolved.empty()) {
        if (g.quoted || !v.text.empty() || !v.unresolved.empty()) start(cur, have, v, 0, g);
        cur.text += v.text;
        if (cur.unresolved.empty()) cur.unresolved = v.unresolved;
        if (g.quoted || !v.text.empty() || !v.unresolved.empty()) have = true;
      } else {
        split_into(v.text, v, g, cur, have, flush);
      }
    }
    flush();
    return out;
  }

 private:
  // A field begins (nothing of it yet) with the character at `at` of `v`, from segment `g`: where it is written,
  // and the variable it came from.
  static void start(ShellWord& cur, bool have, const Value& v, std::size_t at, const Segment& g) {
    if (have) return;
    cur.written = v.line_at(at);
    if (g.kind == Segment::kVar || g.kind == Segment::kArray) cur.var = g.text;
  }
  template <class Flush>
  static void split_into(const std::string& text, const Value& v, const Segment& g, ShellWord& cur, bool& have,
                         Flush&& flush) {
    std::size_t k = 0;
    while (k < text.size()) {
      if (std::isspace(static_cast<unsigned char>(text[k]))) {
        flush();
        while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
        continue;
      }
      start(cur, have, v, k, g);
      cur.text += text[k++];
      have = true;
    }
  }
  void append(Value& out, const Segment& g) {
    const std::size_t at = out.text.size();
    out.mark(at, g.line);
    switch (g.kind) {
      case Segment::kLiteral:
        for (std::size_t k = 0; k < g.breaks.size(); ++k) out.mark(at + g.breaks[k], g.line + int(k) + 1);
        out.text += g.text;
        return;
      case Segment::kVar:
      case Segment::kArray: {
        auto it = vars_.find(g.text);
        if (it != vars_.end() && !(g.has_fallback && it->second.text.empty() && it->second.unresolved.empty() &&
                                   !it->second.is_array)) {
          const Value& v = it->second;
          // The variable's text is written where it was assigned.
          out.mark(at, v.is_array ? (v.elements.empty() ? 0 : v.elements[0].written) : 0);
          if (!v.is_array)
            for (const auto& [o, line] : v.runs) out.mark(at + o, line);
          out.text += v.is_array ? (v.elements.empty() ? std::string() : v.elements[0].text) : v.text;
          if (out.unresolved.empty()) out.unresolved = v.unresolved;
          return;
        }
        if (g.has_fallback) {
          out.text += g.fallback;
          return;
        }
        out.text += "${" + g.text + "}";
        if (out.unresolved.empty()) out.unresolved = g.text;
        return;
      }
      case Segment::kArith: {
        Arith a(g.text, vars_);
        if (auto v = a.eval()) {
          out.text += std::to_string(*v);
        } else {
          out.text += "$((" + g.text + "))";
          if (out.unresolved.empty()) out.unresolved = a.unresolved.empty() ? "$((" + g.text + "))" : a.unresolved;
        }
        return;
      }
      case Segment::kCommand:
        out.text += g.text;
        if (out.unresolved.empty()) out.unresolved = g.text;
        return;
    }
  }
  std::map<std::string, Value> vars_;
  std::set<std::string> fixed_;
};

// NAME=value (a literal NAME before the '=').
bool split_assignment(const RawWord& w, std::string& name, RawWord& value) {
  if (w.array_assign || w.segs.empty() || w.segs[0].kind != Segment::kLiteral || w.segs[0].quoted) return false;
  const std::string& t = w.segs[0].text;
  const std::size_t eq = t.find('=');
  if (eq == std::string::npos || eq == 0 || !is_name_start(t[0])) return false;
  for (std::size_t k = 0; k < eq; ++k)
    if (!is_name_char(t[k])) return false;
  name = t.substr(0, eq);
  value = w;
  value.segs[0].text = t.substr(eq + 1);
  return true;
}

std::string basename_of(const std::string& p) {
  const std::size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void fail_at(const std::string& file, int line, const std::string& what) {
  throw InputError(file + ":" + std::to_string(line), what);
}

[[noreturn]] void fail_unresolved(const std::string& file, const ShellWord& w) {
  if (w.unresolved.rfind("$(", 0) == 0 || w.unresolved.rfind("`", 0) == 0 || w.unresolved.rfind("${", 0) == 0)
    fail_at(file, w.line, "'" + w.unresolved + "' is not expanded by the importer (it runs nothing): give the value "
                          "with --var, or write it into the script");
  fail_at(file, w.line, "variable $" + w.unresolved + " is not set (set it in the script or give --var " +
                            w.unresolved + "=VALUE)");
}

// The last (newest) of a space-separated commit list.
std::string last_commit(const std::string& commits) { return commits.substr(commits.rfind(' ') + 1); }

}  // namespace

bool parse_int(const std::string& t, std::int64_t& v) {
  if (t.empty()) return false;
  std::size_t k = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  if (k == t.size()) return false;
  for (std::size_t j = k; j < t.size(); ++j)
    if (!std::isdigit(static_cast<unsigned char>(t[j]))) return false;
  if (t.size() - k > 18) return false;
  v = std::strtoll(t.c_str(), nullptr, 10);
  return true;
}

bool parse_float(const std::string& t, double& v) {
  if (t.empty() || std::isspace(static_cast<unsigned char>(t[0]))) return false;
  char* end = nullptr;
  v = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && std::isfinite(v);
}

namespace {

// torchrun's count flags: "--nproc-per-node 8", "--nproc_per_node=8".
std::int64_t launcher_count(const std::string& file, const ShellWord& w, const std::string& flag,
                            const std::string& value) {
  if (!w.unresolved.empty()) fail_unresolved(file, w);
  std::int64_t v = 0;
  if (!parse_int(value, v) || v < 1)
    fail_at(file, w.line, flag + " expects a positive number of " + (flag == "--nnodes" ? "nodes" : "processes") +
                              ", got '" + text_excerpt(value) + "' (give the number: elastic ranges and 'gpu' / 'auto' "
                              "do not say how many GPUs the job runs on)");
  return v;
}

}  // namespace

MegatronLaunch read_megatron_launch(const std::string& text, const std::string& file,
                                    const std::map<std::string, std::string>& vars) {
  Lexer lex(text, file);
  Expander ex(vars);
  MegatronLaunch out;
  out.file = file;
  for (const Statement& st : lex.statements()) {
    // Leading NAME=value words; `export` / `declare` / `local` / `readonly` before them.
    std::size_t k = 0;
    bool declared = false;
    if (!st.empty() && st[0].segs.size() == 1 && st[0].segs[0].kind == Segment::kLiteral && !st[0].segs[0].quoted) {
      const std::string& w0 = st[0].segs[0].text;
      if (w0 == "export" || w0 == "declare" || w0 == "local" || w0 == "readonly" || w0 == "typeset") k = 1, declared = true;
    }
    std::vector<std::pair<std::string, Value>> assigns;
    // A variable's value, and a command's words, beyond these sizes are not a launch script's flags and paths:
    // refused before they grow further (variables that double one another exhausted memory: found by fuzzing).
    constexpr std::size_t kMaxValue = std::size_t{1} << 20, kMaxCommand = std::size_t{1} << 24;
    auto bounded = [&](const std::string& name, const Value& v, int line) {
      std::size_t n = v.text.size();
      for (const auto& e : v.elements) n += e.text.size();
      if (n > kMaxValue)
        fail_at(file, line, "$" + name + " expands to more than " + std::to_string(kMaxValue) +
                                " characters (a launch script's variables hold flags and paths)");
    };
    for (; k < st.size(); ++k) {
      if (st[k].array_assign) {
        Value v;
        v.is_array = true;
        for (const auto& e : st[k].elements) {
          for (auto& f : ex.fields(e)) v.elements.push_back(f);
          bounded(st[k].name, v, st[k].line);
        }
        assigns.emplace_back(st[k].name, std::move(v));
        continue;
      }
      std::string name;
      RawWord value;
      if (declared && !st[k].segs.empty() && st[k].segs[0].kind == Segment::kLiteral &&
          st[k].segs[0].text.rfind('-', 0) == 0)
        continue;  // declare -a / export -n
      if (!split_assignment(st[k], name, value)) break;
      assigns.emplace_back(name, ex.scalar(value));
      bounded(name, assigns.back().second, st[k].line);
    }
    if (k == st.size()) {  // assignments only (bash sets them in the shell)
      for (auto& [n, v] : assigns) ex.set(n, std::move(v));
      continue;
    }
    // A command (assignments before it are its environment only). Is it the pretrain script?
    std::vector<ShellWord> words;
    std::size_t command_size = 0;
    for (std::size_t j = k; j < st.size(); ++j)
      for (auto& f : ex.fields(st[j])) {
        command_size += f.text.size();
        if (command_size > kMaxCommand)
          fail_at(file, st[j].line, "the command expands to more than " + std::to_string(kMaxCommand) +
                                        " characters (a launch command holds flags and paths)");
        words.push_back(f);
      }
    std::size_t script = words.size();
    for (std::size_t j = 0; j < words.size(); ++j) {
      const std::string b = basename_of(words[j].text);
      if (b.rfind("pretrain_", 0) == 0 && ends_with(b, ".py")) {
        script = j;
        break;
      }
    }
    if (script == words.size()) continue;  // another command (mkdir, cd, a data preparation script ...)
    const std::string b = basename_of(words[script].text);
    // pretrain_hybrid.py builds Megatron's hybrid model; pretrain_mamba.py is its deprecated wrapper (runs it, at
    // NVIDIA/Megatron-LM@d98e8a64).
    if (b != "pretrain_gpt.py" && b != "pretrain_hybrid.py" && b != "pretrain_mamba.py")
      fail_at(file, words[script].line, b + ": only pretrain_gpt.py (GPT and MoE decoder models) and pretrain_hybrid.py "
                                            "(hybrid Mamba models) are modelled");
    if (!out.script.empty())
      fail_at(file, words[script].line, "a second pretrain script invocation (the first is on line " +
                                            std::to_string(out.line) + "); give a script with one");
    out.script = b;
    out.line = words[script].line;
    // Launcher flags: torchrun / python -m torch.distributed.run|launch.
    for (std::size_t j = 0; j < script; ++j) {
      const std::string& t = words[j].text;
      for (const char* flag : {"--nproc-per-node", "--nproc_per_node", "--nnodes"}) {
        const std::string f = flag;
        std::string value;
        bool match = false;
        if (t == f && j + 1 < script) {
          value = words[j + 1].text, match = true;
          if (!words[j + 1].unresolved.empty()) fail_unresolved(file, words[j + 1]);
        } else if (t.rfind(f + "=", 0) == 0) {
          value = t.substr(f.size() + 1), match = true;
          if (!words[j].unresolved.empty()) fail_unresolved(file, words[j]);
        }
        if (!match) continue;
        const std::string name = f == "--nnodes" ? "--nnodes" : "--nproc-per-node";
        (f == "--nnodes" ? out.nnodes : out.nproc_per_node) = launcher_count(file, words[j], name, value);
      }
    }
    out.args.assign(words.begin() + static_cast<std::ptrdiff_t>(script) + 1, words.end());
  }
  if (out.script.empty()) throw InputError(file, "no pretrain_gpt.py invocation found (expected a command such as "
                                                 "'torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers ...')");
  return out;
}

// ---- Step 2: Megatron-LM's flags -> gpt generator parameters ----

namespace {

struct Given {
  const MegatronFlag* flag = nullptr;
  std::vector<std::string> values;  // empty for store_true / store_false
  int line = 0;
  std::size_t order = 0;           // position of its (last) occurrence
  std::string spelled;             // "--num-layers 80"
  int written = 0;                 // the line its flag word is written on, when a variable held it (0: `line`)
  std::string var;                 // that variable
};

bool looks_like_flag(const std::string& t) {
  if (t.size() < 2 || t[0] != '-') return false;
  double v;
  return !parse_float(t, v);  // argparse: a negative number is a value
}

}  // namespace

std::string megatron_param_name(const std::string& dest) {
  // Flags the rules in import_megatron_args read (they do not map by name, or Megatron-LM derives them).
  static const std::set<std::string> by_rule = {
      "attention_backend", "group_query_attention", "num_query_groups", "max_position_embeddings",
      "use_rotary_position_embeddings", "make_vocab_size_divisible_by", "vocab_size", "tokenizer_type",
      "recompute_activations", "recompute_granularity", "recompute_modules", "offload_modules", "cp_comm_type", "ffn_hidden_size",
      "sequence_parallel", "overlap_p2p_comm", "data_parallel_sharding_strategy", "use_custom_fsdp",
      "global_batch_size", "transformer_impl", "add_bias_linear", "moe_enable_deepep", "moe_flex_dispatcher_backend",
      "tensor_model_parallel_size",
      "pipeline_model_parallel_size", "use_megatron_fsdp", "padded_vocab_size", "torch_fsdp2_reshard_after_forward", "optimizer",
      "tp_comm_overlap_cfg", "moe_router_load_balancing_type", "moe_aux_loss_coeff"};
  // Megatron-LM's dest -> the generator's name for the same setting.
  static const std::map<std::string, std::string> renamed = {
      {"fp8", "fp8_format"}, {"fp4", "fp4_format"}, {"ddp_bucket_size", "bucket_size"},
      {"num_virtual_stages_per_pipeline_rank", "virtual_pipeline_model_parallel_size"}};
  if (by_rule.count(dest)) return "";
  const auto r = renamed.find(dest);
  return r == renamed.end() ? dest : r->second;
}

// CUDA-graph settings Megatron-LM refuses at NVIDIA/Megatron-LM@d98e8a64 (kMegatronArgsCommit): validate_args in
// megatron/training/arguments.py, TransformerConfig.__post_init__ in megatron/core/transformer/transformer_config.py
// and the helpers of megatron/core/transformer/cuda_graph_config.py. fabricsim does not model CUDA graphs (their
// flags are listed as not modelled, docs/workloads.md), but a launch that Megatron-LM would not start is an error,
// as for its other refusals: one line naming the flag's line, the combination and Megatron's own words.
// Followed in Megatron's order; values left unexpanded ($VAR) are not judged.
namespace {
void check_cuda_graph_flags(const std::string& file, const std::map<std::string, Given>& given) {
  auto has = [&](const std::string& d) { return given.count(d) > 0; };
  auto values = [&](const std::string& d) -> std::vector<std::string> {
    return has(d) ? given.at(d).values : std::vector<std::string>{};
  };
  auto value = [&](const std::string& d, const std::string& dflt) {
    return has(d) && !given.at(d).values.empty() ? given.at(d).values[0] : dflt;
  };
  auto number = [&](const std::string& d, double dflt) {
    return has(d) && !given.at(d).values.empty() ? std::strtod(given.at(d).values[0].c_str(), nullptr) : dflt;
  };
  auto flag = [&](const std::string& d) { return given.at(d).spelled.substr(0, given.at(d).spelled.find(' ')); };
  auto spelled = [&](const std::string& d) { return given.at(d).spelled; };
  for (const char* d : {"cuda_graph_impl", "cuda_graph_modules", "cuda_graph_scope_deprecated", "inference_cuda_graph_scope",
                        "recompute_modules", "recompute_granularity", "moe_layer_freq", "num_layers", "num_experts"})
    for (const auto& v : values(d))
      if (v.find_first_of("$`") != std::string::npos) return;
  const std::string args_py = "validate_args, megatron/training/arguments.py";
  const std::string config_py = "TransformerConfig.__post_init__, megatron/core/transformer/transformer_config.py";
  const std::string graph_py = "megatron/core/transformer/cuda_graph_config.py";
  // `dest`: the flag whose line the error names; `what`: the combination; `quote`: Megatron's message.
  auto refuse = [&](const std::string& dest, const std::string& what, const std::string& where, const std::string& quote) {
    fail_at(file, given.at(dest).line,
            what + ": Megatron-LM refuses it (" + where + " @" + kMegatronArgsCommit + ": \"" + quote + "\")");
  };
  const bool enable = has("enable_cuda_graph"), external = has("external_cuda_graph");
  std::string impl = value("cuda_graph_impl", "none");
  std::string impl_dest = has("cuda_graph_impl") ? "cuda_graph_impl" : "";
  static const std::vector<std::string> kImpls = {"none", "local", "transformer_engine", "full_iteration"};
  if (std::find(kImpls.begin(), kImpls.end(), impl) == kImpls.end())
    fail_at(file, given.at("cuda_graph_impl").line,
            "--cuda-graph-impl " + text_excerpt(impl, 40) + ": expected none, local, transformer_engine or full_iteration "
            "(Megatron-LM's choices, " + args_py + " @" + kMegatronArgsCommit + ")");
  // arguments.py:611-631: the deprecated switches become cuda_graph_impl.
  if (enable || external) {
    const std::string d = enable ? "enable_cuda_graph" : "external_cuda_graph";
    if (impl != "none")
      refuse(d, flag(d) + " with " + spelled("cuda_graph_impl"), args_py,
             "Do not use --enable-cuda-graph or --external-cuda-graph with --cuda-graph-impl.");
    if (enable && external)
      refuse("external_cuda_graph", "--enable-cuda-graph with --external-cuda-graph", args_py,
             "--enable-cuda-graph and --external-cuda-graph cannot be enabled at the same time.");
    impl = enable ? "local" : "transformer_engine", impl_dest = d;
  }
  // arguments.py:633-641: --cuda-graph-scope is the deprecated spelling of --cuda-graph-modules.
  if (has("cuda_graph_scope_deprecated") && !values("cuda_graph_modules").empty())
    refuse("cuda_graph_scope_deprecated", "--cuda-graph-scope with --cuda-graph-modules", args_py,
           "--cuda-graph-scope and --cuda-graph-modules cannot be used together.");
  const std::string mod_dest = has("cuda_graph_scope_deprecated") ? "cuda_graph_scope_deprecated" : "cuda_graph_modules";
  std::vector<std::string> raw = values(mod_dest);
  // _parse_cuda_graph_modules_arg: a CudaGraphModule name (megatron/core/transformer/enums.py) or a deprecated
  // spelling; normalize_cuda_graph_modules: "full" alone is the whole layer (an empty list).
  static const std::set<std::string> kModules = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"};
  static const std::set<std::string> kDeprecated = {"full_iteration", "full_iteration_inference"};
  for (const auto& v : raw)
    if (v != "full" && !kModules.count(v) && !kDeprecated.count(v))
      fail_at(file, given.at(mod_dest).line,
              flag(mod_dest) + " " + text_excerpt(v, 40) + ": expected attn, mlp, moe, moe_router, moe_preprocess, mamba, "
              "full, full_iteration or full_iteration_inference (Megatron-LM's CudaGraphModule, "
              "megatron/core/transformer/enums.py @" + kMegatronArgsCommit + ")");
  if (std::find(raw.begin(), raw.end(), "full") != raw.end()) {
    if (raw.size() > 1)
      refuse(mod_dest, spelled(mod_dest), graph_py + " normalize_cuda_graph_modules",
             "full scope cannot be used with other scopes.");
    raw.clear();
  }
  std::vector<std::string> modules;
  std::set<std::string> deprecated;
  for (const auto& v : raw) {
    if (kDeprecated.count(v)) deprecated.insert(v);
    else modules.push_back(v);
  }
  auto in_modules = [&](const std::string& m) { return std::find(modules.begin(), modules.end(), m) != modules.end(); };
  const std::string inf_given = value("inference_cuda_graph_scope", "");
  if (!inf_given.empty() && inf_given != "none" && inf_given != "layer" && inf_given != "block")
    fail_at(file, given.at("inference_cuda_graph_scope").line,
            "--inference-cuda-graph-scope " + text_excerpt(inf_given, 40) + ": expected none, layer or block "
            "(Megatron-LM's InferenceCudaGraphScope, megatron/core/transformer/enums.py @" + kMegatronArgsCommit + ")");
  std::string inf = inf_given;
  // validate_deprecated_cuda_graph_modules_migration_inputs and get_deprecated_cuda_graph_modules_migration.
  if (deprecated.size() > 1)
    refuse(mod_dest, spelled(mod_dest), graph_py, "cuda_graph_modules cannot contain multiple deprecated values at the same time");
  if (deprecated.count("full_iteration")) {
    if (impl == "transformer_engine")
      refuse(mod_dest, spelled(mod_dest) + " with " + spelled(impl_dest), graph_py,
             "cuda_graph_modules='full_iteration' cannot be combined with cuda_graph_impl='transformer_engine'.");
    if (!inf.empty() && inf != "none")
      refuse(mod_dest, spelled(mod_dest) + " with " + spelled("inference_cuda_graph_scope"), graph_py,
             "cuda_graph_modules='full_iteration' cannot be combined with inference_cuda_graph_scope='" + inf + "'.");
    impl = "full_iteration", impl_dest = mod_dest;
  }
  if (deprecated.count("full_iteration_inference")) {
    if (impl != "none" && impl != "local")
      refuse(mod_dest, spelled(mod_dest) + " with " + spelled(impl_dest), graph_py,
             "cuda_graph_modules='full_iteration_inference' cannot be combined with cuda_graph_impl='" + impl + "'.");
    if (!inf.empty() && inf != "block")
      refuse(mod_dest, spelled(mod_dest) + " with " + spelled("inference_cuda_graph_scope"), graph_py,
             "cuda_graph_modules='full_iteration_inference' cannot be combined with inference_cuda_graph_scope='" + inf + "'.");
    if (impl != "none") inf = "block";
  }
  // normalize_inference_cuda_graph_scope (unset: layer under local, else none) and ALLOWED_INFERENCE_SCOPES.
  if (inf.empty()) inf = impl == "local" ? "layer" : "none";
  if (impl == "local" ? inf == "none" : inf != "none")
    refuse(has("inference_cuda_graph_scope") ? "inference_cuda_graph_scope" : mod_dest,
           "--inference-cuda-graph-scope " + inf + " with --cuda-graph-impl " + impl, args_py,
           "Invalid inference CUDA graph scope '" + inf + "' for --cuda-graph-impl='" + impl + "'.");
  if (impl == "none") return;
  // arguments.py:1235-1249.
  if (impl == "full_iteration" && !has("check_for_nan_in_loss_and_grad"))
    refuse(impl_dest, "--cuda-graph-impl full_iteration without --no-check-for-nan-in-loss-and-grad", args_py,
           "--no-check-for-nan-in-loss-and-grad should be set with --cuda-graph-impl=full_iteration for training.");
  if (inf == "block" && has("fp8")) {
    if (value("transformer_impl", "transformer_engine") != "inference_optimized")
      refuse("fp8", "--inference-cuda-graph-scope block with " + spelled("fp8"), args_py,
             "fp8 with --inference-cuda-graph-scope=block is only supported with --transformer-impl=inference_optimized");
    if (value("fp8_recipe", "delayed") != "mxfp8")
      refuse("fp8", "--inference-cuda-graph-scope block with " + spelled("fp8"), args_py,
             "Only --fp8-recipe=mxfp8 is supported with --inference-cuda-graph-scope=block");
  }
  if (impl == "local" && has("inference_dynamic_batching_num_cuda_graphs")) {
    const double n = number("inference_dynamic_batching_num_cuda_graphs", 16);
    if (!(n > 0 || n == -1))
      refuse("inference_dynamic_batching_num_cuda_graphs", spelled("inference_dynamic_batching_num_cuda_graphs") +
                 " with --cuda-graph-impl local", args_py,
             "inference_dynamic_batching_num_cuda_graphs should be a positive integer or -1");
  }
  // arguments.py:1855-1860 and 1969-1971.
  if (number("inference_batch_times_seqlen_threshold", -1) > -1)
    refuse("inference_batch_times_seqlen_threshold", spelled("inference_batch_times_seqlen_threshold") + " with CUDA graphs (--cuda-graph-impl " + impl + ")",
           args_py, "Pipeline-parallel microbatched inference is incompatible with CUDA graphs");
  if (impl == "full_iteration" && !modules.empty())
    refuse(mod_dest, spelled(mod_dest) + " with --cuda-graph-impl full_iteration", args_py,
           "--cuda-graph-modules must be empty when --cuda-graph-impl=full_iteration.");
  // TransformerConfig.__post_init__, under cuda_graph_impl != "none".
  const std::string with_impl = " with --cuda-graph-impl " + impl;
  if (number("cpu_offloading_num_layers", 0) > 0 && impl != "full_iteration")
    refuse(impl_dest, spelled("cpu_offloading_num_layers") + with_impl, config_py, "CUDA graphs not supported with CPU offloading.");
  if (impl == "local" || impl == "transformer_engine") {
    if (impl == "local" && (in_modules("moe_router") || in_modules("moe_preprocess"))) {
      if (!in_modules("moe_router")) modules.push_back("moe_router");
      if (!in_modules("moe_preprocess")) modules.push_back("moe_preprocess");
    }
    const std::string mods = has(mod_dest) ? spelled(mod_dest) : std::string();
    if (in_modules("moe") && in_modules("moe_router"))
      refuse(mod_dest, mods, config_py, "cuda_graph_modules must not contain both moe and moe_router.");
    if (in_modules("moe_preprocess") && !in_modules("moe_router"))
      refuse(mod_dest, mods + with_impl, config_py, "moe_preprocess cuda graph is only supported with moe_router cuda graph.");
    const double experts = number("num_experts", 0);
    if (experts <= 1) {
      if (in_modules("moe") || in_modules("moe_router"))
        refuse(mod_dest, mods + (has("num_experts") ? " with " + spelled("num_experts") : std::string(" without --num-experts")),
               config_py, "moe cuda graph is only supported for MoE.");
    } else {
      const std::string freq = value("moe_layer_freq", "1");
      bool all_moe = freq == "1";
      if (!freq.empty() && (freq[0] == '[' || freq[0] == '(') && has("num_layers")) {
        const std::vector<bool> moe = moe_layer_pattern(freq, static_cast<std::int64_t>(number("num_layers", 0)),
                                                        file + ":" + std::to_string(given.at("moe_layer_freq").line));
        all_moe = std::all_of(moe.begin(), moe.end(), [](bool b) { return b; });
      }
      if (all_moe && in_modules("mlp"))
        refuse(mod_dest, mods + " on a model whose layers are all MoE (--moe-layer-freq " + freq + ")", config_py,
               "mlp cuda graph is only supported for dense layers, but not found in the model.");
      if (!has("moe_expert_capacity_factor") || !has("moe_pad_expert_input_to_capacity")) {
        if (in_modules("moe"))
          refuse(mod_dest, mods + " without --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity", config_py,
                 "moe cuda graph is only supported with drop-padding MoE.");
        if (value("moe_token_dispatcher_type", "allgather") == "alltoall" &&
            (has("moe_expert_capacity_factor") || has("moe_router_padding_for_fp8")) && in_modules("moe_preprocess"))
          refuse(mod_dest, mods + " with --moe-token-dispatcher-type alltoall and " +
                               (has("moe_expert_capacity_factor") ? spelled("moe_expert_capacity_factor") : spelled("moe_router_padding_for_fp8")),
                 config_py, "moe_preprocess cuda graph is not supported when there are DtoH copies and synchronizations in the preprocess step.");
      }
    }
  }
  // Recomputation (validate_args: --recompute-activations is selective); recompute_modules defaults to core_attn.
  const std::string gran_dest = has("recompute_activations") ? "recompute_activations" : "recompute_granularity";
  const std::string gran = has("recompute_activations") ? std::string("selective") : value("recompute_granularity", "");
  if (gran.empty()) return;
  if (gran != "selective") {
    if (impl != "full_iteration")
      refuse(gran_dest, spelled(gran_dest) + with_impl, config_py, "full recompute is only supported with full iteration CUDA graph.");
    return;
  }
  std::vector<std::string> rm = has("recompute_modules") ? values("recompute_modules") : std::vector<std::string>{"core_attn"};
  auto recomputes = [&](const std::string& m) { return std::find(rm.begin(), rm.end(), m) != rm.end(); };
  const std::string rec = spelled(gran_dest) + (has("recompute_modules") ? " " + spelled("recompute_modules") : " (recomputing core_attn)");
  if (impl == "transformer_engine" && recomputes("moe") && in_modules("moe_router"))
    refuse(mod_dest, spelled(mod_dest) + " with " + rec + with_impl, config_py,
           "moe recompute is not supported with moe_router CUDA graph with: --cuda-graph-impl transformer_engine.");
  // "full_cudagraph means either full_iteration impl or an empty per-layer scope (which captures the whole layer)".
  const bool full = impl == "full_iteration" || modules.empty();
  const std::string graphed = full ? " with whole-layer CUDA graphs (--cuda-graph-impl " + impl + (has(mod_dest) ? ", " + spelled(mod_dest) : std::string(", no --cuda-graph-modules")) + ")"
                                   : " with " + spelled(mod_dest) + with_impl;
  const double attn_dropout = number("attention_dropout", 0.1), hidden_dropout = number("hidden_dropout", 0.1);
  if (attn_dropout != 0.0 && (full || in_modules("attn")) && recomputes("core_attn"))
    refuse(impl_dest, rec + " and attention dropout " + value("attention_dropout", "0.1") + graphed, config_py,
           "attention dropout is not supported with graphed attention recomputation.");
  if (hidden_dropout != 0.0 && (((full || in_modules("mlp")) && recomputes("mlp")) || ((full || in_modules("moe")) && recomputes("moe"))))
    refuse(impl_dest, rec + " and hidden dropout " + value("hidden_dropout", "0.1") + graphed, config_py,
           "hidden dropout is not supported with graphed MLP/MoE recomputation.");
  if (has("moe_input_jitter_eps") && (full || in_modules("moe")) && recomputes("moe"))
    refuse(impl_dest, rec + " and " + spelled("moe_input_jitter_eps") + graphed, config_py,
           "moe_input_jitter_eps is not supported with graphed moe recomputation.");
}
}  // namespace

MegatronImport import_megatron_args(const MegatronLaunch& l, std::int64_t world_size, const ParamMap& overrides) {
  const std::string& file = l.file;
  std::map<std::string, Given> given;  // by dest
  std::size_t order = 0;
  const std::string at_commit = std::string("megatron/training/arguments.py @") + kMegatronArgsCommit;
  const std::string at_any = megatron_args_at("or");
  for (std::size_t i = 0; i < l.args.size(); ++i) {
    const ShellWord& w = l.args[i];
    if (!w.unresolved.empty()) fail_unresolved(file, w);
    if (!looks_like_flag(w.text))
      fail_at(file, w.line, "unexpected argument '" + text_excerpt(w.text) + "' after " + l.script +
                                " (expected a --flag)");
    std::string opt = w.text, inline_value;
    bool has_inline = false;
    if (const std::size_t eq = opt.find('='); eq != std::string::npos)
      inline_value = opt.substr(eq + 1), opt = opt.substr(0, eq), has_inline = true;
    const MegatronFlag* f = find_megatron_flag(opt);
    if (!f)
      fail_at(file, w.line, "unknown Megatron-LM flag " + text_excerpt(opt, 60) + " (not in " + at_any + ")");
    if (f->cls == MegatronFlag::kRejected)
      fail_at(file, w.line, opt + ": Megatron-LM refuses it (validate_args, megatron/training/arguments.py @" +
                                last_commit(f->commits) + "): " +
                                megatron_rejected_hint(f->dest));
    Given g;
    g.flag = f, g.line = w.line, g.order = order++, g.spelled = opt, g.written = w.written, g.var = w.var;
    const bool is_switch = f->kind == MegatronFlag::kTrue || f->kind == MegatronFlag::kFalse;
    const bool is_list = f->kind == MegatronFlag::kInts || f->kind == MegatronFlag::kFloats || f->kind == MegatronFlag::kStrs;
    std::vector<const ShellWord*> vals;
    ShellWord inline_word{inline_value, w.line, "", w.written, w.var};
    if (is_switch) {
      if (has_inline) fail_at(file, w.line, opt + " takes no value (got '" + text_excerpt(inline_value) + "')");
    } else if (has_inline) {
      vals.push_back(&inline_word);
    } else {
      while (i + 1 < l.args.size() && (l.args[i + 1].unresolved.empty() ? !looks_like_flag(l.args[i + 1].text)
                                                                        : l.args[i + 1].text.rfind("--", 0) != 0)) {
        vals.push_back(&l.args[++i]);
        if (!is_list) break;
      }
      if (vals.size() < static_cast<std::size_t>(f->min_values))
        fail_at(file, w.line, opt + " expects " + (is_list ? "one or more values" : "a value") +
                                  (i + 1 < l.args.size() ? ", got the flag " + text_excerpt(l.args[i + 1].text, 60)
                                                         : std::string(", got the end of the command")));
    }
    for (const ShellWord* v : vals) {
      if (!v->unresolved.empty()) {
        // The values of flags that change nothing simulated may stay unresolved (a data path, a checkpoint
        // directory); the others are needed.
        if (f->cls == MegatronFlag::kModel) fail_unresolved(file, *v);
      } else if (f->kind == MegatronFlag::kInt || f->kind == MegatronFlag::kInts) {
        std::int64_t x;
        if (!parse_int(v->text, x))
          fail_at(v->line ? file : file, v->line, opt + " expects an integer, got '" + text_excerpt(v->text) + "'");
      } else if (f->kind == MegatronFlag::kFloat || f->kind == MegatronFlag::kFloats) {
        double x;
        if (!parse_float(v->text, x))
          fail_at(file, v->line, opt + " expects a number, got '" + text_excerpt(v->text) + "'");
      }
      g.values.push_back(v->text);
      g.spelled += " " + v->text;
    }
    given[f->dest] = g;  // argparse: the last occurrence wins
  }
  check_cuda_graph_flags(file, given);

  // What each given flag became, in script order.
  std::map<std::size_t, std::pair<int, std::string>> listed;  // order -> (0 modelled, 1 ignored, 2 not modelled)
  auto mark = [&](const std::string& dest, int cls) {
    auto it = given.find(dest);
    if (it != given.end()) listed[it->second.order] = {cls, it->second.spelled};
  };
  auto has = [&](const std::string& d) { return given.count(d) > 0; };
  auto value = [&](const std::string& d) -> const std::string& { return given.at(d).values.at(0); };
  auto integer = [&](const std::string& d, std::int64_t dflt) {
    if (!has(d)) return dflt;
    std::int64_t v = 0;
    parse_int(value(d), v);
    return v;
  };
  auto required = [&](const std::string& d, const char* option) {
    if (!has(d))
      throw InputError(file, std::string(option) + " is required (Megatron-LM has no default: " + at_commit +
                                 " validate_args)");
  };
  for (const auto& [dest, g] : given)
    mark(dest, g.flag->cls == MegatronFlag::kModel ? 0 : g.flag->cls == MegatronFlag::kNoEffect ? 1 : 2);
  // A not-modelled flag given its own default value changes nothing (e.g. --transformer-impl transformer_engine).
  for (const auto& [dest, g] : given)
    if (g.flag->cls == MegatronFlag::kNotModelled && *g.flag->dflt && g.values.size() == 1 && g.values[0] == g.flag->dflt)
      mark(dest, 1);

  MegatronImport out;
  Json& p = out.params;
  // Where the flag of `dest` is written, for the parameter `key` it sets (errors the generator raises name it).
  auto from = [&](const std::string& key, const std::string& dest) {
    const auto it = given.find(dest);
    if (it == given.end()) return;
    const Given& g = it->second;
    ParamOrigin o;
    o.at = file + ":" + std::to_string(g.written ? g.written : g.line);
    o.name = g.spelled.substr(0, g.spelled.find(' '));
    if (!g.var.empty())
      o.name += " (in $" + g.var + (g.written ? std::string() : std::string(" of --var")) + ", expanded on line " +
                std::to_string(g.line) + ")";
    out.origins[key] = o;
  };
  // Required shape and batch (validate_args: required_args and `assert args.micro_batch_size is not None`).
  // A hybrid model (pretrain_hybrid.py) is its --hybrid-layer-pattern, which sets num_layers
  // (megatron/training/arguments.py:787-795 @d98e8a64); pretrain_gpt.py builds a GPT model and never reads it.
  const bool hybrid_script = l.script != "pretrain_gpt.py";
  const bool pattern = has("hybrid_layer_pattern") || has("hybrid_override_pattern");
  if (hybrid_script && !pattern && !has("hybrid_attention_ratio") && !has("hybrid_mlp_ratio"))
    throw InputError(file, l.script + " without --hybrid-layer-pattern: fabricsim models Megatron's hybrid model from its pattern");
  if (!hybrid_script && (pattern || has("hybrid_attention_ratio") || has("hybrid_mlp_ratio")))
    throw InputError(file, "pretrain_gpt.py builds a GPT model and does not read the hybrid pattern flags: use pretrain_hybrid.py");
  if (!pattern) required("num_layers", "--num-layers");
  required("hidden_size", "--hidden-size");
  required("num_attention_heads", "--num-attention-heads");
  required("max_position_embeddings", "--max-position-embeddings");
  required("micro_batch_size", "--micro-batch-size");
  required("seq_length", "--seq-length");

  const std::set<std::string> names = gpt_param_names();
  for (const auto& [dest, g] : given) {
    const std::string key = g.flag->cls == MegatronFlag::kModel ? megatron_param_name(dest) : std::string();
    if (key.empty()) continue;
    if (!names.count(key))
      throw InputError(file + ":" + std::to_string(g.line),
                       "internal: " + g.spelled + " is classed as modelled but the gpt generator has no parameter " + key);
    from(key, dest);
    switch (g.flag->kind) {
      case MegatronFlag::kTrue: p[key] = true; break;
      case MegatronFlag::kFalse: p[key] = false; break;
      case MegatronFlag::kInt: p[key] = integer(dest, 0); break;
      case MegatronFlag::kFloat: p[key] = std::strtod(value(dest).c_str(), nullptr); break;
      default: p[key] = value(dest); break;
    }
  }
  const std::int64_t tp = integer("tensor_model_parallel_size", 1), pp = integer("pipeline_model_parallel_size", 1);
  // Sizes below 1 before anything divides or pads by them (a vocabulary padded to 128 x 0 was an internal error:
  // found by fuzzing).
  for (const auto& [dest, option, v] : {std::tuple<const char*, const char*, std::int64_t>{"tensor_model_parallel_size", "--tensor-model-parallel-size", tp},
                                         {"pipeline_model_parallel_size", "--pipeline-model-parallel-size", pp}})
    if (v < 1) fail_at(file, given.at(dest).line, std::string(option) + " must be at least 1 (got " + std::to_string(v) + ")");
  p["tensor_model_parallel_size"] = tp;
  p["pipeline_model_parallel_size"] = pp;
  from("tensor_model_parallel_size", "tensor_model_parallel_size");
  from("pipeline_model_parallel_size", "pipeline_model_parallel_size");
  if (world_size > 0) p["world_size"] = world_size;
  // Precision: Megatron-LM trains in fp32 unless --bf16 or --fp16 (fabricsim does not model fp32 training).
  if (!has("bf16") && !has("fp16"))
    throw InputError(file, "neither --bf16 nor --fp16: Megatron-LM would train in fp32, which fabricsim does not model");
  // Recompute: none unless asked; --recompute-activations = selective (validate_args, "if args.recompute_activations").
  p["recompute_granularity"] = has("recompute_activations") ? std::string("selective")
                               : has("recompute_granularity") ? value("recompute_granularity") : std::string("none");
  from("recompute_granularity", has("recompute_activations") ? "recompute_activations" : "recompute_granularity");
  // Lists (--recompute-modules, --offload-modules, --hierarchical-context-parallel-sizes; nargs): the generator's
  // space-separated lists.
  for (const char* d : {"recompute_modules", "offload_modules", "hierarchical_context_parallel_sizes"})
    if (has(d)) {
      std::string m;
      for (const auto& v : given.at(d).values) m += (m.empty() ? "" : " ") + v;
      p[d] = m;
      from(d, d);
    }
  // --tp-comm-overlap-cfg: the YAML file, read only with --tp-comm-overlap (_initialize_tp_communicators).
  if (has("tp_comm_overlap_cfg")) {
    if (has("tp_comm_overlap")) {
      p["tp_comm_overlap_cfg"] = read_megatron_ub_cfg(file, value("tp_comm_overlap_cfg"), given.at("tp_comm_overlap_cfg").line);
      from("tp_comm_overlap_cfg", "tp_comm_overlap_cfg");
    } else {
      mark("tp_comm_overlap_cfg", 1);
    }
  }
  // --defer-embedding-wgrad-compute needs gradient accumulation fusion (ModelParallelConfig.__post_init__ at
  // NVIDIA/Megatron-LM@d98e8a64: "Cannot defer embedding wgrad compute when gradient accumulation fusion is not used").
  if (has("defer_embedding_wgrad_compute") && has("gradient_accumulation_fusion"))
    fail_at(file, given.at("gradient_accumulation_fusion").line,
            "--no-gradient-accumulation-fusion with --defer-embedding-wgrad-compute: Megatron-LM refuses it (\"Cannot "
            "defer embedding wgrad compute when gradient accumulation fusion is not used\")");
  // FFN: validate_args' default, 4h, or with --swiglu int(4h * 2/3 / 64) * 64.
  const std::int64_t h = integer("hidden_size", 0);
  p["ffn_hidden_size"] = has("ffn_hidden_size") ? integer("ffn_hidden_size", 0)
                         : has("swiglu")         ? static_cast<std::int64_t>((4.0 * double(h) * 2.0 / 3.0) / 64.0) * 64
                                                 : 4 * h;
  from("ffn_hidden_size", "ffn_hidden_size");
  // GQA: --num-query-groups counts only with --group-query-attention (default 1 group then).
  if (has("group_query_attention")) p["num_query_groups"] = integer("num_query_groups", 1), from("num_query_groups", "num_query_groups");
  else mark("num_query_groups", 1);
  // Position embeddings: --use-rotary-position-embeddings is the legacy spelling of rope.
  if (has("use_rotary_position_embeddings"))
    p["position_embedding_type"] = "rope", from("position_embedding_type", "use_rotary_position_embeddings");
  const std::string pos = p.contains("position_embedding_type") ? p["position_embedding_type"].get<std::string>()
                                                                : std::string("learned_absolute");
  const std::int64_t seq = integer("seq_length", 0), maxpos = integer("max_position_embeddings", 0);
  if (maxpos < seq)
    fail_at(file, given.at("max_position_embeddings").line,
            "--max-position-embeddings (" + std::to_string(maxpos) + ") is below --seq-length (" + std::to_string(seq) +
                "): Megatron-LM refuses it");
  // A learned position table longer than the sequence holds more weights than fabricsim counts (it sizes the
  // table by seq_length); with rope there is no table.
  if (pos == "learned_absolute" && maxpos != seq) mark("max_position_embeddings", 2);
  // Attention backend: Megatron's AttnBackend names. auto (Megatron's default, so also when the flag is absent)
  // leaves the choice to Transformer Engine, which is the generator's `auto` (gpt.cpp resolved_attention_backend:
  // cuDNN fused attention from H100 on); local is Megatron-Core's own unfused DotProductAttention.
  {
    const std::string a = has("attention_backend") ? value("attention_backend") : std::string("auto");
    p["attention_backend"] = a == "local" ? std::string("unfused") : a;
    from("attention_backend", "attention_backend");
  }
  // Context-parallel communication: one type for every layer, or one per layer (space-separated).
  if (has("cp_comm_type")) {
    const auto& v = given.at("cp_comm_type").values;
    std::string types;
    for (const auto& x : v) types += (types.empty() ? "" : " ") + x;
    p["cp_comm_type"] = std::any_of(v.begin(), v.end(), [&](const std::string& x) { return x != v[0]; }) ? types : v[0];
    from("cp_comm_type", "cp_comm_type");
  }
  // Load balancing: nargs lists, one entry per type (a list of one becomes the value, validate_args @d98e8a64
  // arguments.py:1661-1664; TransformerConfig asserts one coefficient per type). fabricsim models one type.
  if (has("moe_router_load_balancing_type") || has("moe_aux_loss_coeff")) {
    const std::vector<std::string> types = has("moe_router_load_balancing_type")
                                               ? given.at("moe_router_load_balancing_type").values
                                               : std::vector<std::string>{"aux_loss"};
    const std::vector<std::string> coeffs = has("moe_aux_loss_coeff") ? given.at("moe_aux_loss_coeff").values
                                                                      : std::vector<std::string>{"0.0"};
    if (types.size() > 1)
      fail_at(file, given.at("moe_router_load_balancing_type").line,
              "--moe-router-load-balancing-type with " + std::to_string(types.size()) +
                  " types: fabricsim models one load-balancing type per run");
    if (coeffs.size() > 1)
      fail_at(file, given.at("moe_aux_loss_coeff").line,
              "--moe-aux-loss-coeff with " + std::to_string(coeffs.size()) +
                  " values for one load-balancing type: Megatron-LM asserts one coefficient per type");
    if (has("moe_router_load_balancing_type")) p["moe_router_load_balancing_type"] = types[0];
    if (has("moe_aux_loss_coeff")) p["moe_aux_loss_coeff"] = std::strtod(coeffs[0].c_str(), nullptr);
    from("moe_router_load_balancing_type", "moe_router_load_balancing_type");
    from("moe_aux_loss_coeff", "moe_aux_loss_coeff");
  }
  // Sequence parallelism is switched off with TP 1 (validate_args).
  if (has("sequence_parallel")) {
    if (tp > 1) p["sequence_parallel"] = true, from("sequence_parallel", "sequence_parallel");
    else mark("sequence_parallel", 1);
  }
  // Interleaving: --num-virtual-stages-per-pipeline-rank is virtual_pipeline_model_parallel_size; P2P overlap is on
  // by default (--no-overlap-p2p-communication) and only with the interleaved schedule.
  bool interleaved = has("num_virtual_stages_per_pipeline_rank") || has("num_layers_per_virtual_pipeline_stage");
  // validate_args: a pipeline_model_parallel_layout of more virtual stages than PP ranks sets the virtual stages.
  if (has("pipeline_model_parallel_layout"))
    interleaved = interleaved || std::int64_t(parse_pipeline_layout(value("pipeline_model_parallel_layout"),
                                                                     file + ":" + std::to_string(given.at("pipeline_model_parallel_layout").line) +
                                                                         ": --pipeline-model-parallel-layout").size()) > pp;
  if (interleaved && !has("overlap_p2p_comm")) p["overlap_p2p_comm"] = true;
  if (!interleaved) mark("overlap_p2p_comm", 1);
  // Data-parallel sharding (validate_args: optim_grads_params turns on overlap_param_gather and overlap_grad_reduce,
  // optim_grads overlap_grad_reduce); Megatron-LM shards by it only with --use-custom-fsdp, or its 2026 name
  // --use-megatron-fsdp (validate_args @d98e8a64: "if args.use_megatron_fsdp: ... args.use_custom_fsdp = True").
  if (has("data_parallel_sharding_strategy")) {
    const std::string s = value("data_parallel_sharding_strategy");
    if (has("use_custom_fsdp") || has("use_megatron_fsdp")) {
      p["data_parallel_sharding_strategy"] = s;
      from("data_parallel_sharding_strategy", "data_parallel_sharding_strategy");
      if (s == "no_shard") {
        // Megatron-FSDP unsharded, not Megatron-Core's DDP (training.py get_model @d98e8a64 wraps the model in
        // FullyShardedDataParallel whatever the strategy); its --use-distributed-optimizer (forced on by
        // validate_args for Megatron-FSDP v1) shards nothing there.
        p["use_megatron_fsdp"] = true;
        from("use_megatron_fsdp", has("use_megatron_fsdp") ? "use_megatron_fsdp" : "use_custom_fsdp");
        if (has("use_distributed_optimizer")) p.erase("use_distributed_optimizer"), mark("use_distributed_optimizer", 1);
      }
    } else if (s != "no_shard") {
      mark("data_parallel_sharding_strategy", 2);
    }
    if (s == "optim_grads_params") p["overlap_param_gather"] = true;
    if (s == "optim_grads_params" || s == "optim_grads") p["overlap_grad_reduce"] = true;
  } else if (has("use_megatron_fsdp")) {
    // --use-megatron-fsdp exists only in d98e8a64, whose default strategy is optim_grads_params (arguments.py
    // @d98e8a64 _add_distributed_args); that validate_args no longer derives the overlaps from it.
    p["data_parallel_sharding_strategy"] = "optim_grads_params";
  }
  // --optimizer: Adam and SGD are priced (their state and step); muon, lion, soap, ... stay not modelled.
  if (has("optimizer")) {
    const std::string o = value("optimizer");
    if (o == "adam" || o == "sgd") p["optimizer"] = o, from("optimizer", "optimizer");
    else mark("optimizer", 2);
  }
  // --chunked-optimizer-state-offload, --optimizer-state-offload-chunk-size-mb, --optimizer-state-offload-fraction
  // and the deprecated --offload-optimizer-states (dev @d48bd6be: the same offloader with chunk size 0 and fraction
  // 1.0 unless those are given, megatron/core/optimizer/optimizer_config.py:418-430). Fraction 0 turns it off
  // (optimizer_config.py:438; training.py:2748-2752); the chunk size and fraction are read only with the switch.
  // The generator checks the bounds and the optimizer rules (workloads/gpt.cpp); the training-script rules are here:
  // megatron/training/arguments.py:2039-2069 @d48bd6be (checkpoint format, async save, full-iteration CUDA graphs)
  // and optimizer_config.py:453-455 (optimizer CUDA graphs).
  {
    const bool sw = has("chunked_optimizer_state_offload") || has("offload_optimizer_states");
    const std::string flag = has("chunked_optimizer_state_offload") ? "--chunked-optimizer-state-offload" : "--offload-optimizer-states";
    const char* knobs[] = {"optimizer_state_offload_chunk_size_mb", "optimizer_state_offload_fraction"};
    const bool off = sw && has("optimizer_state_offload_fraction") &&
                     std::strtod(value("optimizer_state_offload_fraction").c_str(), nullptr) == 0.0;
    if (!sw || off) {
      for (const char* d : {"chunked_optimizer_state_offload", "offload_optimizer_states", knobs[0], knobs[1]})
        if (has(d)) p.erase(d), mark(d, 1);
    } else {
      const bool saves_optim = !has("no_save_optim") || !has("no_load_optim");
      if (saves_optim && has("ckpt_format") && value("ckpt_format") != "torch_dist")
        fail_at(file, given.at("ckpt_format").line,
                flag + " with --ckpt-format " + text_excerpt(value("ckpt_format")) +
                    ": Megatron-LM needs --ckpt-format torch_dist when optimizer state is saved or loaded "
                    "(megatron/training/arguments.py:2055-2060 @d48bd6be; or give --no-save-optim and --no-load-optim)");
      if (!has("no_save_optim") && has("async_save"))
        fail_at(file, given.at("async_save").line,
                flag + " with --async-save: Megatron-LM refuses it when optimizer state is saved "
                       "(megatron/training/arguments.py:2061-2066 @d48bd6be; or give --no-save-optim)");
      if (has("cuda_graph_impl") && value("cuda_graph_impl") == "full_iteration")
        fail_at(file, given.at("cuda_graph_impl").line,
                flag + " with --cuda-graph-impl full_iteration: Megatron-LM refuses it (megatron/training/arguments.py:"
                       "2067-2069 @d48bd6be)");
      if (has("optimizer_cuda_graph"))
        fail_at(file, given.at("optimizer_cuda_graph").line,
                flag + " with --optimizer-cuda-graph: Megatron-LM refuses it (\"chunked optimizer state offload does not "
                       "support optimizer CUDA graphs\", megatron/core/optimizer/optimizer_config.py:453-455 @d48bd6be)");
    }
  }
  // --moe-flex-dispatcher-backend: deepep and hybridep run the dispatch the flex model prices (workloads/gpt_layout.cpp
  // cites both kernels); ncclep is not modelled. Without the flex dispatcher the backend is not read.
  if (has("moe_flex_dispatcher_backend")) {
    const std::string b = value("moe_flex_dispatcher_backend");
    const bool flex = (has("moe_token_dispatcher_type") && value("moe_token_dispatcher_type") == "flex") || has("moe_enable_deepep");
    if (!flex) mark("moe_flex_dispatcher_backend", 1);
    else if (b != "deepep" && b != "hybridep") mark("moe_flex_dispatcher_backend", 2);
  }
  // --optimizer-offload-fraction and --overlap-cpu-optimizer-d2h-h2d are read only with --optimizer-cpu-offload
  // (megatron/core/optimizer/__init__.py:504-544 @d98e8a64): alone they change nothing.
  if (!has("optimizer_cpu_offload"))
    for (const char* d : {"optimizer_offload_fraction", "overlap_cpu_optimizer_d2h_h2d"})
      if (has(d)) p.erase(d), mark(d, 1);
  // --torch-fsdp2-no-reshard-after-forward (dest torch_fsdp2_reshard_after_forward, store_false): FSDP2's
  // reshard_after_forward False, fabricsim's fsdp_reshard_after_forward never (torch FSDP2 only: Megatron reads it
  // only when it builds TorchFullyShardedDataParallel, megatron/training/training.py @d98e8a64).
  if (has("torch_fsdp2_reshard_after_forward")) {
    if (has("use_torch_fsdp2"))
      p["fsdp_reshard_after_forward"] = "never", from("fsdp_reshard_after_forward", "torch_fsdp2_reshard_after_forward");
    else mark("torch_fsdp2_reshard_after_forward", 1);
  }
  // Transformer Engine (the default) is what fabricsim prices; Megatron-Core's local layers are not.
  if (has("transformer_impl") && value("transformer_impl") != "transformer_engine") mark("transformer_impl", 2);
  // Linear biases: fabricsim gives LayerNorm models biases and RMSNorm models none.
  const std::string norm = p.contains("normalization") ? p["normalization"].get<std::string>() : std::string("LayerNorm");
  if (has("add_bias_linear") && norm != "RMSNorm") mark("add_bias_linear", 2);
  // Vocabulary, as megatron/training/tokenizer/tokenizer.py builds it (@1e057005, build_tokenizer): NullTokenizer
  // has --vocab-size tokens plus its end-of-document token, TikTokenizer --vocab-size (default 2^17), GPT-2's BPE
  // the 50,257 entries of its vocabulary file (Radford et al. 2019, Sec. 2.2); the other tokenizers read the size
  // from their files. Padded as _vocab_size_with_padding does: up to a multiple of make_vocab_size_divisible_by
  // (default 128) x tensor_model_parallel_size.
  if (!overrides.count("padded_vocab_size") && has("padded_vocab_size")) {
    // --padded-vocab-size (@d98e8a64) is the model's vocabulary as given: "If not provided, it will be
    // automatically calculated from vocab-size".
    p["padded_vocab_size"] = integer("padded_vocab_size", 0);
    from("padded_vocab_size", "padded_vocab_size");
    if (has("vocab_size")) mark("vocab_size", 1);
  } else if (!overrides.count("padded_vocab_size")) {
    const std::string tok = has("tokenizer_type") ? value("tokenizer_type") : std::string();
    std::int64_t vocab = 0;
    if (tok == "NullTokenizer") {
      if (!has("vocab_size")) throw InputError(file, "--tokenizer-type NullTokenizer needs --vocab-size (Megatron-LM asserts it)");
      vocab = integer("vocab_size", 0) + 1;
    } else if (tok == "TikTokenizer") {
      vocab = integer("vocab_size", 131072);
    } else if (tok == "GPT2BPETokenizer") {
      vocab = 50257;
    } else {
      throw InputError(file, "the vocabulary size comes from the tokenizer's files (" +
                                 (tok.empty() ? std::string("no --tokenizer-type") : "--tokenizer-type " + tok) +
                                 "), which the importer does not read: give --param padded_vocab_size=N (N padded as "
                                 "Megatron-LM prints it: 'padded vocab (size: ...) ... (new size: N)')");
    }
    if (tok != "NullTokenizer" && tok != "TikTokenizer") mark("vocab_size", 1);
    const std::int64_t multiple = integer("make_vocab_size_divisible_by", 128) * tp;
    if (multiple < 1 && given.count("make_vocab_size_divisible_by"))
      fail_at(file, given.at("make_vocab_size_divisible_by").line, "--make-vocab-size-divisible-by must be positive");
    p["padded_vocab_size"] = (vocab + multiple - 1) / multiple * multiple;
  }
  // Global batch: default micro_batch_size x data-parallel size (validate_args).
  if (has("global_batch_size")) {
    p["global_batch_size"] = integer("global_batch_size", 0);
    from("global_batch_size", "global_batch_size");
  } else {
    const std::int64_t cp = integer("context_parallel_size", 1), mbs = integer("micro_batch_size", 1);
    if (world_size <= 0 || world_size % (tp * pp * cp))
      throw InputError(file, "no --global-batch-size, and the world size (" + std::to_string(world_size) +
                                 ") is not a multiple of TP x PP x CP for Megatron-LM's default (micro batch x data-parallel size)");
    p["global_batch_size"] = mbs * (world_size / (tp * pp * cp));
  }
  // --param overrides (typed as JSON would give them).
  for (const auto& [k, v] : overrides) p[k] = param_value_json(v), out.origins[k] = {"--param " + k, ""};
  for (const auto& [o, entry] : listed)
    (entry.first == 0 ? out.modelled : entry.first == 1 ? out.ignored : out.not_modelled).push_back(entry.second);
  return out;
}

// ---- Step 3: the scenario ----

Json scenario_for_launch(const MegatronLaunch& l, const std::string& topology, const ParamMap& overrides_in,
                         const LaunchSource& source, ParamOrigins* origins) {
  const std::string& path = l.file;
  const ImportOverrides split = split_import_overrides(topology, overrides_in);
  const ParamMap& overrides = split.importer;
  const std::int64_t launched = l.nproc_per_node && l.nnodes ? l.nproc_per_node * l.nnodes
                                : l.nproc_per_node          ? l.nproc_per_node
                                                            : 0;
  std::int64_t gpus = 0;
  Json topo = topology_for_ranks(topology, launched, &gpus, split.topology);
  if (launched > gpus) {
    const std::string from = !source.world_from.empty()
                                 ? source.world_from
                                 : "--nproc-per-node " + std::to_string(l.nproc_per_node) + " x --nnodes " +
                                       std::to_string(l.nnodes ? l.nnodes : 1);
    throw InputError(path + (l.line ? ":" + std::to_string(l.line) : std::string()),
                     "the launcher starts " + std::to_string(launched) + " processes (" + from + ") but " +
                         gpus_shortfall(topology, split.topology, gpus, launched, true));
  }
  const MegatronImport im = import_megatron_args(l, launched ? launched : gpus, overrides);
  if (origins) {
    // A launch an importer built names its own keys; a flag it generated from a default names nothing.
    *origins = im.origins;
    if (!source.names.empty())
      for (auto it = origins->begin(); it != origins->end();) {
        if (it->second.at.rfind("--param ", 0) == 0) {
          ++it;
          continue;
        }
        const auto p = source.paths.find(it->second.name.substr(0, it->second.name.find(' ')));
        if (p == source.paths.end()) {
          it = origins->erase(it);
        } else {
          it->second.name = p->second;
          ++it;
        }
      }
    // The launcher's world size, where the script's command line gives it.
    if (launched && source.world_from.empty() && l.line && !origins->count("world_size"))
      (*origins)["world_size"] = {path + ":" + std::to_string(l.line),
                                  l.nnodes ? "--nproc-per-node x --nnodes" : "--nproc-per-node"};
  }
  // The user's names for the flags, each once, after the importer's own entries.
  auto named = [&](std::vector<std::string> out, const std::vector<std::string>& flags) {
    for (const auto& f : flags) {
      const auto it = source.names.find(f.substr(0, f.find(' ')));
      const std::string n = it == source.names.end() ? f : it->second;
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    return out;
  };
  const std::vector<std::string> not_modelled = named(source.not_modelled, im.not_modelled);
  const std::vector<std::string> ignored = named(source.ignored, im.ignored);
  return imported_gpt_scenario(topo, im.params, source.origin, not_modelled, ignored);
}

Json imported_gpt_scenario(const Json& topology, const Json& params, const std::string& origin,
                           const std::vector<std::string>& not_modelled, const std::vector<std::string>& ignored) {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  Json notes = Json::array();
  notes.push_back(origin);
  if (!not_modelled.empty()) notes.push_back("not modelled (they change the step; fabricsim does not simulate them): " + join(not_modelled));
  if (!ignored.empty()) notes.push_back("ignored (no effect on step time): " + join(ignored));
  Json doc;
  doc["topology"] = topology;
  doc["workload"] = {{"generator", "gpt"}, {"params", params}, {"notes", notes}};
  return doc;
}

void note_unknown_keys(Json& scenario, const std::vector<std::string>& unknown) {
  if (unknown.empty()) return;
  std::string s;
  for (const auto& u : unknown) s += (s.empty() ? "" : ", ") + u;
  scenario["workload"]["notes"].push_back("unknown keys ignored (--ignore-unknown): " + s);
}

Json scenario_for_megatron(const std::string& path, const std::string& text, const std::string& topology,
                           const ParamMap& overrides, const std::map<std::string, std::string>& vars,
                           ParamOrigins* origins) {
  LaunchSource source;
  source.origin = "imported from the Megatron-LM launch " + path + " (flags of " + megatron_args_at("and") + ")";
  Json doc = scenario_for_launch(read_megatron_launch(text, path, vars), topology, overrides, source, origins);
  // TFLOP/s in the count the launched Megatron-LM logs: megatron/training/training.py counts causal attention as
  // half of the s x s product from NVIDIA/Megatron-LM@8873b55d6a (2025-03-06) on, an ancestor of both commits whose
  // flags are read (kMegatronArgsCommits), so the import states megatron-core-causal unless --param says otherwise.
  Json& params = doc["workload"]["params"];
  if (!params.contains("flops_convention")) params["flops_convention"] = "megatron-core-causal";
  return doc;
}

}  // namespace fabricsim::workloads
