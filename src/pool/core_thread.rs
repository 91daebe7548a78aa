#![forbid(unsafe_code)]
//! One core of a pool: its thread, pinned as planned ([`plan`]), which
//! declares and builds the core's executor, hands the pool its bounded
//! spawner ([`CoreLink`]), then drives the executor in its host through
//! the phases the pool asks for ([`Phase`]): run until the shutdown, then
//! let the tasks alive finish until the grace period ends, then drop the
//! rest. What happened is the thread's result ([`CoreReport`]).

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::num::NonZeroUsize;
use std::panic::{self, AssertUnwindSafe};
use std::pin::pin;
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread::{self, JoinHandle};

use super::control::{CoreControl, Phase};
use super::error::PoolBuildError;
use super::options::{Host, MakeExecutor, Placement, MAX_CORES};
use super::shutdown::CoreReport;
use crate::boundary;
use crate::executor::Executor;
use crate::queue::QueueKey;
use crate::remote::bounded::BoundedRemoteSpawner;
use crate::stats::ExecutorStats;

thread_local! {
    /// The pool and the core index of this thread, if it is a pool core.
    static CURRENT: Cell<Option<(u64, usize)>> = const { Cell::new(None) };
}

/// The index of the pool core whose thread this is (`None` on any other
/// thread). Code that runs on a core (its tasks, the closures of
/// [`PoolHandle::spawn_on`](super::PoolHandle::spawn_on)) uses it to know where it is,
/// as Seastar's `this_shard_id()`.
///
/// ```
/// # use tourbillon::pool::{Pool, Placement};
/// let pool = Pool::builder()
///     .cores(2)
///     .placement(Placement::Unpinned)
///     .executor(|_| tourbillon::Builder::new().queue("q", 1))
///     .build()
///     .unwrap();
/// assert_eq!(tourbillon::pool::current_core(), None);
/// let here = futures::executor::block_on(
///     pool.submit_to(1, "q", || async { tourbillon::pool::current_core() }),
/// );
/// assert_eq!(here.unwrap(), Some(1));
/// pool.shutdown(std::time::Duration::from_secs(1)).unwrap();
/// ```
pub fn current_core() -> Option<usize> {
    CURRENT.with(|c| c.get().map(|(_, i)| i))
}

/// The pool and core of this thread.
pub(crate) fn current() -> Option<(u64, usize)> {
    CURRENT.with(Cell::get)
}

/// The CPU of each core (`None`: unpinned), from the builder's settings.
/// Every count is checked against [`MAX_CORES`] before anything is
/// allocated for it.
pub(crate) fn plan(
    cores: Option<usize>,
    placement: &Placement,
) -> Result<Vec<Option<usize>>, PoolBuildError> {
    if let Some(n) = cores {
        within_max(n)?;
    }
    let plan = match placement {
        Placement::Unpinned => {
            let n = cores
                .unwrap_or_else(|| thread::available_parallelism().map_or(1, NonZeroUsize::get));
            vec![None; within_max(n)?]
        }
        Placement::EachCpu => {
            let mask = affinity_mask();
            let n = within_max(cores.unwrap_or(mask.len()))?;
            if n > mask.len() {
                return Err(PoolBuildError::CoreCount {
                    cores: n,
                    cpus: mask.len(),
                });
            }
            mask.into_iter().take(n).map(Some).collect()
        }
        Placement::Cpus(list) => {
            within_max(list.len())?;
            if let Some(n) = cores.filter(|&n| n != list.len()) {
                return Err(PoolBuildError::CoreCount {
                    cores: n,
                    cpus: list.len(),
                });
            }
            let online = online_cpus();
            if let Some(&cpu) = list.iter().find(|c| !online.contains(c)) {
                return Err(PoolBuildError::CpuUnavailable {
                    cpu,
                    available: online,
                });
            }
            list.iter().copied().map(Some).collect()
        }
    };
    if plan.is_empty() {
        return Err(PoolBuildError::NoCores);
    }
    Ok(plan)
}

