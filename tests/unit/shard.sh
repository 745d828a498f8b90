#!/usr/bin/env bash
# shard.sh I N COMMAND...: runs part I of N of the doctest executable COMMAND. The test cases, in file
# order, are cut into N contiguous ranges so that `ctest -j2` keeps both cores busy with one suite.
set -euo pipefail
i=$1 n=$2
shift 2
total=$("$@" --count | sed -n 's/.*filters: \([0-9][0-9]*\).*/\1/p' | tail -n 1)
[ -n "$total" ] || { echo "shard.sh: could not count the test cases of $*" >&2; exit 1; }
first=$(((i - 1) * total / n + 1))
last=$((i * total / n))
[ "$first" -le "$last" ] || { echo "shard $i of $n: no test cases"; exit 0; }
echo "shard $i of $n: test cases $first to $last of $total"
exec "$@" --first="$first" --last="$last"
