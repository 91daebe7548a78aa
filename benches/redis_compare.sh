#!/usr/bin/env bash
# redis-benchmark against redis-server and against the example sharded_kv
# (examples/sharded_kv), on one machine of at least 2 CPUs. Not run by CI.
#
#   bash benches/redis_compare.sh            # 3 rounds
#   ROUNDS=1 SECONDS_PER_TEST=2 bash benches/redis_compare.sh   # a quick look
#   NO_BUILD=1 bash benches/redis_compare.sh # use the example already built
#
# Installs redis-server and redis-tools (redis-benchmark, redis-cli) with
# apt-get when they are missing, builds the example (release), then, round
# by round, with the systems in a different order each round (rotated):
#
#   redis       redis-server, persistence off (--save '' --appendonly no)
#   tourbillon  sharded_kv serve --cores 1 --snapshot off
#   plain       sharded_kv serve --plain-tokio --snapshot off: the same
#               server code on one tokio current_thread runtime, no
#               tourbillon
#   tb+bg       sharded_kv serve --cores 1 --snapshot busy: the background
#               queue always has a snapshot pass to run
#
# each server on CPU 1 (taskset -c 1) and redis-benchmark on CPU 0
# (taskset -c 0), with
#   redis-benchmark -t set,get -r 100000 -n N -P 1 -c 50 --csv
#   redis-benchmark -t set,get -r 100000 -n N -P 64 -c 16 --csv
# (N for about SECONDS_PER_TEST seconds per command: N_P1 and N_P64 below,
# from the rates measured on the machine of docs/benchmarks.md). Then the
# 2-core row: sharded_kv serve --cores 2 (cores on CPUs 0 and 1) against
# redis-benchmark --threads 2, not pinned, at both settings, with the CPU
# time of the client (user + system, /usr/bin/time) as a share of the 2
# CPUs over its run.
#
# Prints every run and a table of the medians over the rounds: requests/s,
# p50 and p99 (ms, as redis-benchmark reports them), the server's CPU time
# per request (user + system from /proc, over the SET and GET runs of a
# setting together: on a shared machine a steadier measure of what a
# request costs than requests/s, which also counts the time the server
# waited for its CPU), tourbillon's
# requests/s as a ratio to redis-server's, plain tokio's likewise, and
# tb+bg's p99 as a ratio to tourbillon's. The raw CSV files stay in
# target/redis_compare/.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROUNDS=${ROUNDS:-3}
SECONDS_PER_TEST=${SECONDS_PER_TEST:-5}
# Requests per second seen on the Xeon VM of docs/benchmarks.md, rounded
# up: N = rate * SECONDS_PER_TEST.
RATE_P1=${RATE_P1:-150000}
RATE_P64=${RATE_P64:-1000000}
N_P1=$((RATE_P1 * SECONDS_PER_TEST))
N_P64=$((RATE_P64 * SECONDS_PER_TEST))
# Ports on 127.0.0.1 (not redis's 6379, which a system redis may hold).
PORT_REDIS=16379
PORT_KV=16380
OUT=target/redis_compare
mkdir -p "$OUT"
rm -f "$OUT"/*.csv "$OUT"/*.time

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null ||
    ! command -v redis-cli >/dev/null; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q redis-server redis-tools
fi
if [ "$(nproc)" -lt 2 ]; then
    echo "redis_compare: needs 2 CPUs (client on CPU 0, server on CPU 1)" >&2
    exit 1
fi

if [ "${NO_BUILD:-}" != 1 ]; then
    cargo build --release --example sharded_kv --features tokio
fi
KV=target/release/examples/sharded_kv
[ -x "$KV" ] || { echo "no $KV: build it with cargo build --release --example sharded_kv --features tokio" >&2; exit 1; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, Linux $(uname -r)"
echo "$(redis-server --version)"
echo "$(redis-benchmark --version)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)"
echo "N: $N_P1 requests per command at -P 1, $N_P64 at -P 64"

SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill -INT "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}
trap stop_server EXIT

# Waits until the server on port $1 answers PING (10 s at most).
wait_ready() {
    local i
    for i in $(seq 100); do
        if [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; then return 0; fi
        sleep 0.1
    done
    echo "redis_compare: no server on port $1" >&2
    return 1
}

# Starts system $1 in the background (SERVER_PID) and waits for it.
start_system() {
    case "$1" in
        redis)
            taskset -c 1 redis-server --port "$PORT_REDIS" --bind 127.0.0.1 \
                --save '' --appendonly no --daemonize no --loglevel warning \
                >"$OUT/server.log" 2>&1 &
            SERVER_PID=$!
            PORT=$PORT_REDIS ;;
        tourbillon | tb+bg)
            local snap=off
            if [ "$1" = tb+bg ]; then snap=busy; fi
            taskset -c 1 "$KV" serve --cores 1 --port "$PORT_KV" --snapshot "$snap" \
                >"$OUT/server.log" 2>&1 &
            SERVER_PID=$!
            PORT=$PORT_KV ;;
        plain)
            taskset -c 1 "$KV" serve --plain-tokio --port "$PORT_KV" --snapshot off \
                >"$OUT/server.log" 2>&1 &
            SERVER_PID=$!
            PORT=$PORT_KV ;;
        2core)
            "$KV" serve --cores 2 --port "$PORT_KV" --snapshot off >"$OUT/server.log" 2>&1 &
            SERVER_PID=$!
            PORT=$PORT_KV ;;
    esac
    wait_ready "$PORT"
}

# The server's CPU time so far (user + system, all its threads), in clock
# ticks (1/100 s).
server_ticks() {
    awk '{ print $14 + $15 }' "/proc/$SERVER_PID/stat"
}

# One redis-benchmark run: system $1, round $2, setting p1|p64, then the
# command that runs redis-benchmark (taskset -c 0, or env). Writes $OUT/<system>.<setting>.<round>.csv
# (and .time: the client's user and system CPU seconds and wall seconds;
# .cpu: the server's CPU time over the run, in clock ticks).
bench() {
    local sys=$1 round=$2 setting=$3
    shift 3
    local flags
    case "$setting" in
        p1) flags=(-n "$N_P1" -P 1 -c 50) ;;
        p64) flags=(-n "$N_P64" -P 64 -c 16) ;;
    esac
    if [ "$sys" = 2core ]; then flags+=(--threads 2); fi
    local file="$OUT/$sys.$setting.$round"
    local before after
    before=$(server_ticks)
    /usr/bin/time -f '%U %S %e' -o "$file.time" \
        "$@" redis-benchmark -p "$PORT" -t set,get -r 100000 "${flags[@]}" --csv >"$file.csv"
    after=$(server_ticks)
    echo "$((after - before))" >"$file.cpu"
    echo "  $sys $setting: $(tail -n +2 "$file.csv" | cut -d, -f1,2,5,7 | tr -d '"' | tr '\n' ' ')(test,rps,p50,p99) load $(cut -d' ' -f1 /proc/loadavg)"
}

systems=(redis tourbillon plain tb+bg)
for round in $(seq "$ROUNDS"); do
    echo "round $round"
    # Rotated: each system goes first in some round.
    n=${#systems[@]}
    for i in $(seq 0 $((n - 1))); do
        sys=${systems[$(((i + round - 1) % n))]}
        start_system "$sys"
        bench "$sys" "$round" p1 taskset -c 0
        bench "$sys" "$round" p64 taskset -c 0
        stop_server
    done
    start_system 2core
    bench 2core "$round" p1 env
    bench 2core "$round" p64 env
    stop_server
done

python3 - "$OUT" "$ROUNDS" "$N_P1" "$N_P64" <<'EOF'
import csv, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
N_P1, N_P64 = int(sys.argv[3]), int(sys.argv[4])

def load(sys_, setting, rnd):
    rows = {}
    with open(f"{out}/{sys_}.{setting}.{rnd}.csv") as f:
        for r in csv.DictReader(f):
            rows[r["test"]] = (float(r["rps"]), float(r["p50_latency_ms"]), float(r["p99_latency_ms"]))
    with open(f"{out}/{sys_}.{setting}.{rnd}.time") as f:
        user, system, wall = map(float, f.read().split()[-3:])
    return rows, (user + system) / (2 * wall)

med = statistics.median
systems = ["redis", "tourbillon", "plain", "tb+bg", "2core"]
names = {"redis": "redis-server", "tourbillon": "sharded_kv, 1 tourbillon core",
         "plain": "sharded_kv, plain tokio", "tb+bg": "sharded_kv, 1 core, snapshot busy",
         "2core": "sharded_kv, 2 cores, --threads 2"}
settings = {"p1": "-P 1 -c 50", "p64": "-P 64 -c 16"}
results = {}
for s in systems:
    for st in settings:
        for cmd in ["SET", "GET"]:
            runs = [load(s, st, r)[0][cmd] for r in range(1, rounds + 1)]
            results[s, st, cmd] = runs
print()
print("| system | setting | command | requests/s (runs) | median | p50 ms | p99 ms |")
print("|---|---|---|---|---:|---:|---:|")
for s in systems:
    for st, label in settings.items():
        for cmd in ["SET", "GET"]:
            runs = results[s, st, cmd]
            rps = ", ".join(f"{r[0]:,.0f}" for r in runs)
            print(f"| {names[s]} | {label} | {cmd} | {rps} | **{med(r[0] for r in runs):,.0f}** "
                  f"| {med(r[1] for r in runs):.3f} | {med(r[2] for r in runs):.3f} |")
print()
print("Server CPU time per request (us, user + system, SET and GET runs together; median of the runs, then the runs):")
print()
print("| system | " + " | ".join(settings.values()) + " |")
print("|---|" + "---|" * len(settings))
cpu = {}
for s in systems:
    cells = []
    for st in settings:
        n = (N_P1 if st == "p1" else N_P64) * 2
        runs = []
        for r in range(1, rounds + 1):
            with open(f"{out}/{s}.{st}.{r}.cpu") as f:
                runs.append(int(f.read()) * 1e4 / n)
        cpu[s, st] = med(runs)
        cells.append(f"**{med(runs):.2f}** ({', '.join(f'{x:.2f}' for x in runs)})")
    print(f"| {names[s]} | " + " | ".join(cells) + " |")
print()
print("| setting | command | tourbillon / redis-server, requests/s (runs) | plain tokio / redis-server | p99 with snapshot busy / without (runs) |")
print("|---|---|---|---|---|")
for st, label in settings.items():
    for cmd in ["SET", "GET"]:
        def ratios(a, b, i):
            return [x[i] / y[i] for x, y in zip(results[a, st, cmd], results[b, st, cmd])]
        tb = ratios("tourbillon", "redis", 0)
        pl = ratios("plain", "redis", 0)
        bg = ratios("tb+bg", "tourbillon", 2)
        m = lambda a, b, i: med(r[i] for r in results[a, st, cmd]) / med(r[i] for r in results[b, st, cmd])
        print(f"| {label} | {cmd} | **{m('tourbillon', 'redis', 0):.2f}** ({', '.join(f'{x:.2f}' for x in tb)}) "
              f"| **{m('plain', 'redis', 0):.2f}** ({', '.join(f'{x:.2f}' for x in pl)}) "
              f"| **{m('tb+bg', 'tourbillon', 2):.2f}** ({', '.join(f'{x:.2f}' for x in bg)}) |")
print()
for st, label in settings.items():
    shares = [load("2core", st, r)[1] for r in range(1, rounds + 1)]
    print(f"* 2-core row, {label}: redis-benchmark --threads 2 used {med(shares):.0%} of the 2 CPUs "
          f"(median; runs {', '.join(f'{x:.0%}' for x in shares)}; user + system CPU time over wall time x 2)")
EOF