/// `cores`, if a pool may have that many.
fn within_max(cores: usize) -> Result<usize, PoolBuildError> {
    if cores > MAX_CORES {
        return Err(PoolBuildError::TooManyCores {
            cores,
            max: MAX_CORES,
        });
    }
    Ok(cores)
}

/// The CPUs that are online (Linux's `/sys/devices/system/cpu/online`,
/// e.g. `0-3,6`); elsewhere, or if it cannot be read, the calling thread's
/// affinity mask. A core may be pinned to any of them, whatever the mask of
/// the thread that builds the pool.
fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()))
        .unwrap_or_else(affinity_mask)
}

/// Parses a kernel CPU list (`0-3,6`); `None` if malformed.
fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// The CPUs the calling thread may run on, in increasing order.
fn affinity_mask() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// What a core's thread starts from.
pub(crate) struct CoreStart<K: QueueKey> {
    pub(crate) pool: u64,
    pub(crate) index: usize,
    pub(crate) cpu: Option<usize>,
    pub(crate) host: Host,
    pub(crate) make: MakeExecutor<K>,
    pub(crate) capacity: NonZeroUsize,
    pub(crate) ready: mpsc::Sender<(usize, Result<CoreLink<K>, PoolBuildError>)>,
}

/// What a core hands the pool once its executor is up.
pub(crate) struct CoreLink<K: QueueKey> {
    pub(crate) spawner: BoundedRemoteSpawner<K>,
}

/// A started core, as the pool keeps it: its stop signals and its thread.
pub(crate) struct StartedCore {
    pub(crate) cpu: Option<usize>,
    pub(crate) control: Arc<CoreControl>,
    pub(crate) thread: JoinHandle<CoreReport>,
}

/// The name of core `index`'s thread: `tb-core-{index}`, at most 12
/// bytes for any index below [`MAX_CORES`](super::MAX_CORES), so that the
/// 15 bytes Linux keeps of a thread's name (`/proc/<pid>/task/<tid>/comm`,
/// what `perf`, `top -H` and `ps -L` show) differ from core to core.
pub(crate) fn thread_name(index: usize) -> String {
    format!("tb-core-{index}")
}

/// Starts a core's thread.
pub(crate) fn spawn<K>(start: CoreStart<K>) -> Result<StartedCore, String>
where
    K: QueueKey + Send + Sync,
{
    let control = Arc::new(CoreControl::default());
    let c2 = control.clone();
    let cpu = start.cpu;
    let index = start.index;
    let thread = thread::Builder::new()
        .name(thread_name(index))
        .spawn(move || run_core(start, c2))
        .map_err(|e| e.to_string())?;
    Ok(StartedCore {
        cpu,
        control,
        thread,
    })
}

/// Stops and joins the cores started so far; gives `e` back.
pub(crate) fn abandon(started: Vec<StartedCore>, e: PoolBuildError) -> PoolBuildError {
    for core in &started {
        core.control.advance(Phase::Abort);
    }
    for core in started {
        if let Err(p) = core.thread.join() {
            boundary::drop_payload(p);
        }
    }
    e
}

/// Marks the core finished when its thread ends, however it ends.
struct Finish(Arc<CoreControl>);

impl Drop for Finish {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// The body of a core's thread.
fn run_core<K>(start: CoreStart<K>, control: Arc<CoreControl>) -> CoreReport
where
    K: QueueKey + Send + Sync,
{
    let _finish = Finish(control.clone());
    let index = start.index;
    let cpu = start.cpu;
    CURRENT.with(|c| c.set(Some((start.pool, index))));
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| core_main(start, &control)));
    match outcome {
        Ok(Some(report)) => report,
        Ok(None) => CoreReport::failed(index, cpu),
        Err(payload) => {
            let report = CoreReport::panicked(index, cpu, &*payload);
            // The payload's destructor is user code.
            boundary::drop_payload(payload);
            report
        }
    }
}

