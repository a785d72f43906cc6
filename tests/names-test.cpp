// Names (detail/names.hpp): the byte compare, the hash, the quoting and the per-thread name cache
// every component keys its hot path with. Plain code: tested with known data.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/detail/names.hpp"
#include "test_support.hpp"

using laptime::detail::NameCache;
using laptime::detail::quoted;
using laptime::detail::same_text;
using laptime::detail::text_hash;
using laptime::detail::TextTable;

TEST_CASE("same_text is byte equality for every length the word loads take apart") {
  for (std::size_t n = 0; n <= 80; ++n) {
    const std::string a(n, 'x');
    CAPTURE(n);
    CHECK(same_text(a, std::string(n, 'x')));
    for (std::size_t i = 0; i < n; ++i) {  // one byte differs, anywhere
      std::string b = a;
      b[i] = 'y';
      CHECK_FALSE(same_text(a, b));
    }
    CHECK_FALSE(same_text(a, std::string(n + 1, 'x')));
  }
  CHECK(same_text(std::string_view("a\0b", 3), std::string_view("a\0b", 3)));
  CHECK_FALSE(same_text(std::string_view("a\0b", 3), std::string_view("a\0c", 3)));
}

TEST_CASE("name_hash is the same in every process and every run (NVTX colours a name by it)") {
  CHECK(laptime::detail::name_hash("") == 1469598103934665603ULL);
  CHECK(laptime::detail::name_hash("a") == 0x44bd8ad473cd9906ULL);
  CHECK(laptime::detail::name_hash("forward") != laptime::detail::name_hash("backward"));
}

TEST_CASE("quoted escapes what could rewrite a terminal") {
  CHECK(quoted("data fetch") == "'data fetch'");
  CHECK(quoted("a\x1b[2Jb") == "'a\\u001b[2Jb'");
  CHECK(quoted("back\\slash") == "'back\\\\slash'");
  CHECK(quoted("caf\xc3\xa9") == "'caf\xc3\xa9'");
  CHECK(quoted("\xe9t\xe9") == "'\\xe9t\\xe9'");
  // Characters that reorder the rest of a line in a bidi-aware terminal ("Trojan Source"), or
  // break it, are escaped as the laptime command's Python escapes them; other text stays.
  CHECK(quoted("a\xe2\x80\xae"
               "b") == "'a\\u202eb'");                                // RIGHT-TO-LEFT OVERRIDE
  CHECK(quoted("\xe2\x81\xa6x\xe2\x81\xa9") == "'\\u2066x\\u2069'");  // an isolate
  CHECK(quoted("\xe2\x80\x8f\xd8\x9c") == "'\\u200f\\u061c'");        // marks
  CHECK(quoted("l\xe2\x80\xa8m") == "'l\\u2028m'");                   // LINE SEPARATOR
  CHECK(quoted("\xe2\x80\x94\xe2\x80\xaf\xe2\x81\xa0") ==
        "'\xe2\x80\x94\xe2\x80\xaf\xe2\x81\xa0'");  // an em dash, a narrow space, a joiner
  std::string json;
  laptime::detail::append_escaped(json, "\xe2\x80\xae", /*json=*/true);
  CHECK(json == "\\u202e");
}

TEST_CASE("the name cache finds what was inserted, by pointer and length, verified by content") {
  NameCache<int> cache;
  const std::string interned = "forward";
  const char* literal = "forward";
  CHECK(cache.find(literal) == nullptr);
  cache.insert(literal, interned.data(), 7);
  REQUIRE(cache.find(literal) != nullptr);
  CHECK(cache.find(literal)->value == 7);
  // The same text at another address is a miss (the component's map finds it by content).
  const std::string copy = literal;
  CHECK(cache.find(copy) == nullptr);
  // The same address and length holding another text now: a miss, never the old name's value.
  std::string buffer = "forward";
  cache.insert(buffer, interned.data(), 8);
  REQUIRE(cache.find(buffer) != nullptr);
  buffer[0] = 'b';
  CHECK(cache.find(buffer) == nullptr);
  // The buffer's new text gets an entry of its own; the old text's entry stays, so a buffer that
  // takes turns between names hits for each (docs/performance.md), and each hit has its own text's
  // value.
  const std::string other = "borward";
  cache.insert(buffer, other.data(), 9);
  REQUIRE(cache.find(buffer) != nullptr);
  CHECK(cache.find(buffer)->value == 9);
  buffer[0] = 'f';
  REQUIRE(cache.find(buffer) != nullptr);
  CHECK(cache.find(buffer)->value == 8);
  buffer[0] = 'x';
  CHECK(cache.find(buffer) == nullptr);
  cache.clear();
  CHECK(cache.find(literal) == nullptr);
}

