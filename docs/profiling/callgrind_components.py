#!/usr/bin/env python3
"""Per-component instruction counts of a callgrind profile of tourbillon.

With fat LTO almost the whole executor is inlined into the benchmark's
`workload` function, so `callgrind_annotate` can only say which *source
file* an instruction came from (core/src/cell.rs, vec_deque/mod.rs, ...),
not which part of the executor ran it. This script recovers that: it reads
a callgrind profile written with `--dump-instr=yes`, asks `addr2line -i`
for the inline chain of every executed address of the profiled binary, and
charges each instruction to the first frame of that chain (innermost
first) that matches one of the component rules below. Calls into libc
(malloc, free, realloc) are charged, inclusively, by their call site.

usage:
  valgrind --tool=callgrind --dump-instr=yes \
      --toggle-collect='overhead_profile::workload' \
      --callgrind-out-file=cg.out BINARY 1 5 1
  python3 docs/profiling/callgrind_components.py cg.out BINARY \
      [--tasks 50000] [--base cg0.out] [--lines 20]

`--base` takes a second profile of the same binary (e.g. `1 0 1`, no
yields) and adds a column "per extra poll" = (Ir - base Ir) / (tasks x 5).
Needs python3 and binutils' addr2line.
"""
import argparse
import collections
import re
import subprocess

# (component, regex on the demangled function name of an inline frame).
# The first rule that matches a frame wins, walking from the innermost frame
# outwards, so specific rules (growth, RefCell flags) come first.
RULES = [
    ("container growth (Vec, VecDeque, slab reallocation)",
     r"finish_grow|grow_one|grow_amortized|do_reserve|VecDeque<T,A>::grow$|::realloc"),
    ("task cell + poll harness",
     r"drop_in_place<(alloc::boxed::Box<)?tourbillon::task(_impl)?::raw::(cell::)?Cell"),
    ("join (JoinHandle::poll/drop, JoinCell)",
     r"TypeId::of|raw_waker::wake|MainWaker|(set|take)_join_waker|join_waker_ptr"
     r"|JoinCell"),
    ("run loop (run_turn, run_queue, checkpoint, finish, EEVDF, block_on)",
     r"__udivti3|u128_div|SystemClock|Groups::leave|tourbillon::executor::run_loop"),
    ("RefCell borrow flags",
     r"core::cell::(RefCell<T>::(try_)?borrow|BorrowRef|is_reading|is_writing)"
     r"|drop_in_place<core::cell::(BorrowRef|Ref)"),
    ("future body + yield_now",
     r"^overhead_profile::workload::\{\{closure\}\}::\{\{closure\}\}::\{\{closure\}\}$"
     r"|YieldNow|try_fast_yield|yield_now"),
    ("join (JoinHandle::poll/drop, JoinCell)",
     r"JoinHandle<T> as core::future|JoinHandle<T> as core::ops::drop"
     r"|drop_in_place<tourbillon::task(_impl)?::join::JoinHandle|take_result"),
    ("scheduler (QueueScheduler, RunnableFifo)",
     r"QueueScheduler|RunnableFifo|Queues::push|VecDeque"),
    ("slab (TaskSlab get/insert/remove, slab crate)",
     r"TaskSlab(<S>)?::(get|insert|remove)|^slab::|<slab::"),
    ("waker (task::waker, Header::wake, Schedule::wake, Core::wake_by_header)",
     r"tourbillon::task(_impl)?::waker::|tourbillon::task(_impl)?::raw::cell::wake$"
     r"|Header::wake$|Schedule>::wake$|wake_by_header|Core::push_task"),
    ("task cell + poll harness",
     r"tourbillon::task(_impl)?::|catch_unwind|drop_in_place<tourbillon::task"),
    ("spawn path (QueueHandle::spawn, Core::spawn_task, insert_and_queue)",
     r"spawn|JoinHandle<T>>::new|KeyMap"),
    ("run loop (run_turn, run_queue, checkpoint, finish, EEVDF, block_on)",
     r"tourbillon::executor|tourbillon::queue|tourbillon::sched|tourbillon::clock"),
    ("benchmark main future (Vec of handles, range)", r"overhead_profile::workload"),
]
RX = [(name, re.compile(rx)) for name, rx in RULES]
COST = re.compile(r"^(0x[0-9a-f]+|\d+|[+\-]\d+|\*)(\s|$)")
NAME = re.compile(r"^(ob|fl|fi|fe|fn|cob|cfi|cfl|cfn)=(.*)$")


def parse(path):
    """Self Ir per (object, address); inclusive Ir per call site."""
    names = {"ob": {}, "fl": {}, "fn": {}}
    cur_ob = None
    callee_ob = callee_fn = None
    selfc = collections.Counter()
    calls = collections.Counter()
    last = [0, 0]
    pending_call = False

    def name(kind, val):
        m = re.match(r"\((\d+)\)(?: (.*))?$", val)
        if not m:
            return val
        table = names[kind]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table[m.group(1)]

    def pos(tok, i):
        if tok == "*":
            return last[i]
        if tok[0] == "+":
            return last[i] + int(tok[1:], 0)
        if tok[0] == "-":
            return last[i] - int(tok[1:], 0)
        return int(tok, 0)

    for line in open(path):
        line = line.rstrip("\n")
        m = NAME.match(line)
        if m:
            k, v = m.groups()
            if k == "ob":
                cur_ob = name("ob", v)
            elif k == "cob":
                callee_ob = name("ob", v)
            elif k == "fn":
                name("fn", v)
                callee_ob = None
            elif k == "cfn":
                callee_fn = name("fn", v)
            else:
                name("fl", v)
            continue
        if line.startswith("calls="):
            pending_call = True
            continue
        if COST.match(line):
            toks = line.split()
            if len(toks) < 3:
                continue
            last[0], last[1] = pos(toks[0], 0), pos(toks[1], 1)
            ir = int(toks[2])
            if pending_call:
                calls[(cur_ob, last[0], callee_ob or cur_ob, callee_fn)] += ir
                pending_call = False
                callee_ob = None
            else:
                selfc[(cur_ob, last[0])] += ir
    return selfc, calls


