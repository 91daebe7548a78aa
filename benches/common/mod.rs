//! Helpers shared by the benchmarks (a module of each bench binary, not a
//! bench itself; each bench uses a part of it).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Busy loop on the real clock for `d`; returns the instant it ended.
pub fn spin(d: Duration) -> Instant {
    let start = Instant::now();
    loop {
        let now = Instant::now();
        if now.duration_since(start) >= d {
            return now;
        }
        std::hint::spin_loop();
    }
}

/// Pins the whole process (all threads) to CPU 1 with `taskset`, so that
/// systems compared in one process share one core; says whether it could.
pub fn pin_to_cpu1() {
    let pid = std::process::id().to_string();
    match Command::new("taskset")
        .args(["-a", "-p", "-c", "1", &pid])
        .output()
    {
        Ok(o) if o.status.success() => println!("pinned to CPU 1 (taskset -a -p -c 1 {pid})"),
        _ => println!("not pinned (taskset unavailable); figures are noisier"),
    }
}

/// This thread's kernel id (`/proc/thread-self` -> `PID/task/TID`).
pub fn thread_id() -> Option<String> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    Some(link.file_name()?.to_str()?.to_string())
}

/// Runs `cmd args`; whether it ran and succeeded.
pub fn run_ok(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Pins the calling thread (only it) to `cpu`; says whether it could.
pub fn pin_thread(cpu: u32) -> bool {
    thread_id().is_some_and(|tid| run_ok("taskset", &["-p", "-c", &cpu.to_string(), &tid]))
}

/// The calling thread's (time on CPU, time runnable but waiting for a CPU)
/// so far, in ns, from `/proc/thread-self/schedstat`; zeros if unreadable.
pub fn sched_times() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut it = text.split_whitespace().map(|v| v.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// splitmix64 (Steele, Lea, Flood 2014): small, seedable, good enough for
/// workload scripts.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in `[lo, hi]`.
    pub fn int(&mut self, (lo, hi): (u64, u64)) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// The order in which round `round` of a benchmark runs its `n` systems on
/// workload `workload`: a shuffle (Fisher-Yates, splitmix64 seeded with the
/// round and the workload), the same in every run of the benchmark. A run
/// depends on the one before it (the heap it leaves, the caches it fills),
/// so no system should always follow the same one.
pub fn run_order(n: usize, round: usize, workload: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = Rng(((round as u64) << 8) | workload as u64);
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o += "\\\"",
            '\\' => o += "\\\\",
            '\n' => o += "\\n",
            c if (c as u32) < 0x20 => o += &format!("\\u{:04x}", c as u32),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Minor page faults of this process so far (`/proc/self/stat`, field 10;
/// 0 where it cannot be read): a fresh page costs a fault when first
/// touched, a few microseconds on these VMs.
pub fn minor_faults() -> u64 {
    stat_minor_faults("/proc/self/stat")
}

/// Minor page faults of the calling thread so far (`/proc/thread-self/stat`;
/// 0 where it cannot be read).
pub fn thread_minor_faults() -> u64 {
    stat_minor_faults("/proc/thread-self/stat")
}

/// The minor page faults field of a `stat` file of procfs.
fn stat_minor_faults(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|st| {
            // Fields after the command name, which may hold spaces.
            let rest = st.get(st.rfind(')')? + 2..)?.to_string();
            rest.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The median of `v` (the mean of the two middle values for an even
/// count); NaN when `v` is empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The `p`-th percentile (0 to 100) of the ascending `sorted`: the element
/// of index `round(p / 100 * (n - 1))`; 0 when `sorted` is empty.
pub fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = (p / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The command line of a `harness = false` bench: `--name value` options
/// and `--flag`s; anything else (criterion's flags) is ignored.
///
/// One rule for every such bench ([`Args::smoke`]): with `--bench`, which
/// `cargo bench` passes, it runs the benchmark; without it
/// (`cargo test --all-targets`, or the binary run by hand without
/// `--bench`) it runs a smoke pass, as criterion's benches run each
/// benchmark once: its smallest sizes, one round, a few seconds in a debug
/// build, through the same code and the same checks.
pub struct Args(Vec<String>);

impl Args {
    pub fn from_env() -> Self {
        Self(std::env::args().collect())
    }

    /// The word after `name`, if `name` is given.
    pub fn value(&self, name: &str) -> Option<&str> {
        let i = self.0.iter().position(|a| a == name)?;
        self.0.get(i + 1).map(String::as_str)
    }

    /// The word after `name`, parsed; `None` if absent or unparsable.
    pub fn parsed<T: std::str::FromStr>(&self, name: &str) -> Option<T> {
        self.value(name)?.parse().ok()
    }

    /// Whether `name` is given.
    pub fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|a| a == name)
    }

    /// Whether this run is a smoke pass, not a benchmark: `--bench` is
    /// absent. Explicit options (`--rounds`, `--secs`, ...) still apply.
    pub fn smoke(&self) -> bool {
        !self.flag("--bench")
    }

    /// Every word, program name first.
    pub fn all(&self) -> &[String] {
        &self.0
    }
}

/// `TARGET/name`, in the target directory of this executable (cargo builds
/// a bench at `TARGET/release/deps/NAME-HASH`), whatever the working
/// directory (cargo runs a bench in its package's directory, benches/);
/// `target/name` if the executable's path does not have that shape.
pub fn target_subdir(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let deps = exe.parent()?;
            (deps.file_name()? == "deps").then_some(())?;
            Some(deps.parent()?.parent()?.join(name))
        })
        .unwrap_or_else(|| PathBuf::from("target").join(name))
}

/// A measured window of real time: `[start, end)`.
#[derive(Clone, Copy)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
}

impl Window {
    pub fn contains(&self, t: Instant) -> bool {
        t >= self.start && t < self.end
    }
}