TEST_CASE("64 short names side by side in memory all stay cached (docs/performance.md)") {
  // As a compiler lays out 64 one-word string literals: back to back, a few bytes each.
  for (const std::size_t stride : {2u, 4u, 6u, 8u, 12u, 16u}) {
    CAPTURE(stride);
    std::vector<char> text(64 * stride + 64, 'n');
    NameCache<std::size_t> cache;
    std::vector<std::string_view> names;
    for (std::size_t i = 0; i < 64; ++i) names.emplace_back(&text[i * stride], stride - 1);
    for (std::size_t i = 0; i < names.size(); ++i) cache.insert(names[i], names[i].data(), i);
    std::size_t hits = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto* e = cache.find(names[i]);
      if (e != nullptr && e->value == i) ++hits;
    }
    CHECK(hits == names.size());
  }
}

TEST_CASE("names in turn beyond a set's ways keep some hits, and every hit is the right name") {
  // 1000 names round-robin: more than the cache holds. Evicting a set's oldest entry would miss
  // every time; a way taken in turn keeps some names until their next use.
  std::vector<std::string> names;
  for (int i = 0; i < 1000; ++i) names.push_back("round robin name " + std::to_string(i));
  NameCache<std::size_t> cache;
  std::size_t hits = 0;
  for (int round = 0; round < 4; ++round) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (const auto* e = cache.find(names[i])) {
        REQUIRE(e->value == i);
        if (round > 0) ++hits;
      } else {
        cache.insert(names[i], names[i].data(), i);
        REQUIRE(cache.find(names[i]) != nullptr);  // just inserted: found
      }
    }
  }
  // 70 % here (256 sets); about 48 % when the oldest goes (a model with uniform sets).
  CHECK(hits > 6 * 3 * names.size() / 10);
}

TEST_CASE("text_hash is the same in every run, and sees every byte of a name") {
  // Fixed values: the hash takes no seed and no address.
  CHECK(text_hash("") == 0x3836f0681055a942ULL);
  CHECK(text_hash("forward") == 0x74130733ca559068ULL);
  CHECK(text_hash("a much longer name of 33 bytes..") == 0x082e6bd0e1214bbcULL);
  CHECK(text_hash("") == text_hash(std::string()));
  CHECK(text_hash("forward") == text_hash(std::string("forward")));
  const std::uint64_t forward = text_hash("forward");
  CHECK(forward == text_hash(std::string_view("forward!", 7)));
  // One byte changed anywhere, or the length changed, changes the hash (every length the word
  // loads take apart: 1-3 bytes, 4-8, the words and the overlapping tail past 8).
  for (std::size_t n = 0; n <= 40; ++n) {
    const std::string a(n, 'x');
    CAPTURE(n);
    CHECK(text_hash(a) != text_hash(std::string(n + 1, 'x')));
    for (std::size_t i = 0; i < n; ++i) {
      std::string b = a;
      b[i] = 'y';
      CHECK(text_hash(a) != text_hash(b));
      b[i] = '\0';  // an embedded NUL is a byte like any other
      CHECK(text_hash(a) != text_hash(b));
    }
  }
  // Texts that differ only by trailing NULs differ by length, which the hash takes in.
  CHECK(text_hash(std::string_view("ab", 2)) != text_hash(std::string_view("ab\0", 3)));
}

TEST_CASE("text_hash spreads 100000 similar names over a table's low bits") {
  // The tables take the low bits: names that differ in a digit must not pile up.
  std::vector<int> buckets(1 << 12, 0);
  for (int i = 0; i < 100000; ++i) ++buckets[text_hash("batch " + std::to_string(i)) & 0xfff];
  int most = 0;
  for (int b : buckets) most = b > most ? b : most;
  CHECK(most < 3 * 100000 / (1 << 12));  // the mean is 24.4; a bucket of 3x it is a bad hash
}

