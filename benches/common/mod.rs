//! Helpers shared by the benchmarks (a module of each bench binary, not a
//! bench itself).

/// Pins the whole process (all threads) to CPU 1 with `taskset`, so that
/// systems compared in one process share one core; says whether it could.
pub fn pin_to_cpu1() {
    let pid = std::process::id().to_string();
    match std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", "1", &pid])
        .output()
    {
        Ok(o) if o.status.success() => println!("pinned to CPU 1 (taskset -a -p -c 1 {pid})"),
        _ => println!("not pinned (taskset unavailable); figures are noisier"),
    }
}
