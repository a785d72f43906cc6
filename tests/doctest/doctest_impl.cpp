// doctest's implementation, compiled once per build tree and linked by every suite: compiled into
// each suite instead, it cost about 6 s of g++ -O2 -g per test program.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
