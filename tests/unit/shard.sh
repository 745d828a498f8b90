#!/usr/bin/env bash
# shard.sh I N COMMAND...: runs part I of N of the doctest executable COMMAND: every N-th test case,
# in file order, from the I-th on. Dealing the cases round robin spreads the slow ones (the modules'
# runs and falsifier audits sit together in file order) so that `ctest -j2` keeps both cores busy.
set -euo pipefail
i=$1 n=$2
shift 2
# The names between doctest's two ruler lines; a name is given back as a filter with its commas and
# backslashes escaped and '*' (a wildcard there) matched by '?'.
names=$("$@" --list-test-cases --no-colors=true | awk '/^=+$/ { inside = !inside; next } inside')
[ -n "$names" ] || { echo "shard.sh: could not list the test cases of $*" >&2; exit 1; }
filter=$(printf '%s\n' "$names" | awk -v i="$i" -v n="$n" '(NR - 1) % n == i - 1' |
  sed 's/\\/\\\\/g; s/,/\\,/g; s/\*/?/g' | paste -sd, -)
[ -n "$filter" ] || { echo "shard $i of $n: no test cases"; exit 0; }
echo "shard $i of $n: $(printf '%s\n' "$filter" | tr ',' '\n' | grep -vc '\\$') test cases"
exec "$@" --test-case="$filter"
