#!/usr/bin/env bash
# Every callgrind count that PROFILING.md quotes, from one build at one
# commit: builds the `overhead_profile` bench target, runs each
# measurement under `valgrind --tool=callgrind` with its own
# `--toggle-collect`, and prints the markdown table that PROFILING.md
# contains ("Measured: what the crate's hot path costs"), then the
# per-component table of the headline (docs/profiling/callgrind_components.py).
#
# usage: bash docs/profiling/callgrind_table.sh [--repeats N] [--keep DIR]
#
#   --repeats N  run every measurement N times (default 1); the table gives
#                the median and the spread (lowest to highest) of the N
#   --keep DIR   keep the callgrind profiles in DIR (w1.out, w1y0.out, ...,
#                the last run of each) for callgrind_annotate; without it
#                they go to a temporary directory deleted at the end
#
# Needs cargo, valgrind, jq, python3 and binutils' addr2line. Run it from
# a clean checkout of the commit it measures: the header names the commit
# (`-dirty` if the work tree has changes).
set -euo pipefail

repeats=1
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --repeats) repeats="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/../.."

# The executable's path from cargo, not a glob (a glob such as
# target/release/deps/overhead_profile-* also matches the .d file).
echo "building overhead_profile (bench profile: fat LTO, one codegen unit) ..." >&2
B=$(cargo bench -p tourbillon-benches --bench overhead_profile --no-run \
        --message-format=json 2>/dev/null \
    | jq -r 'select(.reason == "compiler-artifact" and .target.name == "overhead_profile"
                    and .executable != null) | .executable' | tail -n 1)
if [ -z "$B" ] || [ ! -x "$B" ]; then
    echo "no overhead_profile executable from cargo: run" >&2
    echo "  cargo bench -p tourbillon-benches --bench overhead_profile --no-run" >&2
    echo "to see the build's errors" >&2
    exit 1
fi
echo "executable: $B" >&2

if [ -n "$keep" ]; then
    out="$keep"
    mkdir -p "$out"
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi

# name | toggle | arguments | unit | units | description
measurements=(
    "w1|workload|3 5 1 fresh|task|150000|W1: 50,000 tasks x 5 yields, 3 rounds, a new executor each"
    "w1y0|workload|3 0 1 fresh|task|150000|W1 with 0 yields (spawn, one poll, completion, join)"
    "w1q8|workload|queues8 3|task|150000|W1 on 8 queues of shares 1:2:...:8"
    "las|workload|las 3|task|150000|W1 on one \`Las::new()\` queue"
    "las-exact|workload|las-exact 3|task|150000|W1 on one \`Las::exact()\` queue"
    "clock|workload|observe 3 5 clock|task|150000|W1 with a clock read per poll (a stall detector of one hour, which never reports)"
    "observe|workload|observe 3|task|150000|W1 with latency histograms and a stall detector"
    "timeline|workload|timeline 3|task|150000|W1 with \`Builder::timeline\` on"
    "w2|spawn_empty|spawn 1 100000|task|100000|W2: 100,000 empty tasks spawned, then awaited"
    "pp1|pingpong|pingpong 100000 1|round trip|100000|W4: ping-pong, both tasks on one queue"
    "pp2|pingpong|pingpong 100000 2|round trip|100000|W4 on two queues (every message a queue switch)"
    "nested|workload_nested|nested 1 50000|task|50000|W1 nested in tokio (\`rt.block_on(ex.run_until(..))\`), one round"
    "tokio|workload_tokio|tokio 3 50000|task|150000|for comparison: W1 on tokio's \`LocalSet\`"
    "pptokio|pingpong_tokio|pingpong-tokio 100000|round trip|100000|for comparison: W4 on tokio's \`LocalSet\`"
)

commit=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD -- . 2>/dev/null || commit="$commit-dirty"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)

rows=()
for m in "${measurements[@]}"; do
    IFS='|' read -r name toggle args unit units desc <<<"$m"
    counts=()
    for ((r = 1; r <= repeats; r++)); do
        echo "$name ($r/$repeats): \$B $args" >&2
        extra=()
        # The headline's two profiles feed the per-component table.
        case "$name" in w1|w1y0) extra=(--dump-instr=yes) ;; esac
        # shellcheck disable=SC2086 # $args is a list of arguments
        valgrind --tool=callgrind "${extra[@]}" \
            --toggle-collect="overhead_profile::$toggle" \
            --callgrind-out-file="$out/$name.out" "$B" $args \
            >/dev/null 2>"$out/$name.log"
        c=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/$name.log" | tail -n 1)
        if [ -z "$c" ]; then
            echo "no 'Collected' line from valgrind for $name:" >&2
            cat "$out/$name.log" >&2
            exit 1
        fi
        counts+=("$c")
    done
    rows+=("$name|$toggle|$args|$unit|$units|$desc|${counts[*]}")
done

python3 - "$commit" "$(date -u +%F)" "$cpu" "$(nproc)" "$(uname -r)" \
    "$(rustc --version)" "$(valgrind --version)" "$repeats" "${rows[@]}" <<'EOF'
import statistics
import sys

commit, date, cpu, ncpu, kernel, rustc, valgrind, repeats = sys.argv[1:9]
repeats = int(repeats)
rows = [r.split("|") for r in sys.argv[9:]]

def n(x):
    return f"{x:,}"

print(f"Commit `{commit}`, {date}; `bash docs/profiling/callgrind_table.sh"
      + (f" --repeats {repeats}" if repeats > 1 else "") + "`; "
      f"{ncpu}-vCPU VM, `{cpu}`, Linux {kernel}, {rustc}, {valgrind}. "
      "`$B` is the `overhead_profile` bench executable; each row is "
      "`valgrind --tool=callgrind --toggle-collect=overhead_profile::FUNCTION $B ARGUMENTS`.")
print()
spread = repeats > 1
head = "| workload | `$B` arguments | `--toggle-collect` | collected Ir"
head += f" (median of {repeats})" if spread else ""
head += " | per unit |"
sep = "|---|---|---|---:|---:|"
if spread:
    head += f" lowest to highest of {repeats} |"
    sep += "---:|"
print(head)
print(sep)
for name, toggle, args, unit, units, desc, counts in rows:
    cs = sorted(int(c) for c in counts.split())
    med = int(statistics.median(cs))
    per = med / int(units)
    line = (f"| {desc} | `{args}` | `overhead_profile::{toggle}` | {n(med)} | "
            f"**{per:,.0f}** per {unit} |")
    if spread:
        lo, hi = cs[0], cs[-1]
        line += f" {n(lo)} to {n(hi)} ({(hi - lo) / lo * 100:.2f}%) |"
    print(line)
EOF

echo
echo "Per component, the headline (\`callgrind_components.py\` on the last run's W1 and W1 with 0 yields profiles):"
echo
python3 docs/profiling/callgrind_components.py "$out/w1.out" "$B" --tasks 150000 \
    --base "$out/w1y0.out"
