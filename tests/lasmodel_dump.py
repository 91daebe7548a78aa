#!/usr/bin/env python3
"""Prints a workload of the reference model (scheduling.md Appendix A,
`lasmodel.py`) and the model's per-task completion times, in integer
nanoseconds, for the replay test L6 in `tests/las.rs`.

Usage: lasmodel_dump.py MODEL_PY WORKLOAD RHO N

MODEL_PY is the path of `lasmodel.py` (the Rust test passes
`$TOURBILLON_LASMODEL` or `<repo>/../shared/reference/lasmodel.py`).

The model works in float microseconds. To compare exactly, the workload
that `gen(n, rho, *WORKLOADS[name], seed=7)` draws is rounded once to
integer nanoseconds (arrival instants, CPU costs and sleeps), and the
model's own `simulate` is run on that integer workload: its sums of
integers stay exact in a double (all values are far below 2**53), so its
completion times are exact integers, which the executor must reproduce.

Output, one record per line, fields separated by spaces:
    task ARRIVAL_NS THIN K C1 S1 ... CK SK   (one line per task, in order)
    done POLICY D0 D1 ... DN-1               (POLICY: fifo, las, qlas
                                              (q0 = 100 us, 16 levels),
                                              qlas+guard50ms, and
                                              qlas+guard50ms/poll-start:
                                              the guard stamped as the
                                              executor does, see
                                              simulate_qlas_guard_...)
    drift POLICY NS                          (largest |float model * 1000
                                              - integer model| over tasks,
                                              for information)
"""
import heapq
import importlib.util
import math
import sys
from collections import deque


def load_model(path):
    spec = importlib.util.spec_from_file_location("lasmodel", path)
    if spec is None or spec.loader is None:
        sys.exit(f"lasmodel_dump.py: cannot load the reference model from {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def simulate_qlas_guard_stamped_at_poll_start(tasks, q0, levels, max_wait):
    """The reference model's QLAS + max-wait guard (`simulate(tasks, 'qlas',
    q0, levels, max_wait)`, same structure and event order) with the one
    difference the executor's guard has, to check that guard exactly:

    * the guard's stamp of a task that became runnable *during* a poll (an
      arrival or a timer wake-up due in `(start, end]` of the poll) is the
      poll's start, not its end: `Las` measures waiting in the queue's
      service time, and the running poll is charged only when it returns, so
      a push inside the poll reads the service at the poll's start. A task
      requeued by its own yield is stamped at the end (charged first), and
      a push while the queue is idle at the current instant, as in the model;
    * among overdue level heads with equal stamps, the one pushed first is
      served (the executor keeps one arrival queue in push order; the model
      takes the lowest level).
    With one queue the queue is busy throughout any wait, so its service
    advances like the clock, and stamps in wall time are equivalent."""
    n = len(tasks); now = 0.0; ev = []
    for j, (t, _, _) in enumerate(tasks): heapq.heappush(ev, (t, j, j))
    seq = n; att = [0.0] * n; idx = [0] * n; done = [0.0] * n; since = [0.0] * n
    order = [0] * n; pushes = 0
    lv = [deque() for _ in range(levels)]
    pstart = None; polled = None   # start and task of the poll that just ended
    def level(a): return 0 if a < q0 else min(levels - 1, 1 + int(math.log2(a / q0)))
    def push(j, t):
        nonlocal pushes
        during = pstart is not None and t > pstart and j != polled
        since[j] = pstart if during else now
        order[j] = pushes; pushes += 1
        lv[level(att[j])].append(j)
    def pop():
        old = [d for d in lv if d and now - since[d[0]] > max_wait]
        if old: return min(old, key=lambda d: (since[d[0]], order[d[0]])).popleft()
        for d in lv:
            if d: return d.popleft()
        return None
    while True:
        while ev and ev[0][0] <= now:
            t, _, j = heapq.heappop(ev); push(j, t)
        j = pop()
        if j is None:
            if not ev: break
            now = ev[0][0]; pstart = None; polled = None; continue
        c, s = tasks[j][2][idx[j]]
        pstart = now; polled = j
        now += c; att[j] += c; idx[j] += 1
        if idx[j] == len(tasks[j][2]): done[j] = now
        else: heapq.heappush(ev, (now + s, seq, j)); seq += 1
    return done


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    model_path, name, rho, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    m = load_model(model_path)
    tasks = m.gen(n, rho, *m.WORKLOADS[name], seed=7)
    ns = [
        (round(t * 1000), thin, [(round(c * 1000), round(s * 1000)) for c, s in segs])
        for t, thin, segs in tasks
    ]
    out = sys.stdout
    for t, thin, segs in ns:
        fields = [str(t), "1" if thin else "0", str(len(segs))]
        for c, s in segs:
            fields += [str(c), str(s)]
        out.write("task " + " ".join(fields) + "\n")
    # Policy name -> (model policy, max_wait in us, as the model's CLI).
    # q0 (100 us in the model) and max_wait are scaled to ns like the
    # workload.
    policies = {
        "fifo": ("fifo", None),
        "las": ("las", None),
        "qlas": ("qlas", None),
        "qlas+guard50ms": ("qlas", 50_000.0),
    }
    for name, (pol, mw) in policies.items():
        done = m.simulate(ns, pol, q0=100_000.0, max_wait=None if mw is None else mw * 1000)
        exact = [int(d) for d in done]
        if any(d != e for d, e in zip(done, exact)):
            sys.exit(f"lasmodel_dump.py: {name} completion times are not integers")
        out.write(f"done {name} " + " ".join(map(str, exact)) + "\n")
        ref = m.simulate(tasks, pol, max_wait=mw)
        drift = max(abs(r * 1000 - e) for r, e in zip(ref, exact))
        out.write(f"drift {name} {round(drift)}\n")
    done = simulate_qlas_guard_stamped_at_poll_start(ns, 100_000.0, 16, 50_000_000.0)
    exact = [int(d) for d in done]
    out.write("done qlas+guard50ms/poll-start " + " ".join(map(str, exact)) + "\n")


if __name__ == "__main__":
    main()
