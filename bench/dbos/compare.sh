#!/usr/bin/env bash
# Belay against DBOS Transact Go, side by side: builds `belay` from this
# checkout and the DBOS harness beside this script, then runs both on the
# same run shapes (64 runs at once over 2,000 runs; one at a time over 200;
# 8 no-op durable steps each), alternating the two programs run by run so
# that both see the same noise, and which goes first alternating too. It
# prints every run's figures, then the medians and Belay's ratio to DBOS.
#
#   bench/dbos/compare.sh [--rounds 3] [--stores "sqlite postgres"] [--database-url URL]
#   bench/dbos/compare.sh --summarize FILE   # the medians of a saved output
#
# PostgreSQL defaults to postgres://postgres@127.0.0.1:5432/test; both
# programs use a schema of their own there and drop it after.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

rounds=3
stores="sqlite postgres"
url=${BELAY_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
summarize=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --stores) stores=$2; shift 2 ;;
    --database-url) url=$2; shift 2 ;;
    --summarize) summarize=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--stores \"sqlite postgres\"] [--database-url URL] | --summarize FILE" >&2; exit 2 ;;
  esac
done

field() { grep -o "\"$1\":[0-9.]*" | cut -d: -f2; }

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

if [ -n "$summarize" ]; then
  out=$summarize
  stores=$(awk -F'\t' 'NF == 4 && !seen[$1]++ {printf "%s ", $1}' "$out")
else
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/belay" ./cmd/belay)
(cd "$here" && go build -o "$bin/dbos" .)
out="$bin/results"
: >"$out"

for store in $stores; do
  storeargs=(--store "$store")
  [ "$store" = postgres ] && storeargs+=(--database-url "$url")
  for shape in "--runs 2000" "--concurrency 1 --runs 200"; do
    for round in $(seq "$rounds"); do
      order="belay dbos"
      [ $((round % 2)) -eq 0 ] && order="dbos belay"
      for prog in $order; do
        # shellcheck disable=SC2086 # shape is words
        if [ "$prog" = belay ]; then
          line=$("$bin/belay" bench "${storeargs[@]}" $shape --json)
        else
          line=$("$bin/dbos" "${storeargs[@]}" $shape --json)
        fi
        printf '%s\t%s\t%s\t%s\n' "$store" "$shape" "$prog" "$line" | tee -a "$out"
      done
    done
  done
done
fi

echo
printf '%-8s | %-26s | %-28s | %-28s | %s\n' store shape "belay steps/s (p50/p99 ms)" "dbos steps/s (p50/p99 ms)" "belay / dbos"
for store in $stores; do
  for shape in "--runs 2000" "--concurrency 1 --runs 200"; do
    declare -A m=()
    for prog in belay dbos; do
      rows=$(awk -F'\t' -v s="$store" -v h="$shape" -v p="$prog" '$1==s && $2==h && $3==p {print $4}' "$out")
      m[$prog]=$(echo "$rows" | field steps_per_sec | median)
      m[$prog.p50]=$(echo "$rows" | field overhead_p50_ms | median)
      m[$prog.p99]=$(echo "$rows" | field overhead_p99_ms | median)
    done
    ratio=$(awk -v a="${m[belay]}" -v b="${m[dbos]}" 'BEGIN {printf "%.2f", a/b}')
    printf '%-8s | %-26s | %-28s | %-28s | %s\n' "$store" "$shape" \
      "${m[belay]} (${m[belay.p50]}/${m[belay.p99]})" "${m[dbos]} (${m[dbos.p50]}/${m[dbos.p99]})" "$ratio"
    unset m
  done
done
