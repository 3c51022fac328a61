#!/usr/bin/env bash
# Runs NVIDIA DALI's own plugin/checkpointing tests against jaxdali with `nvidia.dali` aliased to
# `jaxdali` (see docs/dali_tests.md). DALI's test files are NOT part of this repository: fetch them
# into $DALI_TESTS (default /tmp/dali_tests) first, keeping DALI's layout (jax_plugin/, checkpointing/).
#
#   [JAXDALI_ROOT=checkout] [TEST_NAMES="Class func"] tools/dali_tests/run.sh [TEST_FILE...]
#
# JAXDALI_ROOT: the checkout whose jaxdali is tested (default: this repository), e.g. an older
# commit's worktree for a "before" count. One nose2 run per test file, each under a time limit, logs
# under $DALI_TESTS/logs/<label>/.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
root="$(cd "${JAXDALI_ROOT:-$repo}" && pwd)"
tests="${DALI_TESTS:-/tmp/dali_tests}"
label="${LABEL:-$(basename "$root")}"
limit="${FILE_TIMEOUT:-900}"
logs="$tests/logs/$label"
mkdir -p "$logs" "$tests/shim"

# DALI_extra stand-in (db/single/jpeg, coco, tfrecord, lmdb, c2lmdb, webdataset, numpy slices,
# recordio, videos, frame sequences, wav clips), built once from the project's shared photos and
# video (make_extra.py); DALI_EXTRA_DIR: where (default $DALI_TESTS/dali_extra).
extra="${DALI_EXTRA_DIR:-$tests/dali_extra}"
PYTHONPATH="$repo" python "$here/make_extra.py" "$extra" "$repo/../shared/data" || exit 1
ln -sf "$here/dali_test_utils.py" "$tests/shim/test_utils.py"
ln -sf "$here/nose_utils.py" "$tests/shim/nose_utils.py"
ln -sf "$here/dali_webdataset_base.py" "$tests/shim/webdataset_base.py"
mkdir -p "$tests/shim/reader" && touch "$tests/shim/reader/__init__.py"
ln -sf "$here/dali_reader_test_numpy.py" "$tests/shim/reader/test_numpy.py"

files=("$@")
[ ${#files[@]} -eq 0 ] && files=($(cd "$tests" && ls jax_plugin/test_*.py checkpointing/test_*.py test_fw_iterators.py 2>/dev/null))
for f in "${files[@]}"; do
  dir="$(dirname "$f")"; mod="$(basename "$f" .py)"
  names="$mod"  # TEST_NAMES="TestJax TestPytorch": only those classes/functions of each file
  [ -n "${TEST_NAMES:-}" ] && names="$(for n in $TEST_NAMES; do printf '%s.%s ' "$mod" "$n"; done)"
  echo "== $f"
  (cd "$tests/$dir" && DALI_EXTRA_PATH="$extra" \
    PYTHONPATH="$root:$here:$tests/shim:$tests/site:$tests:$tests/$dir" \
    timeout -s INT "$limit" python -m nose2 -v -s "$tests/$dir" -t "$tests/$dir" $names \
    > "$logs/$mod.log" 2>&1; echo "rc=$?" >> "$logs/$mod.log")
  grep -E "^(Ran|OK|FAILED)|^rc=" "$logs/$mod.log" | tr '\n' ' '; echo
done
