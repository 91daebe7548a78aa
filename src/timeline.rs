#![forbid(unsafe_code)]
//! The timeline of polls: which queue and which task held the thread, and
//! when ([`Timeline`], from
//! [`Executor::take_timeline`](crate::Executor::take_timeline) or
//! [`Pool::timelines`](crate::pool::PoolHandle::timelines)), written as a Chrome
//! trace-event JSON file that [Perfetto](https://ui.perfetto.dev) and
//! `chrome://tracing` open ([`Timeline::write_chrome_json`],
//! [`write_chrome_json`] for several executors), or read event by event
//! ([`Timeline::polls`]).
//!
//! Off by default; [`Builder::timeline`](crate::Builder::timeline) turns it
//! on with a buffer of a fixed number of polls, allocated when the
//! executor is built and when the timeline is taken, never per poll. Each
//! poll's start and duration come from the clock reading the executor
//! takes per poll for its stall detector and latency histograms (one
//! reading per poll whatever of the three is on). When the buffer is full,
//! further polls are counted ([`Timeline::dropped`]) and not kept, until
//! the timeline is taken.
//!
//! In the trace, each executor is a process (named by its thread, such as
//! a pool core's `tb-core-0`) and each of its queues a thread (a row,
//! named by the queue's key); each poll is a complete event (`"ph":"X"`)
//! named by the task's name, or `task N`, with the task's id, name and run
//! in its arguments, inside an event `run <queue>` that spans the polls of
//! one run of the queue (from the start of its first poll to the end of its
//! last: the time between polls, the executor's own, is inside the run but
//! in no poll).

use std::collections::HashMap;
use std::io::{self, Write};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crate::task::id::TaskId;

/// The largest buffer [`Builder::timeline`](crate::Builder::timeline)
/// accepts: 16 Mi polls (40 bytes each: 640 MiB), far beyond a window of
/// a few seconds, which is what a timeline is read for.
pub const MAX_TIMELINE_POLLS: usize = 1 << 24;

/// One poll as the executor saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PollRecord {
    /// The queue's index, in declaration order (its name:
    /// [`Timeline::queue_names`]).
    pub queue: usize,
    /// The task's id.
    pub task: TaskId,
    /// The task's name ([`TaskBuilder::name`](crate::task::TaskBuilder::name)), if it has one.
    pub name: Option<Arc<str>>,
    /// The executor's run this poll was part of (its count of runs, as
    /// [`ExecutorStats::runs`](crate::stats::ExecutorStats::runs)): the
    /// polls of one run of a queue share it.
    pub run: u64,
    /// The start of the poll, in the executor's clock (nanoseconds since
    /// the clock's origin).
    pub start_ns: u64,
    /// The poll's duration, nanoseconds.
    pub duration_ns: u64,
}

/// The polls an executor recorded between two takes
/// ([`Executor::take_timeline`](crate::Executor::take_timeline)).
#[derive(Debug, Clone)]
pub struct Timeline {
    label: String,
    queues: Vec<String>,
    polls: Vec<PollRecord>,
    dropped: u64,
    /// A reading of the executor's clock and the `Instant` taken with it
    /// (aligns the timelines of several executors in one file).
    anchor_ns: u64,
    anchor: Instant,
}

/// A poll in the recorder's buffer (the task name as the slab holds it).
struct Entry {
    start_ns: u64,
    duration_ns: u64,
    run: u64,
    task: TaskId,
    queue: u32,
    name: Option<Rc<str>>,
}

/// The executor's side: a buffer of a fixed capacity, filled poll by poll.
pub(crate) struct Recorder {
    entries: Vec<Entry>,
    dropped: u64,
}

impl Recorder {
    /// A recorder that keeps up to `capacity` polls.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: Vec::with_capacity(capacity),
            dropped: 0,
        }
    }

    /// Records a poll; counts it as dropped if the buffer is full (no
    /// allocation either way).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        queue: usize,
        task: TaskId,
        name: Option<Rc<str>>,
        run: u64,
        start_ns: u64,
        duration_ns: u64,
    ) {
        if self.entries.len() < self.entries.capacity() {
            self.entries.push(Entry {
                start_ns,
                duration_ns,
                run,
                task,
                queue: queue as u32,
                name,
            });
        } else {
            self.dropped += 1;
        }
    }

    /// Takes what was recorded into a [`Timeline`], leaving an empty buffer
    /// of the same capacity. `queues` names the queues, `label` the
    /// executor, `now_ns` is a reading of the executor's clock taken now.
    pub(crate) fn take(&mut self, label: String, queues: Vec<String>, now_ns: u64) -> Timeline {
        let anchor = Instant::now();
        let capacity = self.entries.capacity();
        let entries = std::mem::replace(&mut self.entries, Vec::with_capacity(capacity));
        let dropped = std::mem::take(&mut self.dropped);
        // One shared copy per distinct name.
        let mut names: HashMap<Rc<str>, Arc<str>> = HashMap::new();
        let polls = entries
            .into_iter()
            .map(|e| PollRecord {
                queue: e.queue as usize,
                task: e.task,
                name: e.name.map(|n| {
                    names
                        .entry(n)
                        .or_insert_with_key(|n| Arc::from(&**n))
                        .clone()
                }),
                run: e.run,
                start_ns: e.start_ns,
                duration_ns: e.duration_ns,
            })
            .collect();
        Timeline {
            label,
            queues,
            polls,
            dropped,
            anchor_ns: now_ns,
            anchor,
        }
    }
}