def inline_chains(binary, addrs):
    inp = "".join("0x%x\n" % a for a in addrs)
    out = subprocess.run(["addr2line", "-i", "-f", "-C", "-a", "-e", binary],
                         input=inp, capture_output=True, text=True, check=True).stdout
    chains, cur, lines, i = {}, None, out.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if re.fullmatch(r"0x[0-9a-f]+", line):
            cur = int(line, 16)
            chains[cur] = []
            i += 1
        elif line == "":
            i += 1
        else:
            loc = lines[i + 1] if i + 1 < len(lines) else ""
            chains[cur].append((line, loc.split(" ")[0]))
            i += 2  # function name, then file:line
    return chains


def components(path, binary):
    selfc, calls = parse(path)
    obs = {ob for ob, _ in selfc}
    main = [ob for ob in obs if ob and ob.endswith(binary.rsplit("/", 1)[-1])]
    if not main:
        raise SystemExit("binary %s not found in %s" % (binary, path))
    main = main[0]
    addrs = sorted({a for ob, a in selfc if ob == main}
                   | {a for ob, a, _, _ in calls if ob == main})
    chains = inline_chains(binary, addrs)

    def classify(a):
        for fn, _ in chains.get(a, []):
            for comp, rx in RX:
                if rx.search(fn):
                    return comp
        return "other"

    def own_line(a):
        """Innermost frame in the profiled crates' own sources."""
        for _, loc in chains.get(a, []):
            if re.search(r"/(src|benches)/", loc) and not re.search(r"rustlib|/rustc/|registry", loc):
                return re.sub(r"^.*?/((src|benches)/)", r"\1", loc)
        return "?"

    comp = collections.Counter()
    libc = collections.Counter()
    by_line = collections.Counter()
    for (ob, a), ir in selfc.items():
        if ob == main:
            k = classify(a)
            comp[k] += ir
            by_line[(own_line(a), k)] += ir
    for (ob, a, cob, cfn), ir in calls.items():
        if ob != main or cob == main or (cfn or "").startswith("__libc_start_main"):
            continue
        fn = (cfn or "?").split("@")[0]
        if fn in ("malloc", "free", "calloc"):
            comp["malloc/free (glibc)"] += ir
            libc[(fn, classify(a))] += ir
        elif fn == "realloc":
            comp[classify(a)] += ir
            libc[(fn, classify(a))] += ir
        else:
            comp["other"] += ir
    return comp, libc, by_line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("binary")
    ap.add_argument("--tasks", type=int, default=50_000)
    ap.add_argument("--yields", type=int, default=5)
    ap.add_argument("--base", help="profile of the same binary with 0 yields")
    ap.add_argument("--lines", type=int, default=0, metavar="N",
                    help="also list the N heaviest source lines (innermost line of "
                         "the crate's own code, per component)")
    args = ap.parse_args()
    comp, libc, by_line = components(args.profile, args.binary)
    base = components(args.base, args.binary)[0] if args.base else None

    def tenths(x):
        # One decimal; a difference that rounds to zero prints as 0.0,
        # not -0.0 (`-0.0 + 0.0` is `0.0`).
        return f"{round(x, 1) + 0.0:.1f}"

    total = sum(comp.values())
    extra = args.tasks * args.yields
    head = "| component | Ir per task | share |"
    if base is not None:
        head += " Ir per task, 0 yields | Ir per extra (yield) poll |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for k, ir in comp.most_common():
        row = f"| {k} | {ir / args.tasks:.0f} | {100 * ir / total:.1f}% |"
        if base is not None:
            b = base.get(k, 0)
            row += f" {b / args.tasks:.0f} | {tenths((ir - b) / extra)} |"
        print(row)
    row = f"| **total** | **{total / args.tasks:.0f}** | 100% |"
    if base is not None:
        bt = sum(base.values())
        row += f" **{bt / args.tasks:.0f}** | **{tenths((total - bt) / extra)}** |"
    print(row)
    print()
    print(f"Total Ir {total:,} over {args.tasks:,} tasks; of it, glibc's allocator:")
    print()
    for (fn, k), ir in libc.most_common():
        if ir >= args.tasks:
            print(f"* `{fn}` called from {k}: {ir:,} Ir ({ir / args.tasks:.0f} per task)")
    if args.lines:
        print()
        print("| Ir per task | line | component |")
        print("|---:|---|---|")
        for (loc, k), ir in by_line.most_common(args.lines):
            print(f"| {ir / args.tasks:.0f} | `{loc}` | {k} |")


if __name__ == "__main__":
    main()
