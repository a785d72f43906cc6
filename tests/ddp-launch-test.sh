#!/usr/bin/env bash
# ddp-launch-test: examples/ddp_train's launcher starts torchrun-style ranks, hands each its
# variables and the NCCL id file, and passes failures and skips on; then the trainer at world
# size 1 through the launcher: on a GPU it must train and write rank0.json; without one it must
# exit 77 with its reason (the GPU part is then reported as skipped, and the test passes).
#
#   ddp-launch-test.sh DDP_LAUNCH [DDP_TRAIN]
set -u
LAUNCH=$1
TRAIN=${2:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. two ranks, each with its own RANK / LOCAL_RANK and the same WORLD_SIZE and id file
out=$("$LAUNCH" --nproc 2 --out "$TMP/res" -- sh -c \
  'echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK lws=$LOCAL_WORLD_SIZE id=$DDP_NCCL_ID_FILE out=$LAPTIME_OUTPUT"')
rc=$?
echo "$out"
[ $rc = 0 ] || fail "two ranks that exit 0: launcher exited $rc"
for r in 0 1; do
  echo "$out" | grep -q "^rank=$r world=2 local=$r lws=2 id=/tmp/ddp_launch\.[^ ]*/nccl_id out=$TMP/res/rank{rank}.json$" ||
    fail "rank $r did not get its variables"
done
[ "$(echo "$out" | sed -n 's/.* id=\([^ ]*\) .*/\1/p' | sort -u | wc -l)" = 1 ] || fail "ranks got different id files"
[ -d "$TMP/res" ] || fail "--out did not create the results folder"
id_dir=$(echo "$out" | sed -n '1s/.* id=\([^ ]*\)\/nccl_id .*/\1/p')
[ ! -e "$id_dir" ] || fail "the launcher left its id folder $id_dir behind"

# 2. a user's LAPTIME_OUTPUT wins over --out
out=$(LAPTIME_OUTPUT='/x/{rank}.json' "$LAUNCH" --nproc 1 --out "$TMP/res" -- sh -c 'echo "$LAPTIME_OUTPUT"')
[ "$out" = "/x/{rank}.json" ] || fail "--out replaced the user's LAPTIME_OUTPUT: $out"

# 3. the first failure is the launcher's status; the other ranks are stopped, not waited for
"$LAUNCH" --nproc 2 -- sh -c 'exit $((RANK + 3))'
rc=$?
[ $rc = 3 ] || [ $rc = 4 ] || fail "ranks exiting 3 and 4: launcher exited $rc"
start=$SECONDS
"$LAUNCH" --nproc 2 -- sh -c 'if [ "$RANK" = 1 ]; then exit 5; fi; exec sleep 60'
rc=$?
[ $rc = 5 ] || fail "rank 1 exiting 5 while rank 0 hangs: launcher exited $rc"
[ $((SECONDS - start)) -lt 30 ] || fail "the hanging rank was not stopped"

# 4. skips: every rank 0 or 77 -> 77; a program that does not exist -> 127; bad usage -> 2
"$LAUNCH" --nproc 2 -- sh -c '[ "$RANK" = 0 ] && exit 77; exit 0'
[ $? = 77 ] || fail "a skipped rank: launcher did not exit 77"
"$LAUNCH" -- "$TMP/does-not-exist" 2>/dev/null
[ $? = 127 ] || fail "a missing program: launcher did not exit 127"
"$LAUNCH" --nproc 0 -- true 2>/dev/null
[ $? = 2 ] || fail "--nproc 0 was accepted"

# 5. the trainer at world size 1 through the launcher
if [ -z "$TRAIN" ] || [ ! -x "$TRAIN" ]; then
  echo "SKIP GPU part: ddp_train not built here (needs nvcc, cuBLAS, NCCL)"
  echo "PASS"
  exit 0
fi
out=$(LAPTIME_PROFILE=evaluation "$LAUNCH" --nproc 1 --out "$TMP/train" -- "$TRAIN" --iters 30 --warmup 5 \
  --batch 64 --hidden 512 2>&1)
rc=$?
echo "$out"
if [ $rc = 77 ]; then
  echo "$out" | grep -q "skipped: needs a CUDA GPU" || fail "exit 77 without the reason"
  echo "SKIP GPU part: $(echo "$out" | grep -m1 'skipped')"
elif [ $rc = 0 ]; then
  echo "$out" | grep -q "(falls)" || fail "the loss did not fall"
  for name in '"training loop"' '"data fetch"' '"Training step"' '"Optimizer step"'; do
    grep -q "\"name\": $name, \"count\": 25" "$TMP/train/rank0.json" || fail "rank0.json lacks $name x25"
  done
else
  fail "ddp_train through the launcher exited $rc"
fi
echo "PASS"
