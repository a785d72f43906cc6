// laptime internals: names. The one home for comparing, hashing and quoting a measurement or range
// name, and for the per-thread cache that maps a caller's name to what a component keeps for it.
//
// A name is arbitrary bytes given as std::string_view (a literal, a std::string, a Python str).
// Components intern each distinct text once (process-wide, under a lock) and keep, per thread, a
// NameCache keyed by the caller's pointer and length: a hit costs a multiply, a few compares and
// an inline byte compare against the interned text, no lock and no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// a == b, inlined for the short texts names are: libc's memcmp is a call through the PLT, which
/// costs as much as the rest of a cache hit. Overlapping word loads, no byte loop above 3 bytes.
LAPTIME_ALWAYS_INLINE bool same_text(std::string_view a, std::string_view b) noexcept {
  const std::size_t n = a.size();
  if (n != b.size()) return false;
  const char* x = a.data();
  const char* y = b.data();
  if (n >= 8) {
    if (n > 64) return std::memcmp(x, y, n) == 0;
    std::uint64_t u = 0;
    std::uint64_t v = 0;
    std::uint64_t diff = 0;
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      std::memcpy(&u, x + i, 8);
      std::memcpy(&v, y + i, 8);
      diff |= u ^ v;
    }
    std::memcpy(&u, x + n - 8, 8);
    std::memcpy(&v, y + n - 8, 8);
    return (diff | (u ^ v)) == 0;
  }
  if (n >= 4) {
    std::uint32_t u1 = 0, v1 = 0, u2 = 0, v2 = 0;
    std::memcpy(&u1, x, 4);
    std::memcpy(&v1, y, 4);
    std::memcpy(&u2, x + n - 4, 4);
    std::memcpy(&v2, y + n - 4, 4);
    return ((u1 ^ v1) | (u2 ^ v2)) == 0;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return false;
  }
  return true;
}

/// FNV-1a's steps over the text (with the offset NVTX's colours have always used, not FNV's
/// published one): stable across runs and processes, so a name keeps its colour.
inline std::uint64_t name_hash(std::string_view text) noexcept {
  std::uint64_t h = 1469598103934665603ULL;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

/// The hash of a name's text for the tables that find a name by content (TextTable): 8 bytes a
/// step, each word xor-ed in, multiplied and shifted down (a bijection of the word, so two texts
/// of one length that differ in one word never collide), the length in the seed, then murmur3's
/// 64-bit finaliser. A text of 8 bytes or less is one or two overlapping loads. Deterministic (no
/// seed, no address). Not name_hash: that one picks a name's NVTX colour and must not change.
inline std::uint64_t text_hash(std::string_view text) noexcept {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  const char* p = text.data();
  const std::size_t n = text.size();
  std::uint64_t h = static_cast<std::uint64_t>(n) * 0xC2B2AE3D27D4EB4FULL + kMul;
  std::uint64_t w = 0;
  if (n > 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * kMul;
      h ^= h >> 29;
    }
    std::memcpy(&w, p + n - 8, 8);  // the last 8 bytes, overlapping the loop's last word
  } else if (n >= 4) {
    std::uint32_t lo = 0;
    std::uint32_t hi = 0;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    w = lo | (static_cast<std::uint64_t>(hi) << 32);
  } else if (n > 0) {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    w = u[0] | (static_cast<std::uint64_t>(u[n / 2]) << 8) |
        (static_cast<std::uint64_t>(u[n - 1]) << 16);
  }
  h = (h ^ w) * kMul;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return h;
}

/// Appends the escape of code point `c` (at most U+FFFF): "\u001b", "\u202e".
inline void append_u_escape(std::string& out, unsigned c) {
  const char* hex = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += hex[(c >> shift) & 0xf];
}

/// The code point of a valid 2- or 3-byte UTF-8 sequence at `p` that reorders or breaks the text
/// around it: the bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E/F,
/// U+202A..E, U+2066..9; "Trojan Source") and the line and paragraph separators (U+2028/9).
/// 0 for any other.
inline unsigned layout_control(const unsigned char* p, int len) {
  if (len == 2) return p[0] == 0xd8 && p[1] == 0x9c ? 0x061c : 0;
  if (len != 3 || p[0] != 0xe2) return 0;
  const unsigned cp = 0x2000u | ((p[1] & 0x3fu) << 6) | (p[2] & 0x3fu);
  const bool marks = cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e);
  return marks || (cp >= 0x2066 && cp <= 0x2069) ? cp : 0;
}

