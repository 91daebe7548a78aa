//! Task storage: a [`slab`] of entries with generation-checked ids, and what
//! the executor keeps per task beside them (names, remote deliveries, ready
//! stamps, keyed groups). The harness that polls, cancels and completes a
//! task is `task/harness.rs`.
//!
//! Every operation that reads or writes a task's stage checks the entry's
//! state bits first:
//!
//! | operation       | requires                     | during the call |
//! |-----------------|------------------------------|-----------------|
//! | `poll_task`     | not COMPLETE, not RUNNING    | RUNNING set     |
//! | `cancel_idle`   | CANCELLED, not COMPLETE/RUNNING | RUNNING set  |
//! | entry removal   | not RUNNING                  | -               |
//!
//! The slab is released while user code runs (a poll, a destructor), so
//! that code may spawn, wake, abort and join.
//!
//! A task leaves the slab when it completes (or at shutdown). If its join
//! handle lives, the result stays in the cell, which the handle holds
//! ([`JoinCell`]): the handle reads it (COMPLETE, not RUNNING) without the
//! slab.
//!
//! The slab's invariants, which the task cell's (I1 to I6, in
//! `task/raw/mod.rs`) build on, named for the `# Safety` sections and
//! `SAFETY:` comments that cite them:
//!
//! * **S1 (RUNNING lock).** While a task's RUNNING bit is set its entry is
//!   never removed (so the slab's reference keeps the cell alive though the
//!   slab is not borrowed during the poll) and no other stage operation
//!   starts: the holder of the bit (the poll harness) has the stage to
//!   itself, on the executor's thread (the slab is `!Send`).
//! * **S2 (sink outlives entries).** The cells' sink pointer is
//!   `Arc::as_ptr` of the slab's own `Arc` of the sink, which outlives every
//!   entry: an entry is dropped after its removal, while the slab lives, or
//!   when the slab drops `entries`, a field declared before the `Arc`.
//! * **S3 (output proof).** Only [`TaskSlab::insert`] makes an
//!   [`OutputId<T>`], from the future of output `T` it stores: whoever holds
//!   one may read that task's result as a `T`.

use std::future::Future;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

use slab::Slab;

use super::id::{GroupId, TaskId, TaskKey};
use super::raw::{Header, JoinCell, OwnedTask, RawTask};
use super::schedule::Schedule;
use super::state::{State, TransitionToCancelled, TransitionToScheduled};
use crate::boundary;
use crate::task::join_error::JoinError;

/// One live task, as the executor sees it: the owning pointer to its cell,
/// whose header holds its id (the generation that ids are checked against:
/// every lookup reads the header next anyway), state bits, queue and group.
/// One word: the slab builds its entry in registers (a 12-byte entry was
/// built on the stack and copied as 16 bytes, a store-forwarding stall per
/// spawn; perf).
pub(crate) struct TaskEntry {
    pub(super) task: OwnedTask,
}

impl TaskEntry {
    pub(crate) fn queue(&self) -> usize {
        self.task.header().queue as usize
    }
    pub(crate) fn id(&self) -> TaskKey {
        self.task.header().key
    }
    /// The task's process-unique id.
    pub(crate) fn task_id(&self) -> TaskId {
        self.task.header().task_id
    }
    pub(super) fn state(&self) -> State {
        self.task.header().state()
    }
    pub(super) fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.task.header().update_state(f)
    }
    /// Gives up the slab's reference to a completed task whose join handle
    /// reads the result.
    pub(super) fn release_keep_stage(self) {
        self.task.release_keep_stage();
    }
    /// Lets go of a task no join handle reads (dropping its future or
    /// result, [`OwnedTask::release`]); returns a destructor's panic.
    pub(crate) fn release(self) -> Option<boundary::Payload> {
        self.task.release()
    }

    /// Shutdown: lets go of a task [`TaskSlab::drain`] removed. An
    /// unfinished task that a join handle or a remote delivery (`deliver`)
    /// reads ends in place ([`OwnedTask::cancel_in_place`]): its result,
    /// `Cancelled` or its destructor's panic, goes to the remote handle
    /// through `deliver`, or stays in the cell for the join handle. Any
    /// other task is released as [`release`](Self::release) does. Returns
    /// the panics for the caller to report: of the delivery (it wakes the
    /// remote handle's waker), and of a destructor whose result no handle
    /// reads.
    pub(crate) fn end_at_shutdown(
        self,
        deliver: Option<Deliver>,
    ) -> (Option<boundary::Payload>, Option<boundary::Payload>) {
        let read = self.state().has_join_interest() || deliver.is_some();
        if !read || !self.task.cancel_in_place() {
            let delivered = deliver.and_then(boundary::drop_caught);
            return (delivered, self.release());
        }
        let delivered = deliver.and_then(|d| {
            let raw = self.task.raw();
            boundary::call(move || d.deliver(raw)).err()
        });
        if self.state().has_join_interest() {
            self.release_keep_stage();
            (delivered, None)
        } else {
            (delivered, self.release())
        }
    }

    /// The task ended (its scheduler was already told so).
    pub(crate) fn is_complete(&self) -> bool {
        self.state().is_complete()
    }
}