impl Timeline {
    /// The polls, in the order they ran.
    pub fn polls(&self) -> &[PollRecord] {
        &self.polls
    }

    /// The polls that found the buffer full and were not kept.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The queues' names (their keys' `Debug` form), in declaration order:
    /// [`PollRecord::queue`] indexes it.
    pub fn queue_names(&self) -> &[String] {
        &self.queues
    }

    /// The executor's name in the trace: its thread's name when the
    /// timeline was taken (`executor` for a thread without a name).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Sets the executor's name in the trace.
    pub fn set_label(&mut self, label: impl Into<String>) {
        self.label = label.into();
    }

    /// The time each queue held the thread in its polls, nanoseconds, in
    /// declaration order.
    pub fn busy_ns(&self) -> Vec<u64> {
        let mut busy = vec![0; self.queues.len()];
        for p in &self.polls {
            busy[p.queue] += p.duration_ns;
        }
        busy
    }

    /// Writes the timeline as a Chrome trace-event JSON file (the JSON
    /// object format, with `traceEvents`): open it in
    /// [Perfetto](https://ui.perfetto.dev) ("Open trace file") or in
    /// `chrome://tracing`. Times are microseconds from the first poll.
    ///
    /// ```
    /// use tourbillon::task::yield_now;
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new()
    ///     .queue("fg", 3)
    ///     .queue("bg", 1)
    ///     .timeline(10_000)
    ///     .build()
    ///     .unwrap();
    /// ex.block_on(async {
    ///     let a = ex.task("fg").name("request").spawn(async { yield_now().await }).unwrap();
    ///     let b = ex.spawn("bg", async {}).unwrap();
    ///     a.await.unwrap();
    ///     b.await.unwrap();
    /// });
    /// let timeline = ex.take_timeline().unwrap();
    /// // The request's two polls and the background task's one.
    /// assert_eq!(timeline.polls().len(), 3);
    /// assert_eq!(timeline.polls()[0].name.as_deref(), Some("request"));
    /// let mut json = Vec::new();
    /// timeline.write_chrome_json(&mut json).unwrap();
    /// // std::fs::write("trace.json", &json) and open it in ui.perfetto.dev.
    /// assert!(String::from_utf8(json).unwrap().contains("\"name\":\"request\""));
    /// ```
    pub fn write_chrome_json(&self, out: &mut impl Write) -> io::Result<()> {
        write_chrome_json(std::slice::from_ref(self), out)
    }
}

