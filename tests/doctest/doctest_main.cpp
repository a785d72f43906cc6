// The main() of the suites that have none of their own. It is a separate object of the static
// library, so the linker takes it only into a program that does not define main() itself (the
// suites that first check for a "--helper" mode of their own, such as exit-test).
#include <doctest/doctest.h>

int main(int argc, char** argv) {
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  return context.run();
}
