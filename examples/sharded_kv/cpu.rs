//! CPU time per thread, read from Linux's `/proc` (user and system time,
//! in clock ticks of `1 / TICKS_PER_SECOND`): how much CPU the server's
//! cores and the client's threads each spent on the measured phase. On
//! systems without `/proc` the readings are empty and nothing is reported.

use std::time::Duration;

/// The unit of `/proc`'s times (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: u64 = 100;

/// User plus system time of the thread whose `stat` file this is, and its
/// name; `None` if the file cannot be read or parsed.
fn read_stat(path: &std::path::Path) -> Option<(String, Duration)> {
    let stat = std::fs::read_to_string(path).ok()?;
    // "tid (name) state ppid ...": the name may hold spaces and
    // parentheses, so it ends at the last ')'.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    // After the name: state is field 3; utime and stime are 14 and 15.
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, ticks(utime + stime)))
}

fn ticks(n: u64) -> Duration {
    Duration::from_millis(n * 1000 / TICKS_PER_SECOND)
}

/// The CPU time of the calling thread so far (zero without `/proc`).
pub fn this_thread() -> Duration {
    read_stat("/proc/thread-self/stat".as_ref()).map_or(Duration::ZERO, |(_, t)| t)
}

/// The CPU time so far of this process's threads whose names start with
/// `prefix` (zero without `/proc`).
pub fn threads_named(prefix: &str) -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    dir.filter_map(|e| read_stat(&e.ok()?.path().join("stat")))
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, t)| t)
        .sum()
}