/// Appends `s` so that it can neither rewrite a terminal nor break a JSON string: control
/// characters (C0, DEL, and C1 such as U+009B, which terminals take as an escape sequence) become
/// \\u00XX, the characters that reorder or break a line (layout_control) \\u20XX, and bytes that
/// are not valid UTF-8 become U+FFFD in JSON and "\xe9" in a report (as `ls -b` shows a file name's
/// byte). With `json`, '"' and '\' are escaped too; without, a '\' is doubled (so that "\\u001b" in
/// a report is never a real name's text). Names are arbitrary bytes: the JSON and the text report
/// escape them alike.
inline void append_escaped(std::string& out, std::string_view s, bool json) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if ((c == '"' && json) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++p;
    } else if (c < 0x20 || c == 0x7f) {
      append_u_escape(out, c);
      ++p;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++p;
    } else {
      // validate one UTF-8 sequence
      int len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
      bool ok = len != 0 && p + len <= end;
      for (int i = 1; ok && i < len; ++i) ok = (p[i] & 0xc0) == 0x80;
      if (ok && len == 2 && c < 0xc2) ok = false;                   // overlong
      if (ok && len == 3 && c == 0xe0 && p[1] < 0xa0) ok = false;   // overlong
      if (ok && len == 3 && c == 0xed && p[1] >= 0xa0) ok = false;  // surrogate
      if (ok && len == 4 && c == 0xf0 && p[1] < 0x90) ok = false;   // overlong
      if (ok && len == 4 && (c > 0xf4 || (c == 0xf4 && p[1] >= 0x90))) ok = false;
      if (ok && len == 2 && c == 0xc2 && p[1] < 0xa0) {
        append_u_escape(out, p[1]);  // C1 control, U+0080..U+009F
        p += len;
      } else if (const unsigned cp = ok ? layout_control(p, len) : 0) {
        append_u_escape(out, cp);
        p += len;
      } else if (ok) {
        out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(len));
        p += len;
      } else if (json) {
        out += "\xEF\xBF\xBD";  // JSON strings are Unicode: U+FFFD
        ++p;
      } else {
        // The report shows the byte as `ls -b` does (a file name's original byte): "\xe9".
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
        ++p;
      }
    }
  }
}

/// `s` escaped for a terminal (append_escaped without JSON quoting).
inline std::string escaped(std::string_view s) {
  std::string out;
  append_escaped(out, s, /*json=*/false);
  return out;
}

/// "'name'" escaped as the JSON and the report do (a name in a message must not rewrite the
/// terminal). Always called qualified (detail::quoted): <iomanip>'s std::quoted is found by
/// argument-dependent lookup otherwise.
/// A name over 200 bytes is cut there, at a character's first byte, and followed by its length: a
/// message stays a line whatever the name.
inline std::string quoted(std::string_view name) {
  constexpr std::size_t kShown = 200;
  std::string out = "'";
  if (name.size() <= kShown) {
    append_escaped(out, name, /*json=*/false);
    out += "'";
    return out;
  }
  // Back to the first byte of the character at the cut: at most 3 steps in UTF-8 (bytes that are
  // not UTF-8 are cut where they stand, and escaped).
  std::size_t cut = kShown;
  for (int i = 0; i < 3 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80; ++i) --cut;
  append_escaped(out, name.substr(0, cut), /*json=*/false);
  out += "...' (" + std::to_string(name.size()) + " bytes)";
  return out;
}

/// A thread's cache from the caller's name (pointer and length) to `Value`, what a component keeps
/// for the name (the Stopwatch: the thread's slot for it). Set-associative, 256 sets of 4 ways
/// (32 bytes an entry, 32 KiB a thread: with 128 sets, 1000 names in turn cost 1.3-1.4x the
/// clock pair instead of 0.9-1.0x, bench row BM_StopwatchPair_RoundRobin1000): the set is a
/// multiplicative hash of the pointer with its bits above 7 folded in, so that names side by side
/// in memory (string literals, 64 one-word names in a row, at any stride) spread over the sets
/// instead of colliding as they did in the direct-mapped table of 64 entries this replaces
/// (docs/performance.md). A hit is verified against the interned text: a caller's buffer may hold
/// another name later. A set may hold several entries of one pointer and length with different
/// texts, so that a buffer that takes turns between a few names hits for each. One owner thread; no
/// locks.
template <class Value>
class NameCache {
 public:
  static constexpr unsigned kSetBits = 8;
  static constexpr std::size_t kSets = std::size_t{1} << kSetBits;
  static constexpr std::size_t kWays = 4;

  struct Entry {
    const char* ptr = nullptr;       // the caller's text
    const char* interned = nullptr;  // the interned copy of the same text (never moves)
    std::uint32_t len = 0;           // its length (a longer name is never cached)
    Value value{};
  };

  /// The entry for `name`, or nullptr on a miss (the caller then finds the name by its text and
  /// insert()s it).
  LAPTIME_ALWAYS_INLINE const Entry* find(std::string_view name) const noexcept {
    const Entry* set = &entries_[set_of(name) * kWays];
    for (std::size_t w = 0; w < kWays; ++w) {
      const Entry& e = set[w];
      if (e.ptr == name.data() && e.len == name.size() &&
          LAPTIME_LIKELY(same_text(std::string_view(e.interned, e.len), name))) {
        return &e;
      }
    }
    return nullptr;
  }

