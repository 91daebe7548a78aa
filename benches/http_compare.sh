#!/usr/bin/env bash
# wrk against integrations/hyper/examples/http_server.rs: tourbillon (queues Http and
# Background, nested in tokio) against the same server on plain tokio
# (--plain-tokio: a LocalSet of a current_thread runtime), each without
# background load and with it at each chunk size of $CHUNKS_KIB (the work a
# background task does between two yields: 16 KiB is about 7 us of
# checksumming on the machine of docs/benchmarks.md, 256 KiB about 110 us). Not part of CI.
#
#   bash benches/http_compare.sh            # 3 rounds of 5 s per case
#   ROUNDS=5 DURATION=10 bash benches/http_compare.sh
#
# Each case starts a fresh server pinned to CPU $SERVER_CPU (taskset),
# waits for its port, warms it up with $WARMUP s of wrk (not counted),
# reads the server's /stats, runs `wrk -t1 -c$CONNECTIONS -d${DURATION}s
# --latency` pinned to CPU $CLIENT_CPU against `GET /`, reads /stats again
# (the background's bytes over the measured run) and the server thread's
# /proc/PID/schedstat before and after (its time on the CPU, its time
# runnable but waiting while other processes had the CPU, and the time
# slices it ran), and stops the server with SIGINT (a graceful shutdown).
# The cases run once per round, the systems alternated (odd rounds
# tourbillon first, even rounds tokio first), so that a disturbance of the
# machine hits one round of every case rather than all rounds of one. It prints each run, then the
# medians over the rounds and the ratios of the medians:
#
#   * tourbillon p99 with background / tourbillon p99 without (target <= 1.2)
#   * tourbillon p99 with background / tokio p99 with background (target < 1)
#
# for each chunk size.
#
# wrk is closed-loop: each of its connections sends its next request when
# the previous answer arrives, so a slower server gets fewer requests and
# its latency is measured at the rate it sustains. (An open-loop tool at a
# fixed rate, wrk2's `-R`, is not a Debian package.)
#
# Settings (environment): ROUNDS (3), DURATION (5, s), WARMUP (1, s),
# CONNECTIONS (50), BACKGROUND (4 tasks), CHUNKS_KIB ("16 256"), PORT (18080),
# SERVER_CPU (1), CLIENT_CPU (0), SERVER_ARGS (extra options for the
# tourbillon server, e.g. "--shares 4:1 --latency-us 0"), NO_BUILD=1 to
# use the binary as built.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNECTIONS=${CONNECTIONS:-50}
BACKGROUND=${BACKGROUND:-4}
CHUNKS_KIB=${CHUNKS_KIB:-16 256}
PORT=${PORT:-18080}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
SERVER_ARGS=${SERVER_ARGS:-}

if ! command -v wrk >/dev/null; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    $sudo apt-get install -y -q wrk || { $sudo apt-get update -q && $sudo apt-get install -y -q wrk; }
fi
command -v taskset >/dev/null || { echo "taskset (util-linux) is needed" >&2; exit 1; }

if [ "${NO_BUILD:-}" != 1 ]; then
    cargo build --release -p tourbillon-hyper --example http_server
fi
BIN="${CARGO_TARGET_DIR:-target}/release/examples/http_server"
[ -x "$BIN" ] || { echo "no $BIN: build it with cargo build --release -p tourbillon-hyper --example http_server" >&2; exit 1; }

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill -INT "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

# GET /stats with bash's /dev/tcp (no client needed); prints the body.
stats() {
    local body
    exec 3<>"/dev/tcp/127.0.0.1/$PORT"
    printf 'GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
    body="$(cat <&3)"
    exec 3<&-
    printf '%s\n' "$body"
}

# The number after "key": in a /stats body (the first such key).
field() { sed -n "s/.*\"$2\": *\([0-9.]*\).*/\1/p" <<<"$1" | head -n 1; }

# The machine's steal time in ms, both CPUs together: time the hypervisor
# gave this VM's virtual CPUs to something else (/proc/stat, field 8 of
# the "cpu" line, in ticks of 10 ms).
steal_ms() { awk '$1 == "cpu" { print $9 * 10 }' /proc/stat; }