/// Writes several timelines (a pool's cores: [`Pool::timelines`](crate::pool::PoolHandle::timelines))
/// into one Chrome trace-event JSON file, each executor a process, on one
/// time axis (each timeline's clock aligned through the instant it was
/// taken; microseconds from the first poll of any of them). The slices of
/// a row do not overlap, as the trace viewers require: a run whose first
/// poll starts from a clock reading taken before the end of the row's
/// previous poll (by the few nanoseconds between two readings) starts at
/// that end instead.
pub fn write_chrome_json(timelines: &[Timeline], out: &mut impl Write) -> io::Result<()> {
    let mut w = io::BufWriter::new(out);
    // Each timeline's offset from its clock to a common one: nanoseconds
    // of the first timeline's anchor `Instant`.
    let first = timelines.first().map(|t| t.anchor);
    let offsets: Vec<i128> = timelines
        .iter()
        .map(|t| {
            let shift = match first {
                Some(f) if t.anchor >= f => (t.anchor - f).as_nanos() as i128,
                Some(f) => -((f - t.anchor).as_nanos() as i128),
                None => 0,
            };
            shift - t.anchor_ns as i128
        })
        .collect();
    let origin = timelines
        .iter()
        .zip(&offsets)
        .filter_map(|(t, off)| t.polls.first().map(|p| p.start_ns as i128 + off))
        .min()
        .unwrap_or(0);
    let mut sep = Sep(false);
    w.write_all(b"{\"traceEvents\":[\n")?;
    for (i, (t, off)) in timelines.iter().zip(&offsets).enumerate() {
        let pid = i + 1;
        sep.next(&mut w)?;
        write!(
            w,
            "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":"
        )?;
        json_str(&mut w, &t.label)?;
        w.write_all(b"}}")?;
        sep.next(&mut w)?;
        write!(w, "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"sort_index\":{i}}}}}")?;
        if t.dropped > 0 {
            sep.next(&mut w)?;
            write!(
                w,
                "{{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"labels\":\"{} polls dropped (buffer full)\"}}}}",
                t.dropped
            )?;
        }
        for (q, name) in t.queues.iter().enumerate() {
            let tid = q + 1;
            sep.next(&mut w)?;
            write!(w, "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":")?;
            json_str(&mut w, name)?;
            w.write_all(b"}}")?;
            sep.next(&mut w)?;
            write!(w, "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{q}}}}}")?;
        }
        let at = |ns: u64| (ns as i128 + off - origin).max(0) as u64;
        // Where each queue's row is free from: the slices of a row must
        // not overlap (a run's first poll may start from a clock reading
        // taken a little before the end of the row's previous poll).
        let mut free = vec![0u64; t.queues.len()];
        let mut k = 0;
        while k < t.polls.len() {
            // The polls of one run: an enclosing `run` event first.
            let run = &t.polls[k];
            let mut end = k + 1;
            while end < t.polls.len()
                && t.polls[end].run == run.run
                && t.polls[end].queue == run.queue
            {
                end += 1;
            }
            let last = &t.polls[end - 1];
            let run_start = at(run.start_ns).max(free[run.queue]);
            let run_end = at(last.start_ns + last.duration_ns).max(run_start);
            sep.next(&mut w)?;
            w.write_all(b"{\"name\":")?;
            json_str(&mut w, &format!("run {}", t.queues[run.queue]))?;
            write!(
                w,
                ",\"cat\":\"run\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":",
                run.queue + 1
            )?;
            micros(&mut w, run_start)?;
            w.write_all(b",\"dur\":")?;
            micros(&mut w, run_end - run_start)?;
            write!(w, ",\"args\":{{\"run\":{}}}}}", run.run)?;
            for p in &t.polls[k..end] {
                sep.next(&mut w)?;
                w.write_all(b"{\"name\":")?;
                match &p.name {
                    Some(n) => json_str(&mut w, n)?,
                    None => write!(w, "\"task {}\"", p.task)?,
                }
                write!(
                    w,
                    ",\"cat\":\"poll\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":",
                    p.queue + 1
                )?;
                let start = at(p.start_ns).max(free[p.queue]);
                let end = at(p.start_ns + p.duration_ns).max(start);
                free[p.queue] = end;
                micros(&mut w, start)?;
                w.write_all(b",\"dur\":")?;
                micros(&mut w, end - start)?;
                write!(w, ",\"args\":{{\"task\":{}", p.task)?;
                if let Some(n) = &p.name {
                    w.write_all(b",\"name\":")?;
                    json_str(&mut w, n)?;
                }
                write!(w, ",\"run\":{}}}}}", p.run)?;
            }
            k = end;
        }
    }
    let dropped: u64 = timelines.iter().map(|t| t.dropped).sum();
    write!(
        w,
        "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{{\"producer\":\"tourbillon\",\"dropped_polls\":\"{dropped}\"}}}}\n"
    )?;
    w.flush()
}

/// A comma before every event but the first.
struct Sep(bool);

impl Sep {
    fn next(&mut self, w: &mut impl Write) -> io::Result<()> {
        if std::mem::replace(&mut self.0, true) {
            w.write_all(b",\n")?;
        }
        Ok(())
    }
}

/// Nanoseconds as microseconds with three decimals (the trace's unit).
fn micros(w: &mut impl Write, ns: u64) -> io::Result<()> {
    write!(w, "{}.{:03}", ns / 1000, ns % 1000)
}

/// `s` as a JSON string.
fn json_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(b"\"")?;
    for c in s.chars() {
        match c {
            '"' => w.write_all(b"\\\"")?,
            '\\' => w.write_all(b"\\\\")?,
            '\n' => w.write_all(b"\\n")?,
            '\r' => w.write_all(b"\\r")?,
            '\t' => w.write_all(b"\\t")?,
            c if (c as u32) < 0x20 => write!(w, "\\u{:04x}", c as u32)?,
            c => write!(w, "{c}")?,
        }
    }
    w.write_all(b"\"")
}