  /// Caches `name` (whose interned copy is `interned`; find(name) missed) in an empty way of its
  /// set, else in the way a per-cache turn picks. Not the set's oldest entry: with more names in
  /// turn than a set holds (1000 names round-robin), evicting the oldest evicts each name just
  /// before its next use, while a way picked in turn keeps some (1000 names in turn: 70 % of
  /// lookups hit, names-test; about 48 % when the oldest goes, in a model with uniform sets).
  /// Returns the entry (its value is `value`, also when `name` is too long to be cached).
  const Entry& insert(std::string_view name, const char* interned, Value value) noexcept {
    if (name.size() > UINT32_MAX) {
      overflow_ = Entry{nullptr, interned, 0, value};
      return overflow_;
    }
    Entry* set = &entries_[set_of(name) * kWays];
    std::size_t w = 0;
    while (w < kWays && set[w].ptr != nullptr) ++w;
    if (w == kWays) w = turn_++ % kWays;
    set[w] = Entry{name.data(), interned, static_cast<std::uint32_t>(name.size()), value};
    return set[w];
  }

  /// Forgets every entry.
  void clear() noexcept {
    for (Entry& e : entries_) e = Entry{};
  }

  static std::size_t set_of(std::string_view name) noexcept {
    const std::uint64_t p = reinterpret_cast<std::uintptr_t>(name.data());
    const std::uint64_t key = p ^ (p >> 7) ^ (std::uint64_t{name.size()} << 48);
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> (64 - kSetBits));
  }

 private:
  Entry entries_[kSets * kWays];
  Entry overflow_;  // what insert() returns for a name of 4 GiB or more
  std::size_t turn_ = 0;
};

/// Names by their text, behind a NameCache: what a thread (or a process, under its lock) keeps for
/// each name it has met, `Value` (the Stopwatch: the name's id). Open addressing with linear
/// probing over a power-of-two array, at most half full; each entry keeps the text's hash
/// (text_hash) beside the interned text, so that a probe compares 8 bytes before it compares
/// text. find() neither allocates nor locks; insert() allocates when the table grows, which only
/// a name new to the table makes it do (a cold path).
template <class Value>
class TextTable {
 public:
  struct Entry {
    std::uint64_t hash = 0;
    const char* text = nullptr;  // the interned text (never moves); nullptr: an empty entry
    std::size_t len = 0;
    Value value{};
  };

  /// What the table keeps for `text` (whose text_hash is `hash`), or nullptr. Inline: a name
  /// built at run time (a new address each call) is found here on every call.
  LAPTIME_ALWAYS_INLINE const Value* find(std::string_view text,
                                          std::uint64_t hash) const noexcept {
    if (entries_.empty()) return nullptr;
    const std::size_t mask = entries_.size() - 1;
    for (std::size_t i = std::size_t{hash} & mask;; i = (i + 1) & mask) {
      const Entry& e = entries_[i];
      if (e.text == nullptr) return nullptr;
      if (e.hash == hash && same_text(std::string_view(e.text, e.len), text)) return &e.value;
    }
  }
  const Value* find(std::string_view text) const noexcept { return find(text, text_hash(text)); }

  /// Adds `interned` (a text that never moves and is not in the table yet) with `value`. May
  /// throw std::bad_alloc; the table is unchanged then.
  void insert(std::string_view interned, std::uint64_t hash, Value value) {
    if (2 * (size_ + 1) > entries_.size()) {
      std::vector<Entry> grown(entries_.empty() ? 16 : 2 * entries_.size());
      grown.swap(entries_);
      for (const Entry& e : grown) {
        if (e.text != nullptr) place(e);
      }
    }
    // A text's data() is never nullptr, that of an empty std::string_view may be.
    place(Entry{hash, interned.data() != nullptr ? interned.data() : "", interned.size(), value});
    ++size_;
  }
  void insert(std::string_view interned, Value value) {
    insert(interned, text_hash(interned), value);
  }

  std::size_t size() const noexcept { return size_; }

  /// Forgets every entry (keeps no memory).
  void clear() noexcept {
    std::vector<Entry>().swap(entries_);
    size_ = 0;
  }

 private:
  void place(const Entry& e) noexcept {
    const std::size_t mask = entries_.size() - 1;
    std::size_t i = static_cast<std::size_t>(e.hash) & mask;
    while (entries_[i].text != nullptr) i = (i + 1) & mask;
    entries_[i] = e;
  }

  std::vector<Entry> entries_;  // empty, or a power of two
  std::size_t size_ = 0;
};

}  // namespace detail
LAPTIME_END_NAMESPACE