# wrk's latency ("557.00us", "1.44ms", "2.00s") in us.
to_us() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) u = 1; else if (v ~ /ms$/) u = 1000; else if (v ~ /s$/) u = 1000000; else u = 1
        printf "%.0f", n * u }'
}

# run SYSTEM LOAD: one case (LOAD: none, or bgK for background tasks that
# yield every K KiB); appends "system load rps p50 p99 bg_mib_s cpu wait
# gap steal" to $WORK/results and prints the row.
run() {
    local system=$1 load=$2 args=() out="$WORK/wrk.out" log="$WORK/server.log"
    if [ "$system" = tokio ]; then
        args+=(--plain-tokio)
    else
        # shellcheck disable=SC2206
        args+=($SERVER_ARGS)
    fi
    if [ "$load" != none ]; then args+=(--background "$BACKGROUND" --chunk-kib "${load#bg}"); fi
    taskset -c "$SERVER_CPU" "$BIN" --port "$PORT" "${args[@]}" >"$log" 2>&1 &
    SERVER_PID=$!
    local tries=0
    until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -gt 200 ]; then echo "the server did not start:" >&2; cat "$log" >&2; exit 1; fi
        sleep 0.05
    done
    taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "http://127.0.0.1:$PORT/" >/dev/null
    local before after load_avg sched0 sched1 t0 t1 steal0 steal1
    load_avg="$(cut -d' ' -f1 /proc/loadavg)"
    before="$(stats)"
    # The server's one thread: ns on the CPU, ns runnable but waiting for it.
    read -r -a sched0 <"/proc/$SERVER_PID/schedstat"
    steal0="$(steal_ms)"
    t0=$(date +%s%N)
    taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$PORT/" >"$out"
    read -r -a sched1 <"/proc/$SERVER_PID/schedstat"
    steal1="$(steal_ms)"
    t1=$(date +%s%N)
    after="$(stats)"
    kill -INT "$SERVER_PID"
    wait "$SERVER_PID" || { echo "the server failed:" >&2; cat "$log" >&2; exit 1; }
    SERVER_PID=""
    local rps p50 p99 bytes ms bg
    rps="$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$out")"
    p50="$(to_us "$(awk '$1 == "50%" { print $2 }' "$out")")"
    p99="$(to_us "$(awk '$1 == "99%" { print $2 }' "$out")")"
    bytes=$(($(field "$after" bytes) - $(field "$before" bytes)))
    ms=$(($(field "$after" uptime_ms) - $(field "$before" uptime_ms)))
    bg="$(awk -v b="$bytes" -v ms="$ms" 'BEGIN { printf "%.0f", b / 1048576 / (ms / 1000) }')"
    local cpu wait gap
    cpu=$(((sched1[0] - sched0[0]) * 100 / (t1 - t0)))
    wait=$(((sched1[1] - sched0[1]) * 100 / (t1 - t0)))
    # The mean wait per time slice the thread ran, in us.
    gap=$(((sched1[1] - sched0[1]) / ((sched1[2] - sched0[2]) > 0 ? (sched1[2] - sched0[2]) : 1) / 1000))
    if grep -q "Socket errors" "$out"; then
        echo "wrk: $(grep 'Socket errors' "$out")" >&2
    fi
    local stolen=$((steal1 - steal0))
    echo "$system $load $rps $p50 $p99 $bg $cpu $wait $gap $stolen" >>"$WORK/results"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s%% | %s%% | %s | %s | %s |\n' "$round" "$system" "$load" \
        "$rps" "$p50" "$p99" "$bg" "$cpu" "$wait" "$gap" "$stolen" "$load_avg"
}

