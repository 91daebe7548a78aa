//! A scheduler written outside the crate: earliest deadline first.
//!
//! The user gives each task a deadline by registering it, keyed by the
//! task's key (`JoinHandle::key()`, what the scheduler sees), in a map
//! shared with the scheduler right after spawning. The scheduler keeps the runnable tasks in a binary heap
//! by deadline; a task that yields keeps its deadline, so it runs again
//! before any task with a later one.
//!
//! One subtlety of this design: `spawn` pushes the new task to the
//! scheduler *before* it returns the join handle, so at that push the
//! deadline is not registered yet. The scheduler parks such tasks aside and
//! looks their deadlines up at the next `pop`, which comes only when the
//! executor runs, after the spawner has registered them (a task whose
//! deadline is still unknown then runs after every task with one).
//!
//! The example runs six jobs of three steps each, spawned in shuffled
//! deadline order, then a job with the earliest deadline of all, spawned by
//! another job while the others are waiting, and prints the order in which
//! the steps ran (and, for contrast, the order under `RunnableFifo`).
//!
//! ```text
//! cargo run --example custom_scheduler
//! ```

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use tourbillon::sched::{RunnableFifo, Scheduler};
use tourbillon::task::{yield_now, GroupId, TaskKey};
use tourbillon::{Builder, QueueSpec, Spawner};

/// Deadlines by task, shared by the user (who inserts) and the scheduler.
type Deadlines = Rc<RefCell<HashMap<TaskKey, Instant>>>;

/// Earliest deadline first; ties in the order the tasks became runnable.
struct Edf {
    deadlines: Deadlines,
    heap: BinaryHeap<Reverse<(Instant, u64, TaskKey)>>,
    /// Pushed before their deadline was registered (at spawn).
    unresolved: Vec<TaskKey>,
    seq: u64,
}

impl Edf {
    fn new(deadlines: Deadlines) -> Self {
        Edf {
            deadlines,
            heap: BinaryHeap::new(),
            unresolved: Vec::new(),
            seq: 0,
        }
    }

    fn insert(&mut self, task: TaskKey, deadline: Instant) {
        self.seq += 1;
        self.heap.push(Reverse((deadline, self.seq, task)));
    }
}

/// "No deadline": later than any real one.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

impl Scheduler for Edf {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        // `try_borrow`: a scheduler must not panic, and a push can happen
        // while the user holds the map (if they spawned inside a borrow).
        let known = match self.deadlines.try_borrow() {
            Ok(map) => map.get(&task).copied(),
            Err(_) => None,
        };
        match known {
            Some(d) => self.insert(task, d),
            None => self.unresolved.push(task),
        }
    }

    fn pop(&mut self) -> Option<TaskKey> {
        if !self.unresolved.is_empty() {
            let resolved: Option<Vec<(TaskKey, Instant)>> =
                self.deadlines.try_borrow().ok().map(|map| {
                    self.unresolved
                        .iter()
                        .map(|t| (*t, map.get(t).copied().unwrap_or_else(far_future)))
                        .collect()
                });
            if let Some(resolved) = resolved {
                self.unresolved.clear();
                for (t, d) in resolved {
                    self.insert(t, d);
                }
            }
        }
        match self.heap.pop() {
            Some(Reverse((_, _, task))) => Some(task),
            // Only if the map stayed borrowed: serve in push order.
            None if !self.unresolved.is_empty() => Some(self.unresolved.remove(0)),
            None => None,
        }
    }

    fn len(&self) -> usize {
        self.heap.len() + self.unresolved.len()
    }

    fn polled(
        &mut self,
        task: TaskKey,
        _group: GroupId,
        _elapsed: Option<Duration>,
        finished: bool,
    ) {
        if finished {
            if let Ok(mut map) = self.deadlines.try_borrow_mut() {
                map.remove(&task);
            }
        }
    }

    fn forget(&mut self, task: TaskKey, _group: GroupId) {
        // The id may stay in the heap: the executor skips ended tasks.
        if let Ok(mut map) = self.deadlines.try_borrow_mut() {
            map.remove(&task);
        }
    }
}

type Log = Rc<RefCell<Vec<String>>>;

/// A job of three steps, yielding between them; logs each step.
async fn job(name: String, log: Log) {
    for step in 0..3 {
        log.borrow_mut().push(format!("{name}.{step}"));
        yield_now().await;
    }
}

/// Spawns `job(name)` with `deadline` and registers the deadline.
fn spawn_job(
    sp: &Spawner<&'static str>,
    deadlines: &Deadlines,
    log: &Log,
    name: &str,
    deadline: Instant,
) {
    // Spawn first, then borrow the map: the spawn pushes to the scheduler,
    // which reads the map.
    let h = sp.spawn("edf", job(name.to_string(), log.clone())).unwrap();
    deadlines.borrow_mut().insert(h.key(), deadline);
}

/// Runs the demo on a queue ordered by `scheduler`; returns the step log.
fn run<S: Scheduler>(scheduler: S, deadlines: &Deadlines) -> Vec<String> {
    let ex = Builder::new()
        .queue_with("edf", QueueSpec::new(1).scheduler(scheduler))
        .build()
        .unwrap();
    let sp = ex.spawner();
    let log: Log = Rc::new(RefCell::new(Vec::new()));
    let start = Instant::now();
    let ms = move |n: u64| start + Duration::from_millis(n);
    // Spawned in this order; named after their deadline in ms.
    for d in [50, 10, 40, 20, 60, 30] {
        spawn_job(&sp, deadlines, &log, &format!("d{d}"), ms(d));
    }
    // A job that, at its first step, spawns an urgent one (deadline 5 ms).
    let (sp2, dl2, log2) = (sp.clone(), deadlines.clone(), log.clone());
    let h = sp
        .spawn("edf", async move {
            log2.borrow_mut().push("d35.0 (spawns d5)".into());
            spawn_job(&sp2, &dl2, &log2, "d5", ms(5));
            yield_now().await;
            log2.borrow_mut().push("d35.1".into());
        })
        .unwrap();
    deadlines.borrow_mut().insert(h.key(), ms(35));
    // Detach: a finished task whose handle is alive still counts as live.
    drop(h);
    ex.block_on(async {
        while ex.stats().live_tasks > 0 {
            yield_now().await;
        }
    });
    let out = log.borrow().clone();
    out
}

fn main() {
    let deadlines: Deadlines = Rc::new(RefCell::new(HashMap::new()));
    let edf = run(Edf::new(deadlines.clone()), &deadlines);
    println!("EDF order of steps:\n  {}", edf.join(" "));
    assert!(
        deadlines.borrow().is_empty(),
        "finished tasks leave the map"
    );

    // d10, d20 and d30 run to completion in deadline order; d35 then spawns
    // d5, which runs before anything else; then d35, d40, d50, d60.
    let names: Vec<&str> = edf.iter().map(|s| s.split('.').next().unwrap()).collect();
    let mut firsts: Vec<&str> = names.clone();
    firsts.dedup();
    assert_eq!(
        firsts,
        ["d10", "d20", "d30", "d35", "d5", "d35", "d40", "d50", "d60"]
    );
    println!("  (jobs in turn: {})", firsts.join(" "));

    let fifo = run(RunnableFifo::new(), &Rc::new(RefCell::new(HashMap::new())));
    println!(
        "RunnableFifo order of the same steps, for contrast:\n  {}",
        fifo.join(" ")
    );
}