/// The id and name of a removed task ([`TaskSlab::removed`]).
struct Removed {
    key: TaskKey,
    task: TaskId,
    name: Option<Rc<str>>,
}

/// All live tasks of one executor.
///
/// The entries hold the task pointers (the id, state bits, queue and group
/// are in the cell's header, which every lookup reads anyway, and so are
/// the joiner's waker and the result). Beside them, indexed alike, the
/// generation of each slot's next occupant, and the
/// optional per-task data of features in use (names, remote deliveries,
/// ready stamps), so that a run walks as little memory as possible.
pub(crate) struct TaskSlab<S: Schedule> {
    entries: Slab<TaskEntry>,
    /// Generation of each slot's current (or next) occupant.
    generations: Vec<u32>,
    /// Task names by slot, from the first named spawn on (empty before, so
    /// that unnamed tasks cost nothing).
    names: Vec<Option<Rc<str>>>,
    /// Deliveries of remotely spawned tasks by slot, from the first remote
    /// spawn on.
    deliver: Vec<Option<Deliver>>,
    /// When each task last became runnable (clock ns), for the
    /// wake-to-first-poll histograms; empty unless they are on.
    ready_ns: Vec<u64>,
    /// The keyed group of each task spawned in one (`KEYED` in its state),
    /// by slot; empty until the first such spawn. Other tasks are their own
    /// group, derived from their id.
    keyed: Vec<u32>,
    /// The id and name of the task removed last are kept in `removed`
    /// (the stall detector or the timeline is on).
    keep_removed: bool,
    removed: Option<Removed>,
    /// The tasks' sink (the executor's thread-safe half), which task cells
    /// point to without counting (`OwnedTask::new`). Declared after
    /// `entries`: fields drop in order, so it outlives every entry. Only
    /// held, never read: the cells use `sink_ptr`.
    _sink: Arc<S>,
    /// `Arc::as_ptr(&_sink)`, what the cells get.
    sink_ptr: NonNull<S>,
}

/// Why an id that a scheduler handed out names a live task that was not
/// its to hand out ([`TaskSlab::check_handout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spurious {
    /// The task belongs to this other queue.
    OtherQueue(usize),
    /// The task is not queued (waiting for a wake, or being polled).
    NotQueued,
}

/// The id of a task whose output is `T`. Only [`TaskSlab::insert`] makes
/// one, from the future it stores, so whoever holds it may read that task's
/// result as a `T`: the proof that [`RawTask::take_result`] asks for (a
/// remote delivery, [`TaskSlab::set_deliver`]), checked by the compiler
/// instead of by a `TypeId` comparison.
pub(crate) struct OutputId<T> {
    pub(super) id: TaskKey,
    _output: PhantomData<fn() -> T>,
}

impl<T> Clone for OutputId<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for OutputId<T> {}

impl<T> OutputId<T> {
    /// The task's id.
    pub(crate) fn id(self) -> TaskKey {
        self.id
    }
}

/// Where a remotely spawned task's result goes: the executor's remote slot,
/// shared with the task's remote join handle (and already allocated by the
/// spawning thread, so attaching it allocates nothing).
pub(crate) trait ResultSink: Send + Sync + 'static {
    /// The output of the task whose result this sink takes.
    type Output: 'static;
    /// The task completed: hand its result over.
    fn send(self: Arc<Self>, result: Result<Self::Output, JoinError>);
    /// The task was dropped unfinished (shutdown): the handle reads
    /// `Cancelled`.
    fn cancel(self: Arc<Self>);
}