echo "http_compare: $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, Linux $(uname -r), $(wrk --version 2>&1 | head -n 1 | cut -d' ' -f1-2)"
echo "server on CPU $SERVER_CPU: $BIN --port $PORT [--plain-tokio | $SERVER_ARGS] [--background $BACKGROUND --chunk-kib K], K in: $CHUNKS_KIB"
echo "client on CPU $CLIENT_CPU: wrk -t1 -c$CONNECTIONS -d${DURATION}s --latency http://127.0.0.1:$PORT/ (after ${WARMUP} s of warm-up)"
echo "$ROUNDS rounds; latency in us; background bgK: $BACKGROUND tasks yielding every K KiB;"
echo "bg MiB/s: what the background checksummed during the run;"
echo "server CPU: the server thread's time on its CPU, and waited: its time runnable but"
echo "waiting for the CPU (other processes had it), in % of the run; wait/slice: its mean"
echo "wait in us per time slice it ran (/proc/PID/schedstat); load: the 1-minute load"
echo "average before the run; steal ms: the hypervisor's steal time on both CPUs during"
echo "the run (/proc/stat)"
echo
echo "| round | system | background | req/s | p50 | p99 | bg MiB/s | server CPU | waited | wait/slice | steal ms | load |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
loads="none"
for k in $CHUNKS_KIB; do loads="$loads bg$k"; done
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="tourbillon tokio"; else order="tokio tourbillon"; fi
    for load in $loads; do
        for system in $order; do
            run "$system" "$load"
        done
    done
done

# The medians (the middle value; the lower middle for an even count).
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
col() { awk -v s="$1" -v l="$2" -v c="$3" '$1 == s && $2 == l { print $c }' "$WORK/results" | median; }
all() { awk -v s="$1" -v l="$2" -v c="$3" '$1 == s && $2 == l { printf "%s%s", sep, $c; sep = ", " }' "$WORK/results"; }

echo
echo "Medians of $ROUNDS runs (each run's value in parentheses):"
echo
echo "| system | background | req/s | p50 (us) | p99 (us) | bg MiB/s | server CPU | waited | wait/slice (us) | steal ms |"
echo "|---|---|---|---|---|---:|---:|---:|---:|---:|"
for load in $loads; do
    for system in tourbillon tokio; do
        if [ "$load" != none ]; then what="$BACKGROUND tasks, ${load#bg} KiB"; else what="none"; fi
        printf '| %s | %s | **%s** (%s) | **%s** (%s) | **%s** (%s) | %s | %s%% | %s%% | %s | %s |\n' "$system" "$what" \
            "$(col "$system" "$load" 3)" "$(all "$system" "$load" 3)" \
            "$(col "$system" "$load" 4)" "$(all "$system" "$load" 4)" \
            "$(col "$system" "$load" 5)" "$(all "$system" "$load" 5)" \
            "$(col "$system" "$load" 6)" "$(col "$system" "$load" 7)" "$(col "$system" "$load" 8)" \
            "$(col "$system" "$load" 9)" "$(col "$system" "$load" 10)"
    done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
t_none=$(col tourbillon none 5)
k_none=$(col tokio none 5)
echo
echo "Ratios of the medians:"
echo
echo "| ratio | value | target |"
echo "|---|---:|---|"
echo "| tourbillon p99 / tokio p99, no background | $(ratio "$t_none" "$k_none") | |"
for k in $CHUNKS_KIB; do
    t_bg=$(col tourbillon "bg$k" 5)
    k_bg=$(col tokio "bg$k" 5)
    echo "| $k KiB chunks: tourbillon p99, background / none | $(ratio "$t_bg" "$t_none") | <= 1.2 |"
    echo "| $k KiB chunks: tourbillon p99 / tokio p99, with background | $(ratio "$t_bg" "$k_bg") | < 1 |"
    echo "| $k KiB chunks: tokio p99, background / none | $(ratio "$k_bg" "$k_none") | |"
    echo "| $k KiB chunks: tourbillon req/s, background / none | $(ratio "$(col tourbillon "bg$k" 3)" "$(col tourbillon none 3)") | |"
    echo "| $k KiB chunks: tokio req/s, background / none | $(ratio "$(col tokio "bg$k" 3)" "$(col tokio none 3)") | |"
    echo "| $k KiB chunks: tourbillon req/s / tokio req/s, with background | $(ratio "$(col tourbillon "bg$k" 3)" "$(col tokio "bg$k" 3)") | |"
done
