#!/usr/bin/env python3
"""Experiments that bound what a queue switch can cost: builds of the
library with parts of the switch left out, for docs/benchmarks.md ("The
least a queue switch can cost").

Each build is an experiment, not a valid executor: it is correct only for
the ping-pong between two queues of W4 (`compare`) and of
`overhead_profile pingpong`, whose switches all take the same path. The
script edits the library's source in place, so run it on a throwaway
worktree of the commit the text names (the source it edits must read as
there; it stops with a message naming what it did not find otherwise):

  git worktree add /tmp/bounds 2b390c9
  python3 docs/profiling/switch_bounds.py /tmp/bounds step,checks
  cd /tmp/bounds && cargo bench -p tourbillon-peers --bench compare --no-run

PARTS, comma-separated, the parts left out:

  step       `Eevdf::switch_lone_picked` does only the least that this
             ping-pong needs (`Eevdf::least_switch`): the departing queue's
             charge, written as its saved vruntime, and its runnable flag;
             the placed queue's vruntime, deadline and runnable flag; the
             runnable set, the lone queue, `v0` and the load. Left out:
             the departing queue's vruntime field, deadline renewal and
             lag, the sum `S`, and the tests that choose this case (the
             placed queue not fresh, without lag, the vruntime at or past
             `v0`).
  checks     the checks before a switch: a held panic, boundary work, the
             inbox, the turn's end (`Core::switch_in_run`) and
             `Queues::switch_target`'s (one pending queue, the run's ids
             used up, the running queue lone and empty, the pending one of
             the same mode and not empty); the pending queue is taken.
  countdown  the poll-cost estimate's update in the switch's charge and
             the next run's countdown, which is set to the turn's polls
             left; the charge still counts the queue's service and polls.

usage: switch_bounds.py WORKTREE PARTS
"""
import os
import sys

PARTS = ("step", "checks", "countdown")


def apply(root, edits):
    """Makes each edit `(path, old, new)` under `root`: the one occurrence
    of `old` in the file becomes `new`. Checks every edit before it writes
    a file, so that a tree it refuses is left as it was."""
    texts = {}
    for path, old, new in edits:
        full = os.path.join(root, path)
        if full not in texts:
            try:
                with open(full) as f:
                    texts[full] = f.read()
            except OSError as e:
                sys.exit(f"switch_bounds.py: cannot read {path} under {root}: {e}")
        if texts[full].count(old) != 1:
            sys.exit(
                f"switch_bounds.py: {path} does not contain this text once "
                f"(is the worktree at the commit the docs name?):\n{old}"
            )
        texts[full] = texts[full].replace(old, new)
    for full, text in texts.items():
        with open(full, "w") as f:
            f.write(text)


LEAST_SWITCH = """    #[inline(always)]
    pub(crate) fn least_switch(&mut self, a: usize, ns: u64, b: usize) {
        let ents = &mut self.ents[..];
        let ea = &mut ents[a];
        let va = ea.v.wrapping_add(ea.vdelta(ns));
        ea.v_saved = va;
        ea.runnable = false;
        let eb = &mut ents[b];
        eb.v = va;
        eb.d = va.wrapping_add(eb.vreq);
        eb.runnable = true;
        let wb = eb.weight as i64;
        self.mask[0] = 1 << (b % 64);
        self.lone = b;
        self.v0 = va;
        self.load = wb;
    }

"""


def edits_for(part):
    """The edits `(path, old, new)` that leave `part` out."""
    if part == "step":
        yield (
            "src/executor/run_loop.rs",
            "eevdf.switch_lone_picked(c, Some(charge_ns), j);",
            "eevdf.least_switch(c, charge_ns, j);",
        )
        yield (
            "src/eevdf.rs",
            "    #[inline(always)]\n    pub(crate) fn switch_lone_picked(",
            LEAST_SWITCH + "    #[inline(always)]\n    pub(crate) fn switch_lone_picked(",
        )
    elif part == "checks":
        yield (
            "src/executor/run_loop.rs",
            """        if self.panics.holds()
            || self.attention.get()
            || self.intake.inbox.has_pending()
            || r.turn.over.get()
        {
            return None;
        }
        let j = qs.switch_target(&r.held, c, want)?;""",
            """        let _ = want;
        let j = qs.pending[0];""",
        )
    elif part == "countdown":
        yield (
            "src/executor/run_loop.rs",
            "let n = RunState::switch_countdown(st.poll_cost_ns, slice_left, polls_left, left);",
            "let _ = (slice_left, left);\n        let n = polls_left;",
        )
        yield (
            "src/executor/accounting.rs",
            "        qs.list[q].record_polls(delta, polls);\n        delta",
            """        let st = &mut qs.list[q];
        st.counters.service_ns = st.counters.service_ns.saturating_add(delta);
        st.counters.polls += u64::from(polls);
        delta""",
        )


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root = sys.argv[1]
    parts = list(dict.fromkeys(p for p in sys.argv[2].split(",") if p))
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        sys.exit(f"switch_bounds.py: PARTS must name some of {', '.join(PARTS)}; got {sys.argv[2]!r}")
    apply(root, [e for part in parts for e in edits_for(part)])
    print(f"{root}: left out {', '.join(parts)}")


if __name__ == "__main__":
    main()