/// A [`ResultSink`] with its output type erased: what a [`Deliver`] holds.
/// One virtual call delivers, with no type check at run time: the output
/// type is checked by the compiler where the sink is attached
/// ([`TaskSlab::set_deliver`] takes an [`OutputId`] of the sink's output).
trait ErasedSink: Send + Sync {
    /// Hands the result of the completed task `raw` to the sink.
    fn deliver(self: Arc<Self>, raw: RawTask);
    /// The task was dropped unfinished.
    fn cancel(self: Arc<Self>);
}

impl<R: ResultSink> ErasedSink for R {
    fn deliver(self: Arc<Self>, raw: RawTask) {
        // SAFETY: `RawTask::take_result`'s `# Safety`: `Completion::settle`
        // and `TaskEntry::end_at_shutdown` call this with the removed entry
        // alive (it owns a reference to the cell: I1, liveness), the task
        // COMPLETE and not RUNNING (its stage holds the result, and no other
        // stage operation is in progress: I2, stage access; S1), on the
        // executor thread; S3 (output proof): the task is the one of the
        // `OutputId<R::Output>` this sink was attached to (`set_deliver`),
        // so its output type is `R::Output`.
        if let Some(result) = unsafe { raw.take_result::<R::Output>() } {
            self.send(result);
        }
    }

    fn cancel(self: Arc<Self>) {
        ResultSink::cancel(self);
    }
}

/// Hands a remotely spawned task's result to its remote join handle:
/// [`deliver`](Self::deliver)ed with the completed task (its result still in
/// the cell), or dropped undelivered when the task is dropped unfinished
/// (the sink is then cancelled: the handle reads `Cancelled`). The sink
/// itself, behind its erased type: no allocation.
pub(crate) struct Deliver {
    sink: Option<Arc<dyn ErasedSink>>,
}

impl Deliver {
    /// Hands the result of the completed task `raw` to the sink.
    pub(crate) fn deliver(mut self, raw: RawTask) {
        if let Some(sink) = self.sink.take() {
            sink.deliver(raw);
        }
    }
}

impl Drop for Deliver {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            sink.cancel();
        }
    }
}

impl<S: Schedule> TaskSlab<S> {
    pub(crate) fn new(sink: Arc<S>) -> Self {
        Self {
            entries: Slab::new(),
            generations: Vec::new(),
            names: Vec::new(),
            deliver: Vec::new(),
            ready_ns: Vec::new(),
            keyed: Vec::new(),
            keep_removed: false,
            removed: None,
            sink_ptr: NonNull::new(Arc::as_ptr(&sink).cast_mut())
                .expect("an Arc's pointer is not null"),
            _sink: sink,
        }
    }