// A table's texts live elsewhere (interned): these never move while the table holds them.
struct Interned {
  std::vector<std::unique_ptr<std::string>> texts;
  std::string_view add(std::string text) {
    texts.push_back(std::make_unique<std::string>(std::move(text)));
    return *texts.back();
  }
};

TEST_CASE("the text table finds every name it holds through growth, and no other") {
  Interned in;
  TextTable<std::uint32_t> table;
  CHECK(table.find("anything") == nullptr);  // empty
  for (std::uint32_t i = 0; i < 5000; ++i) {
    const std::string_view t = in.add("name " + std::to_string(i));
    REQUIRE(table.find(t) == nullptr);
    table.insert(t, i);
    REQUIRE(table.find(t) != nullptr);
    // Growth (16, 32, ... entries) keeps every earlier name.
    if ((i & (i + 1)) == 0 || i % 997 == 0) {
      for (std::uint32_t j = 0; j <= i; ++j) {
        const std::string probe = "name " + std::to_string(j);  // another address, same text
        const std::uint32_t* v = table.find(probe);
        REQUIRE(v != nullptr);
        REQUIRE(*v == j);
      }
    }
  }
  CHECK(table.size() == 5000);
  CHECK(table.find("name 5000") == nullptr);
  CHECK(table.find("name 1 ") == nullptr);
  CHECK(table.find("ame 1") == nullptr);
  table.clear();
  CHECK(table.size() == 0);
  CHECK(table.find("name 1") == nullptr);
  table.insert(in.add("again"), 7);
  REQUIRE(table.find("again") != nullptr);
  CHECK(*table.find("again") == 7);
}

TEST_CASE("the text table tells apart names whose hashes are equal") {
  // Same hash, different text: every entry below is given one hash, as if all collided. The table
  // must compare the text after the hash and walk on to the right entry.
  Interned in;
  TextTable<int> table;
  const std::uint64_t h = 42;
  const std::vector<std::string> texts = {
      "a", "b", "ab", "ba", std::string("a\0b", 3), std::string("a\0c", 3), ""};
  for (std::size_t i = 0; i < texts.size(); ++i)
    table.insert(in.add(texts[i]), h, static_cast<int>(i));
  for (std::size_t i = 0; i < texts.size(); ++i) {
    CAPTURE(i);
    const int* v = table.find(texts[i], h);
    REQUIRE(v != nullptr);
    CHECK(*v == static_cast<int>(i));
  }
  CHECK(table.find("c", h) == nullptr);
  CHECK(table.find(std::string("a\0d", 3), h) == nullptr);
  // The right text under the wrong hash is not found: the hash is compared first.
  CHECK(table.find("ab", h + 1) == nullptr);
}

TEST_CASE("the text table keeps empty, long and NUL-holding names") {
  Interned in;
  TextTable<int> table;
  const std::string long_name(100000, 'L');
  std::string long_other = long_name;
  long_other[99999] = 'M';
  table.insert(in.add(""), 1);
  table.insert(in.add(long_name), 2);
  table.insert(in.add(std::string("\0", 1)), 3);
  table.insert(in.add(std::string("nul\0inside", 11)), 4);
  REQUIRE(table.find("") != nullptr);
  CHECK(*table.find("") == 1);
  REQUIRE(table.find(long_name) != nullptr);
  CHECK(*table.find(long_name) == 2);
  CHECK(table.find(long_other) == nullptr);
  REQUIRE(table.find(std::string("\0", 1)) != nullptr);
  CHECK(*table.find(std::string("\0", 1)) == 3);
  REQUIRE(table.find(std::string("nul\0inside", 11)) != nullptr);
  CHECK(*table.find(std::string("nul\0inside", 11)) == 4);
  CHECK(table.find("nul") == nullptr);  // the text up to the NUL is another name
  // A view with no data at all is the empty text.
  TextTable<int> other;
  other.insert(std::string_view(), 5);
  REQUIRE(other.find("") != nullptr);
  CHECK(*other.find("") == 5);
  CHECK(other.find(std::string_view()) == other.find(""));
}
