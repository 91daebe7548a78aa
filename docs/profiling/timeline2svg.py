#!/usr/bin/env python3
"""Draws a tourbillon timeline (a Chrome trace-event JSON file written by
`Timeline::write_chrome_json` or `tourbillon::timeline::write_chrome_json`)
as an SVG picture: one lane per queue (per core and queue for a pool), each
poll a rectangle coloured by its queue (its task, queue, start and duration
on hover), each run of a queue a pale band behind its polls, a time axis,
and a legend with each queue's time in polls and its share of the time in
polls of its executor.

Polls narrower than a pixel that follow each other in a lane within a
pixel are drawn as one rectangle (its hover text says how many polls and
which tasks), so that a long window stays a small file; nothing is left
out of the totals.

Python 3 standard library only:

    python3 docs/profiling/timeline2svg.py trace.json -o timeline.svg
    python3 docs/profiling/timeline2svg.py trace.json --from-ms 20 --to-ms 60 -o window.svg
"""

import argparse
import html
import json
import sys

PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
]


def load(path):
    with open(path, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes, threads, psort, tsort = {}, {}, {}, {}
    polls, runs = [], []
    for e in events:
        ph, pid, tid = e.get("ph"), e.get("pid", 0), e.get("tid", 0)
        if ph == "M":
            args = e.get("args", {})
            if e["name"] == "process_name":
                processes[pid] = args.get("name", str(pid))
            elif e["name"] == "thread_name":
                threads[(pid, tid)] = args.get("name", str(tid))
            elif e["name"] == "process_sort_index":
                psort[pid] = args.get("sort_index", pid)
            elif e["name"] == "thread_sort_index":
                tsort[(pid, tid)] = args.get("sort_index", tid)
        elif ph == "X":
            item = (pid, tid, float(e["ts"]), float(e.get("dur", 0)), e)
            (runs if e.get("cat") == "run" else polls).append(item)
    dropped = 0
    other = trace.get("otherData", {}) if isinstance(trace, dict) else {}
    try:
        dropped = int(other.get("dropped_polls", 0))
    except ValueError:
        pass
    lanes = sorted(
        {(p[0], p[1]) for p in polls + runs} | set(threads),
        key=lambda k: (psort.get(k[0], k[0]), tsort.get(k, k[1])),
    )
    return processes, threads, lanes, polls, runs, dropped


def fmt_us(us):
    if us >= 1000:
        return f"{us / 1000:.3f} ms"
    return f"{us:.3f} us"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="Chrome trace-event JSON from tourbillon")
    ap.add_argument("-o", "--output", default="-", help="SVG file (default: stdout)")
    ap.add_argument("--from-ms", type=float, default=None, help="window start, ms from the first poll")
    ap.add_argument("--to-ms", type=float, default=None, help="window end, ms from the first poll")
    ap.add_argument("--width", type=int, default=1200, help="width of the time area, pixels")
    ap.add_argument("--title", default=None, help="title line (default: the file name)")
    a = ap.parse_args()

    processes, threads, lanes, polls, runs, dropped = load(a.trace)
    if not polls:
        sys.exit("no polls in the trace")
    t0 = min(p[2] for p in polls)
    t1 = max(p[2] + p[3] for p in polls)
    lo = t0 + a.from_ms * 1000 if a.from_ms is not None else t0
    hi = t0 + a.to_ms * 1000 if a.to_ms is not None else t1
    if hi <= lo:
        sys.exit("empty window")

    def clip(items):
        return [p for p in items if p[2] < hi and p[2] + p[3] > lo]

    polls, runs = clip(polls), clip(runs)
    span = hi - lo
    px = a.width / span  # pixels per microsecond

    # Colours by queue name, in lane order.
    qcolour = {}
    for lane in lanes:
        name = threads.get(lane, str(lane[1]))
        if name not in qcolour:
            qcolour[name] = PALETTE[len(qcolour) % len(PALETTE)]

    # Time in polls, inside the window, per lane and per executor.
    busy = {lane: 0.0 for lane in lanes}
    count = {lane: 0 for lane in lanes}
    for pid, tid, ts, dur, _ in polls:
        busy[(pid, tid)] += min(ts + dur, hi) - max(ts, lo)
        count[(pid, tid)] += 1
    per_pid = {}
    for (pid, _), b in busy.items():
        per_pid[pid] = per_pid.get(pid, 0.0) + b

    left, lane_h, gap, top = 230, 26, 6, 56
    legend_h = 22 * (len(lanes) + 2)
    height = top + len(lanes) * (lane_h + gap) + 50 + legend_h
    width = left + a.width + 30
    out = []
    w = out.append
    w(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
      f'font-family="sans-serif" font-size="12">')
    w(f'<rect width="{width}" height="{height}" fill="white"/>')
    title = a.title or a.trace
    w(f'<text x="10" y="20" font-size="15" font-weight="bold">{html.escape(title)}</text>')
    sub = (f"{len(polls)} polls, {fmt_us(span)} window"
           f"{f'; {dropped} polls dropped by the recorder (buffer full)' if dropped else ''}; "
           "hover a rectangle for its task")
    w(f'<text x="10" y="38" fill="#444">{html.escape(sub)}</text>')

    lane_y = {}
    for i, lane in enumerate(lanes):
        y = top + i * (lane_h + gap)
        lane_y[lane] = y
        pname = processes.get(lane[0], f"executor {lane[0]}")
        qname = threads.get(lane, str(lane[1]))
        w(f'<text x="{left - 8}" y="{y + lane_h / 2 + 4}" text-anchor="end">'
          f'{html.escape(pname)} / {html.escape(qname)}</text>')
        w(f'<rect x="{left}" y="{y}" width="{a.width}" height="{lane_h}" fill="#f4f4f4"/>')

    def x_of(ts):
        return left + (min(max(ts, lo), hi) - lo) * px

    # Runs: pale bands.
    for pid, tid, ts, dur, e in runs:
        lane = (pid, tid)
        if lane not in lane_y:
            continue
        x0, x1 = x_of(ts), x_of(ts + dur)
        colour = qcolour[threads.get(lane, str(tid))]
        tip = f"{e.get('name', 'run')}: {fmt_us(dur)} from {fmt_us(ts - t0)}"
        w(f'<rect x="{x0:.2f}" y="{lane_y[lane]}" width="{max(x1 - x0, 0.3):.2f}" '
          f'height="{lane_h}" fill="{colour}" fill-opacity="0.18">'
          f'<title>{html.escape(tip)}</title></rect>')

    # Polls: a rectangle each, sub-pixel neighbours merged.
    by_lane = {}
    for p in sorted(polls, key=lambda p: p[2]):
        by_lane.setdefault((p[0], p[1]), []).append(p)
    for lane, items in by_lane.items():
        colour = qcolour[threads.get(lane, str(lane[1]))]
        y = lane_y[lane] + 3
        h = lane_h - 6
        group = []

        def flush():
            if not group:
                return
            x0 = x_of(group[0][2])
            x1 = x_of(max(g[2] + g[3] for g in group))
            total = sum(g[3] for g in group)
            if len(group) == 1:
                e = group[0][4]
                args = e.get("args", {})
                tip = (f"{e.get('name')} (task {args.get('task')}), "
                       f"{threads.get(lane, '')}: {fmt_us(group[0][3])} "
                       f"at {fmt_us(group[0][2] - t0)}")
            else:
                names = []
                for g in group:
                    n = g[4].get("name")
                    if n not in names:
                        names.append(n)
                shown = ", ".join(str(n) for n in names[:6])
                more = f" and {len(names) - 6} more" if len(names) > 6 else ""
                tip = (f"{len(group)} polls of {shown}{more}, "
                       f"{threads.get(lane, '')}: {fmt_us(total)} in polls "
                       f"from {fmt_us(group[0][2] - t0)}")
            w(f'<rect x="{x0:.2f}" y="{y}" width="{max(x1 - x0, 0.5):.2f}" height="{h}" '
              f'fill="{colour}"><title>{html.escape(tip)}</title></rect>')
            group.clear()

        for p in items:
            if group:
                end = max(g[2] + g[3] for g in group)
                small = (p[3] * px < 1.0) and ((end - group[0][2]) * px < 1.0)
                if not (small and (p[2] - end) * px < 1.0):
                    flush()
            group.append(p)
        flush()

    # Time axis.
    axis_y = top + len(lanes) * (lane_h + gap) + 4
    w(f'<line x1="{left}" y1="{axis_y}" x2="{left + a.width}" y2="{axis_y}" stroke="black"/>')
    steps = [1, 2, 5]
    step, k = 1.0, 0
    while span / step > 10:
        step = steps[k % 3] * 10 ** (k // 3)
        k += 1
    t = 0.0
    while t <= span + 1e-9:
        x = left + t * px
        w(f'<line x1="{x:.2f}" y1="{axis_y}" x2="{x:.2f}" y2="{axis_y + 5}" stroke="black"/>')
        w(f'<text x="{x:.2f}" y="{axis_y + 18}" text-anchor="middle">'
          f'{fmt_us(t + lo - t0)}</text>')
        t += step
    w(f'<text x="{left + a.width}" y="{axis_y + 34}" text-anchor="end" fill="#444">'
      f'time from the first poll of the trace</text>')

    # Legend: per lane, time in polls and share of its executor's.
    ly = axis_y + 56
    w(f'<text x="10" y="{ly}" font-weight="bold">queue: time in polls in the window, '
      f'share of its executor\'s time in polls, polls</text>')
    for i, lane in enumerate(lanes):
        y = ly + 20 * (i + 1)
        qname = threads.get(lane, str(lane[1]))
        pname = processes.get(lane[0], f"executor {lane[0]}")
        total = per_pid.get(lane[0], 0.0)
        share = 100.0 * busy[lane] / total if total else 0.0
        w(f'<rect x="10" y="{y - 11}" width="14" height="14" fill="{qcolour[qname]}"/>')
        w(f'<text x="30" y="{y}">{html.escape(pname)} / {html.escape(qname)}: '
          f'{fmt_us(busy[lane])}, {share:.1f}%, {count[lane]} polls</text>')
    w("</svg>")
    text = "\n".join(out) + "\n"
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    for lane in lanes:
        total = per_pid.get(lane[0], 0.0)
        share = 100.0 * busy[lane] / total if total else 0.0
        print(f"{processes.get(lane[0], lane[0])} / {threads.get(lane, lane[1])}: "
              f"{busy[lane] / 1000:.3f} ms in {count[lane]} polls, {share:.1f}%",
              file=sys.stderr)


if __name__ == "__main__":
    main()