    /// Number of live tasks.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Stores a new task, already SCHEDULED, in `group` (or a group of its
    /// own when `None`), with a join handle's hold on its cell, returned.
    pub(crate) fn insert_joined<F>(
        &mut self,
        future: F,
        queue: usize,
        group: Option<GroupId>,
    ) -> (JoinCell<F::Output>, GroupId)
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let (_, raw, group) = self.insert_cell(future, queue, group, true);
        // SAFETY: `JoinCell::adopt`'s `# Safety`: `insert_cell` just made
        // this cell for `F` (I5, cell type; the output type `F::Output`, as
        // S3 asks) with the handle's bit (I1, liveness), on this thread;
        // this is its only `JoinCell`.
        (unsafe { JoinCell::adopt(raw) }, group)
    }

    /// Stores a new task, already SCHEDULED, in `group` (or a group of its
    /// own when `None`), without a join handle (its result goes to a
    /// delivery, [`set_deliver`](Self::set_deliver), or is dropped).
    pub(crate) fn insert<F>(
        &mut self,
        future: F,
        queue: usize,
        group: Option<GroupId>,
    ) -> (OutputId<F::Output>, GroupId)
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let (id, _, group) = self.insert_cell(future, queue, group, false);
        (id, group)
    }

    #[inline(always)]
    fn insert_cell<F>(
        &mut self,
        future: F,
        queue: usize,
        group: Option<GroupId>,
        handle: bool,
    ) -> (OutputId<F::Output>, RawTask, GroupId)
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let slot = self.entries.vacant_entry();
        let index = slot.key();
        // Ids and group ids hold indexes below 2^31 (a 2^31st live
        // task would need hundreds of gigabytes).
        assert!(index < 1 << 31, "tourbillon: more than 2^31 live tasks");
        // A new slot is always the next one (`Slab` hands out its free
        // slots first, then its length), so a push grows the table.
        let generation = match self.generations.get(index) {
            Some(&g) => g,
            None => {
                debug_assert_eq!(index, self.generations.len());
                self.generations.push(0);
                0
            }
        };
        let id = TaskKey::new(index as u32, generation);
        let keyed = group.is_some_and(|g| !g.is_task_group());
        let group = match group {
            Some(g) if keyed => {
                if index >= self.keyed.len() {
                    self.keyed.resize(index + 1, 0);
                }
                self.keyed[index] = g.index() as u32;
                g
            }
            _ => GroupId::task(index as u32),
        };
        // SAFETY: `OwnedTask::new`'s `# Safety`: S2 (sink outlives
        // entries): `sink_ptr` is `Arc::as_ptr` of `self._sink`, which
        // outlives the entry: an entry is dropped either after its removal,
        // while the slab (and its `Arc`) lives, or when the slab drops
        // `entries`, before `_sink`.
        let task =
            unsafe { OwnedTask::new(future, id, self.sink_ptr, queue as u16, keyed, handle) };
        let raw = task.raw();
        slot.insert(TaskEntry { task });
        let id = OutputId {
            id,
            _output: PhantomData,
        };
        (id, raw, group)
    }

    /// Makes live task `id` a remotely joined one: no local join handle;
    /// its result goes to `send` when it completes.
    pub(crate) fn set_deliver<R: ResultSink>(&mut self, oid: OutputId<R::Output>, sink: Arc<R>) {
        let deliver = Deliver { sink: Some(sink) };
        let id = oid.id();
        let Some(e) = self.get(id) else {
            return;
        };
        e.update(|st| st.set_join_interest(false));
        let index = id.index() as usize;
        if index >= self.deliver.len() {
            self.deliver.resize_with(index + 1, || None);
        }
        self.deliver[index] = Some(deliver);
    }

    pub(super) fn take_deliver(&mut self, index: usize) -> Option<Deliver> {
        self.deliver.get_mut(index).and_then(Option::take)
    }

    /// Names task `id` (it must be live).
    pub(crate) fn set_name(&mut self, id: TaskKey, name: Rc<str>) {
        let index = id.index() as usize;
        if index >= self.names.len() {
            self.names.resize(index + 1, None);
        }
        self.names[index] = Some(name);
    }

    /// The name of the task in `id`'s slot, if it has one: `id`'s own when
    /// `id` is live (not checked: the run loop reads it before a poll that
    /// tells it whether `id` was live).
    pub(crate) fn slot_name(&self, id: TaskKey) -> Option<Rc<str>> {
        self.names.get(id.index() as usize)?.clone()
    }

    /// Records that task `id` became runnable at `now_ns`.
    #[inline]
    pub(crate) fn set_ready(&mut self, id: TaskKey, now_ns: u64) {
        match self.ready_ns.get_mut(id.index() as usize) {
            Some(stamp) => *stamp = now_ns,
            None => self.grow_ready(id, now_ns),
        }
    }

    /// [`set_ready`](Self::set_ready) of a slot past the stamps' end: the
    /// stamps grow to the slab's capacity at once (the slots in between
    /// read 0 until their tasks' spawns stamp them), so that a spawn into
    /// a new slot does not grow them by one each time.
    #[cold]
    #[inline(never)]
    fn grow_ready(&mut self, id: TaskKey, now_ns: u64) {
        let index = id.index() as usize;
        self.ready_ns
            .resize(self.entries.capacity().max(index + 1), 0);
        self.ready_ns[index] = now_ns;
    }

    /// Records that live task `id`, stamped before (spawned with the
    /// stamps on), became runnable again at `now_ns`; no stamp for a slot
    /// past the stamps' end (never stamped).
    #[inline]
    pub(crate) fn restamp_ready(&mut self, id: TaskKey, now_ns: u64) {
        if let Some(stamp) = self.ready_ns.get_mut(id.index() as usize) {
            *stamp = now_ns;
        }
    }

    /// When the task in `id`'s slot last became runnable (see
    /// [`set_ready`](Self::set_ready)): `id`'s own stamp when `id` is live
    /// (not checked, as for [`slot_name`](Self::slot_name)).
    #[inline]
    pub(crate) fn slot_ready_ns(&self, id: TaskKey) -> Option<u64> {
        self.ready_ns.get(id.index() as usize).copied()
    }

    /// The group of the task whose cell header is `header` (live, or at
    /// least not yet replaced in its slot).
    #[inline]
    pub(crate) fn group_of(&self, header: &Header) -> GroupId {
        group_of(&self.keyed, header)
    }

    /// The group of live task `id`: its keyed group if it was spawned in
    /// one (`KEYED`), else its own.
    pub(crate) fn group_of_id(&self, id: TaskKey) -> GroupId {
        match self.get(id) {
            Some(e) => self.group_of(e.task.header()),
            None => GroupId::task(id.index()),
        }
    }

    /// Asks the CPU to bring three cache lines from the header of the cell
    /// of the task in `id`'s slot on (the header and what follows; past
    /// the end of a small cell, the allocation after it) into the cache,
    /// without waiting for them: for a scheduler whose order visits tasks
    /// in an order close to random (`Las::exact()`), a few polls ahead of
    /// their poll. Reads the slot; does nothing for an empty one.
    #[inline(always)]
    pub(crate) fn prefetch(&self, id: TaskKey) {
        if let Some(e) = self.entries.get(id.index() as usize) {
            let header: &Header = e.task.header();
            prefetch_read(header);
            prefetch_read((header as *const Header as *const u8).wrapping_add(64));
            // A third line: with it W1 under `Las::exact()` costs 3.76
            // times FIFO, with two lines 4.24 (medians of 7 runs of each
            // build in turn of `cargo bench -p tourbillon-peers --bench
            // compare -- --only tourbillon --rounds 7`, a 2-vCPU `Intel(R)
            // Xeon(R) Processor` VM, Linux 6.18.44, rustc 1.95.0,
            // 2026-11-29).
            prefetch_read((header as *const Header as *const u8).wrapping_add(128));
        }
    }

    pub(crate) fn get(&self, id: TaskKey) -> Option<&TaskEntry> {
        self.entries
            .get(id.index() as usize)
            .filter(|e| e.task.header().key.generation() == id.generation())
    }

    pub(super) fn remove(&mut self, id: TaskKey) -> TaskEntry {
        let index = id.index() as usize;
        let entry = self.entries.remove(index);
        debug_assert!(!entry.state().is_running());
        self.generations[index] = self.generations[index].wrapping_add(1);
        let name = self.names.get_mut(index).and_then(Option::take);
        if self.keep_removed {
            self.removed = Some(Removed {
                key: id,
                task: entry.task_id(),
                name,
            });
        }
        entry
    }

    /// Keeps the id and name of the task removed last
    /// ([`removed`](Self::removed)), from here on.
    pub(crate) fn keep_removed(&mut self) {
        self.keep_removed = true;
    }

    /// The id and name of task `key`, if it is the task removed last and
    /// [`keep_removed`](Self::keep_removed) asked for them: what the
    /// observer of the poll in which a task ended reports, though its slot
    /// is gone (and may hold a task spawned by what its end ran).
    pub(crate) fn removed(&self, key: TaskKey) -> Option<(TaskId, Option<Rc<str>>)> {
        self.removed
            .as_ref()
            .filter(|r| r.key == key)
            .map(|r| (r.task, r.name.clone()))
    }

    /// Checks an id that queue `queue`'s scheduler handed out: `Some` when
    /// it names a live task that was not the scheduler's to hand out (one
    /// of another queue, or one not queued: an id returned twice or never
    /// pushed). Ids of ended tasks pass: `poll_task` skips them.
    pub(crate) fn check_handout(&self, id: TaskKey, queue: usize) -> Option<Spurious> {
        let e = self.get(id)?;
        let st = e.state();
        if st.is_complete() {
            None
        } else if e.queue() != queue {
            Some(Spurious::OtherQueue(e.queue()))
        } else if !st.is_queued() {
            Some(Spurious::NotQueued)
        } else {
            None
        }
    }

    /// A wake of `id`: `Some((queue, group))` if the caller must push it now.
    #[must_use = "a woken idle task must be pushed to its scheduler"]
    pub(crate) fn wake(&mut self, id: TaskKey) -> Option<(usize, GroupId)> {
        let e = self.get(id)?;
        match e.update(|st| st.transition_to_scheduled()) {
            TransitionToScheduled::Push => Some((e.queue(), self.group_of(e.task.header()))),
            TransitionToScheduled::AfterPoll | TransitionToScheduled::Nothing => None,
        }
    }

    /// Where a deferred (yielded) task goes at the next host turn, if it is
    /// still waiting there.
    pub(crate) fn deferred_target(&self, id: TaskKey) -> Option<(usize, GroupId)> {
        let e = self.get(id)?;
        let st = e.state();
        (st.is_scheduled() && !st.is_complete() && !st.is_running())
            .then(|| (e.queue(), self.group_of(e.task.header())))
    }

    /// A clone of live task `id`'s waker (an owned reference), for the
    /// loom models that hand it to another thread.
    #[cfg(all(test, tourbillon_loom))]
    pub(crate) fn waker_clone(&self, id: TaskKey) -> Waker {
        self.get(id).expect("live task").task.waker_clone()
    }

    /// Clears the foreign-wake dedup flag of `id` before its wake is applied.
    pub(crate) fn clear_remote_notified(&self, id: TaskKey) {
        if let Some(e) = self.get(id) {
            e.task.header().clear_notified();
        }
    }

    /// `abort()`: returns `true` if the caller must cancel the task at the
    /// next poll boundary (it is idle or queued); a running task is
    /// cancelled by `poll_task` when its poll returns. The CANCELLED bit may
    /// be set already: a join handle sets it at once and sends the id here
    /// (so that a task aborted during its own poll is dropped when the poll
    /// returns); cancelling an idle task twice is harmless
    /// ([`cancel_idle`] finds it complete).
    #[must_use = "an idle task that was aborted must be cancelled at the next poll boundary"]
    pub(crate) fn abort(&mut self, id: TaskKey) -> bool {
        let Some(e) = self.get(id) else {
            return false;
        };
        e.update(|st| st.transition_to_cancelled()) == TransitionToCancelled::CancelIdle
    }

    /// The ids of the tasks of queue `queue` that are alive and not being
    /// polled, in slot order.
    pub(crate) fn ids_in_queue(&self, queue: usize) -> Vec<TaskKey> {
        if self.entries.is_empty() {
            return Vec::new();
        }
        self.entries
            .iter()
            .filter(|(_, e)| e.queue() == queue && !e.state().is_running())
            .map(|(_, e)| e.id())
            .collect()
    }

    /// Shutdown: removes every entry that is not being polled, with the
    /// waker of its joiner (to wake: dropping the entry drops the future and
    /// marks the cell complete and cancelled, which the join handle reads).
    pub(crate) fn drain(&mut self) -> Vec<Drained> {
        // The slab's iterator visits every slot, vacant or not: after a
        // burst of 50,000 tasks that all ended, 50,000 of them.
        if self.entries.is_empty() {
            return Vec::new();
        }
        let keys: Vec<usize> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.state().is_running())
            .map(|(k, _)| k)
            .collect();
        keys.into_iter()
            .map(|k| {
                let id = self.entries[k].id();
                let group = self.group_of(self.entries[k].task.header());
                let join_waker = self.entries[k].task.take_join_waker();
                let deliver = self.take_deliver(k);
                Drained {
                    entry: self.remove(id),
                    group,
                    join_waker,
                    deliver,
                }
            })
            .collect()
    }
}

