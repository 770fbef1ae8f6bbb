#!/usr/bin/env bash
# Belay against DBOS Transact Go, side by side: builds `belay` from this
# checkout and the DBOS harness beside this script, then runs both on the
# same run shapes (64 runs at once over 2,000 runs; one at a time over 200;
# 8 no-op durable steps each), alternating the two programs run by run so
# that both see the same noise, and which goes first alternating too. It
# prints every run's figures as it goes (store, shape, program, the
# program's --json), then for each store and shape the medians, Belay's
# ratio to DBOS of the medians, and the median and range of the ratios of
# the runs taken one after the other (a round's pair).
#
#   bench/dbos/compare.sh [--rounds 3] [--stores "sqlite postgres"] [--shape "--runs 2000"]... [--database-url URL]
#   bench/dbos/compare.sh --summarize FILE   # the summary of a saved output
#
# PostgreSQL defaults to postgres://postgres@127.0.0.1:5432/test; both
# programs use a schema of their own there and drop it after.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

rounds=3
stores="sqlite postgres"
shapes=()
url=${BELAY_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
summarize=
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --stores) stores=$2; shift 2 ;;
    --shape) shapes+=("$2"); shift 2 ;;
    --database-url) url=$2; shift 2 ;;
    --summarize) summarize=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--stores \"sqlite postgres\"] [--shape ARGS]... [--database-url URL] | --summarize FILE" >&2; exit 2 ;;
  esac
done
[ ${#shapes[@]} -gt 0 ] || shapes=("--runs 2000" "--concurrency 1 --runs 200")

# summary reads lines of store, shape, program and JSON, tab-separated.
summary() {
  awk -F'\t' '
    function num(json, key,   m) {
      return match(json, "\"" key "\":[0-9.]+") ? substr(json, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0 : 0
    }
    function median(a, n,   i, j, t, b) {
      for (i = 1; i <= n; i++) b[i] = a[i]
      for (i = 2; i <= n; i++) for (j = i; j > 1 && b[j-1] > b[j]; j--) { t = b[j]; b[j] = b[j-1]; b[j-1] = t }
      return n % 2 ? b[(n+1)/2] : (b[n/2] + b[n/2+1]) / 2
    }
    NF == 4 && ($3 == "belay" || $3 == "dbos") {
      k = $1 SUBSEP $2
      if (!(k in seen)) { seen[k] = 1; order[++keys] = k }
      i = ++n[k, $3]
      sps[k, $3, i] = num($4, "steps_per_sec")
      p50[k, $3, i] = num($4, "overhead_p50_ms")
      p99[k, $3, i] = num($4, "overhead_p99_ms")
    }
    END {
      printf "%-8s | %-26s | %-30s | %-30s | %-12s | %s\n", "store", "shape", "belay steps/s (p50 / p99 ms)", "dbos steps/s (p50 / p99 ms)", "ratio of medians", "paired ratios: median (range)"
      for (o = 1; o <= keys; o++) {
        k = order[o]; split(k, ks, SUBSEP)
        for (p = 0; p < 2; p++) {
          prog = p ? "dbos" : "belay"
          delete a; delete b; delete c
          for (i = 1; i <= n[k, prog]; i++) { a[i] = sps[k, prog, i]; b[i] = p50[k, prog, i]; c[i] = p99[k, prog, i] }
          m[prog] = median(a, n[k, prog]); m50[prog] = median(b, n[k, prog]); m99[prog] = median(c, n[k, prog])
        }
        pairs = n[k, "belay"] < n[k, "dbos"] ? n[k, "belay"] : n[k, "dbos"]
        delete r; lo = 0; hi = 0
        for (i = 1; i <= pairs; i++) {
          r[i] = sps[k, "belay", i] / sps[k, "dbos", i]
          if (i == 1 || r[i] < lo) lo = r[i]
          if (i == 1 || r[i] > hi) hi = r[i]
        }
        printf "%-8s | %-26s | %-30s | %-30s | %-16.2f | %.2f (%.2f-%.2f)\n", ks[1], ks[2],
          sprintf("%.0f (%.2f / %.1f)", m["belay"], m50["belay"], m99["belay"]),
          sprintf("%.0f (%.2f / %.1f)", m["dbos"], m50["dbos"], m99["dbos"]),
          m["belay"] / m["dbos"], median(r, pairs), lo, hi
      }
    }' "$@"
}

if [ -n "$summarize" ]; then
  summary "$summarize"
  exit 0
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/belay" ./cmd/belay)
(cd "$here" && go build -o "$bin/dbos" .)
out="$bin/results"
: >"$out"
for store in $stores; do
  storeargs=(--store "$store")
  [ "$store" = postgres ] && storeargs+=(--database-url "$url")
  for shape in "${shapes[@]}"; do
    for round in $(seq "$rounds"); do
      order="belay dbos"
      [ $((round % 2)) -eq 0 ] && order="dbos belay"
      for prog in $order; do
        # shellcheck disable=SC2086 # a shape is several arguments
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
echo
summary "$out"
