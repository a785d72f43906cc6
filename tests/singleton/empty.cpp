// A shared object with nothing in it: the unload test loads and unloads it in a loop, so that the
// dynamic loader's list is changing while another thread forks.
extern "C" __attribute__((visibility("default"))) int laptime_test_empty() {
  return 0;
}