/// A task removed at shutdown, with what the executor still has to do for
/// it.
pub(crate) struct Drained {
    pub(crate) entry: TaskEntry,
    pub(crate) group: GroupId,
    /// Its joiner's waker, to wake (the join handle then reads the result
    /// of [`TaskEntry::end_at_shutdown`]).
    pub(crate) join_waker: Option<Waker>,
    /// A remote task's delivery, for [`TaskEntry::end_at_shutdown`].
    pub(crate) deliver: Option<Deliver>,
}

/// The group of the task whose header is `header`: its own (derived from
/// its id) unless it is `KEYED`, when `keyed` holds it by slot.
#[inline]
pub(super) fn group_of(keyed: &[u32], header: &Header) -> GroupId {
    let index = header.key.index();
    if header.state().is_keyed() {
        GroupId::keyed(keyed[index as usize])
    } else {
        GroupId::task(index)
    }
}

/// Asks the CPU to bring the cache line at `p` into the cache, without
/// waiting for it (x86-64; elsewhere nothing): a hint, for data read soon
/// in an order the hardware prefetchers cannot guess (`Las::exact()`'s
/// visits of tasks). `p` need not be valid: it is never dereferenced.
#[inline(always)]
pub(crate) fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads or writes nothing the
    // program sees, whatever the address; SSE, which it needs, is part of
    // the x86-64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
