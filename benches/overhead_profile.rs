//! Profiling target: the headline workload (50,000 tasks x 5 yields, one
//! queue) run `N` times (first argument, default 1; the second sets the
//! yields per task, default 5) with nothing else in the
//! process, for `valgrind --tool=callgrind` (deterministic instruction
//! counts; use `--toggle-collect=overhead_profile::workload`) and for
//! sampling profilers (`perf record`, samply) with a large `N`.

use std::hint::black_box;

const TASKS: usize = 50_000;

#[inline(never)]
fn workload(ex: &tourbillon::Executor<()>, yields: usize) {
    ex.block_on(async {
        let hs: Vec<_> = (0..TASKS)
            .map(|i| {
                ex.spawn((), async move {
                    for _ in 0..yields {
                        tourbillon::yield_now().await;
                    }
                    i
                })
                .unwrap()
            })
            .collect();
        for h in hs {
            black_box(h.await.unwrap());
        }
    });
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    // Second argument: yields per task (default 5, the headline workload).
    let yields: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    let ex = tourbillon::Builder::new().queue((), 1).build().unwrap();
    for _ in 0..rounds {
        workload(&ex, yields);
    }
}