/// Builds the executor, reports it up, runs the phases; `None` if the
/// core never came up (the builder was told why).
fn core_main<K>(start: CoreStart<K>, control: &CoreControl) -> Option<CoreReport>
where
    K: QueueKey + Send + Sync,
{
    let CoreStart {
        index,
        cpu,
        host,
        make,
        capacity,
        ready,
        ..
    } = start;
    let fail = |e| {
        let _ = ready.send((index, Err(e)));
        None
    };
    if let Some(cpu) = cpu {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
            return fail(PoolBuildError::PinFailed { core: index, cpu });
        }
    }
    let builder = match panic::catch_unwind(AssertUnwindSafe(|| make(index))) {
        Ok(b) => b,
        Err(p) => {
            let message = super::shutdown::message(&*p);
            boundary::drop_payload(p);
            return fail(PoolBuildError::ExecutorPanicked {
                core: index,
                message,
            });
        }
    };
    let host = match HostRt::new(host) {
        Ok(h) => h,
        Err(message) => {
            return fail(PoolBuildError::Thread {
                core: index,
                message,
            })
        }
    };
    let ex = match builder.build() {
        Ok(ex) => ex,
        Err(error) => return fail(PoolBuildError::Executor { core: index, error }),
    };
    let link = CoreLink {
        spawner: ex.bounded_remote_spawner(capacity),
    };
    if ready.send((index, Ok(link))).is_err() {
        return None;
    }
    drop(ready);
    // Run until the pool shuts down, then let the tasks alive finish until
    // the pool aborts them.
    host.drive(&ex, control.reached(Phase::Drain));
    let drained = {
        let mut drained = pin!(ex.drained());
        host.drive(
            &ex,
            poll_fn(|cx| {
                if control.poll_phase(Phase::Abort, cx).is_ready() {
                    return Poll::Ready(false);
                }
                drained.as_mut().poll(cx).map(|()| true)
            }),
        )
    };
    // The shutdown drops the tasks still alive and the submissions not yet
    // tasks (their handles read Cancelled), inside the host for its
    // sockets' sake, and counts them by queue.
    let (cancelled, stats) = host.close(ex);
    Some(CoreReport::ended(index, cpu, drained, &cancelled, stats))
}

/// A core's host, made on its thread.
enum HostRt {
    Standalone,
    #[cfg(feature = "tokio")]
    Tokio(tokio::runtime::Runtime),
    #[cfg(feature = "async-io")]
    AsyncIo,
}

impl HostRt {
    fn new(host: Host) -> Result<Self, String> {
        Ok(match host {
            Host::Standalone => HostRt::Standalone,
            #[cfg(feature = "tokio")]
            Host::Tokio => HostRt::Tokio(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?,
            ),
            #[cfg(feature = "async-io")]
            Host::AsyncIo => HostRt::AsyncIo,
        })
    }

    /// Runs the executor until `until` completes.
    fn drive<K: QueueKey, F: Future>(&self, ex: &Executor<K>, until: F) -> F::Output {
        match self {
            HostRt::Standalone => ex.block_on(until),
            #[cfg(feature = "tokio")]
            HostRt::Tokio(rt) => rt.block_on(ex.run_until(until)),
            #[cfg(feature = "async-io")]
            HostRt::AsyncIo => async_io::block_on(ex.run_until(until)),
        }
    }

    /// Shuts the executor down and drops it (inside the tokio runtime's
    /// context, so that its tasks' tokio resources deregister from their
    /// driver); returns what the shutdown dropped unfinished, per queue,
    /// and the executor's statistics after it.
    fn close<K: QueueKey>(self, ex: Executor<K>) -> (Vec<u64>, ExecutorStats) {
        let end = |ex: Executor<K>| {
            let cancelled = ex.shut_down();
            let stats = ex.stats();
            drop(ex);
            (cancelled, stats)
        };
        match self {
            #[cfg(feature = "tokio")]
            HostRt::Tokio(rt) => {
                let guard = rt.enter();
                let end = end(ex);
                drop(guard);
                drop(rt);
                end
            }
            _ => end(ex),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("0-x"), None);
    }
}
