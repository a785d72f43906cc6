// A strict JSON parser and a UTF-8 check, for the tests that read laptime's JSON (reliability,
// output) and the API fuzzer. Plain C++, no doctest; reliability_support.hpp includes it, so its
// includers have it too.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reliability {

// ---------------------------------------------------------------------------------------------
// UTF-8 and JSON

/// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF).
inline bool utf8_valid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    int len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c < 0x80) {
      ++p;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (end - p < len) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (int i = 2; i < len; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
    }
    p += len;
  }
  return true;
}

/// A parsed JSON value (RFC 8259). Objects keep their members in order.
struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object };
  Type type = Type::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  bool is_null() const { return type == Type::Null; }
  bool is_number() const { return type == Type::Number; }
  bool is_string() const { return type == Type::String; }
  bool is_array() const { return type == Type::Array; }
  bool is_object() const { return type == Type::Object; }

  /// The member `key` of an object; nullptr if absent or not an object.
  const Json* get(std::string_view key) const {
    if (type != Type::Object) return nullptr;
    for (const auto& m : object) {
      if (m.first == key) return &m.second;
    }
    return nullptr;
  }
};

/// Strict JSON: no trailing commas, no comments, no NaN, strings of valid UTF-8 with no raw
/// control characters, \u escapes with paired surrogates, one value and only whitespace around it.
class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  /// The value, or nullptr with error() saying where and why.
  std::unique_ptr<Json> parse() {
    auto v = std::make_unique<Json>();
    skip_ws();
    if (!value(*v, 0)) return nullptr;
    skip_ws();
    if (pos_ != s_.size()) return fail("text after the value");
    if (!utf8_valid(s_)) return fail("not valid UTF-8");
    return v;
  }

  const std::string& error() const { return error_; }

 private:
  static constexpr int kMaxDepth = 64;

  std::nullptr_t fail(const char* what) {
    if (error_.empty()) error_ = std::string(what) + " at byte " + std::to_string(pos_);
    return nullptr;
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_ws() {
    while (!at_end() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("bad literal"), false;
    pos_ += word.size();
    return true;
  }

  bool value(Json& out, int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply"), false;
    switch (peek()) {
      case '{':
        return object(out, depth);
      case '[':
        return array(out, depth);
      case '"':
        out.type = Json::Type::String;
        return string(out.string);
      case 't':
        out.type = Json::Type::Bool;
        out.boolean = true;
        return literal("true");
      case 'f':
        out.type = Json::Type::Bool;
        return literal("false");
      case 'n':
        out.type = Json::Type::Null;
        return literal("null");
      default:
        out.type = Json::Type::Number;
        return number(out.number);
    }
  }

  bool object(Json& out, int depth) {
    out.type = Json::Type::Object;
    ++pos_;  // {
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') return fail("expected a member name"), false;
      std::string key;
      if (!string(key)) return false;
      skip_ws();
      if (peek() != ':') return fail("expected ':'"), false;
      ++pos_;
      skip_ws();
      Json v;
      if (!value(v, depth + 1)) return false;
      out.object.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}'"), false;
    }
  }

  bool array(Json& out, int depth) {
    out.type = Json::Type::Array;
    ++pos_;  // [
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      Json v;
      if (!value(v, depth + 1)) return false;
      out.array.push_back(std::move(v));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']'"), false;
    }
  }

  bool hex4(unsigned& out) {
    if (s_.size() - pos_ < 4) return fail("short \\u escape"), false;
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        return fail("bad hex digit in \\u escape"), false;
      }
    }
    return true;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  bool string(std::string& out) {
    ++pos_;  // "
    for (;;) {
      if (at_end()) return fail("unterminated string"), false;
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return fail("raw control character in a string"), false;
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) return fail("unterminated escape"), false;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xdc00 && cp <= 0xdfff) return fail("lone low surrogate"), false;
          if (cp >= 0xd800 && cp <= 0xdbff) {
            unsigned low = 0;
            if (s_.substr(pos_, 2) != "\\u") return fail("lone high surrogate"), false;
            pos_ += 2;
            if (!hex4(low)) return false;
            if (low < 0xdc00 || low > 0xdfff) return fail("bad surrogate pair"), false;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          return fail("bad escape"), false;
      }
    }
  }

  bool number(double& out) {
    const std::size_t begin = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++pos_;
    } else {
      return fail("expected a value"), false;
    }
    if (peek() == '.') {
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) return fail("expected a digit after '.'"), false;
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) return fail("expected an exponent"), false;
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    out = std::strtod(std::string(s_.substr(begin, pos_ - begin)).c_str(), nullptr);
    return true;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  std::string error_;
};

/// Parses `text`; on failure returns nullptr and, if given, sets *error.
inline std::unique_ptr<Json> parse_json(std::string_view text, std::string* error = nullptr) {
  JsonParser p(text);
  auto v = p.parse();
  if (!v && error != nullptr) *error = p.error();
  return v;
}

/// The entry of results JSON's "measurements" named `name`, or nullptr.
inline const Json* find_measurement(const Json& results, std::string_view name) {
  const Json* ms = results.get("measurements");
  if (ms == nullptr || !ms->is_array()) return nullptr;
  for (const Json& m : ms->array) {
    const Json* n = m.get("name");
    if (n != nullptr && n->is_string() && n->string == name) return &m;
  }
  return nullptr;
}

}  // namespace reliability
