# The GPU rows 7a and 7c, commit b2a6288 (the H200 run of 2026-12-03) against this tree, built and run
# in turn on one GPU host (docs/performance.md, "The third round's goals on an H100 host"). From the
# repository root, with the Debian packages of ../shared/GPU.md in .debs/:
#   mkdir .old-tree && git archive b2a6288 | tar -x -C .old-tree && OUT=/tmp/ab bash <this file>
set -u
deps=/tmp/deps; mkdir -p $deps; for f in .debs/*.deb; do dpkg -x $f $deps; done
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu PATH=/usr/local/cuda/bin:$PATH
for t in old new; do src=.; [ $t = old ] && src=.old-tree
  cmake -S $src -B /tmp/b-$t -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -DCMAKE_PREFIX_PATH=$deps/usr -DLAPTIME_BUILD_BENCH=ON -DLAPTIME_BUILD_TESTS=OFF -DLAPTIME_BUILD_EXAMPLES=OFF -DLAPTIME_BUILD_PYTHON=OFF -DLAPTIME_INSTALL=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/cfg-$t.log 2>&1 || { tail -20 /tmp/cfg-$t.log; exit 2; }
  cmake --build /tmp/b-$t --target laptime_gpu_bench -j16 2>&1 | tail -1
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | sed -n 's/^Model name: *//p'; date -u
F='BM_RawEventRecordPair|BM_RawEventTimedPair|BM_GpuTimerInterval|BM_StopwatchPair_RawEvents|BM_StopwatchPair_GpuTiming'
for i in 1 2 3; do for t in old new; do
  /tmp/b-$t/bench/gpu/laptime_gpu_bench --benchmark_filter="$F" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_out=$OUT/$t-$i.json --benchmark_out_format=json 2>/dev/null | grep median | sed "s/^/$t $i /"
done; done
