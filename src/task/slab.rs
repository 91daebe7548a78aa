//! Task storage: a [`slab`] of entries with generation-checked ids, and the
//! harness that polls, cancels and completes a task.
//!
//! Every operation that reads or writes a task's stage is in this file, and
//! each checks the entry's state bits first:
//!
//! | operation       | requires                     | during the call |
//! |-----------------|------------------------------|-----------------|
//! | `poll_task`     | not COMPLETE, not RUNNING    | RUNNING set     |
//! | `cancel_idle`   | CANCELLED, not COMPLETE/RUNNING | RUNNING set  |
//! | entry removal   | not RUNNING                  | -               |
//!
//! RUNNING is the lock: while it is set the entry is never removed (so the
//! cell stays alive though the slab is not borrowed during the poll) and no
//! other stage operation starts. The slab is released while user code runs
//! (a poll, a destructor), so that code may spawn, wake, abort and join.
//!
//! A task leaves the slab when it completes (or at shutdown). If its join
//! handle lives, the result stays in the cell, which the handle holds
//! ([`JoinCell`]): the handle reads it (COMPLETE, not RUNNING) without the
//! slab.

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;

use slab::Slab;

use super::id::{GroupId, TaskId};
use super::raw::{Finish, Header, JoinCell, OwnedTask, PollCode, RawTask};
use super::state::{State, TransitionToScheduled};
use crate::boundary::{self, Payload};
use crate::error::JoinError;
use crate::executor::context;
use crate::executor::inbox::Remote;

/// One live task, as the executor sees it: the owning pointer to its cell,
/// whose header holds its id (the generation that ids are checked against:
/// every lookup reads the header next anyway), state bits, queue and group.
/// One word: the slab builds its entry in registers (a 12-byte entry was
/// built on the stack and copied as 16 bytes, a store-forwarding stall per
/// spawn; perf, PROFILING.md "Findings").
pub(crate) struct TaskEntry {
    task: OwnedTask,
}

impl TaskEntry {
    pub(crate) fn queue(&self) -> usize {
        self.task.header().queue as usize
    }
    pub(crate) fn id(&self) -> TaskId {
        self.task.header().id
    }
    fn state(&self) -> State {
        self.task.header().state()
    }
    fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.task.header().update_state(f)
    }
    /// Gives up the slab's reference to a completed task whose join handle
    /// reads the result.
    fn release_keep_stage(self) {
        self.task.release_keep_stage();
    }
    /// Lets go of a task no join handle reads (dropping its future or
    /// result, [`OwnedTask::release`]); returns a destructor's panic.
    pub(crate) fn release(self) -> Option<boundary::Payload> {
        self.task.release()
    }

    /// The task ended (its scheduler was already told so).
    pub(crate) fn is_complete(&self) -> bool {
        self.state().is_complete()
    }
}

/// All live tasks of one executor.
///
/// The entries hold the task pointers (the id, state bits, queue and group
/// are in the cell's header, which every lookup reads anyway, and so are
/// the joiner's waker and the result). Beside them, indexed alike, the
/// generation of each slot's next occupant, and the
/// optional per-task data of features in use (names, remote deliveries,
/// ready stamps), so that a run walks as little memory as possible.
pub(crate) struct TaskSlab {
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
    /// The executor's thread-safe half, which task cells point to without
    /// counting (`OwnedTask::new`). Declared after `entries`: fields drop
    /// in order, so it outlives every entry. Only held, never read: the
    /// cells use `remote_ptr`.
    _remote: Arc<Remote>,
    /// `Arc::as_ptr(&_remote)`, what the cells get.
    remote_ptr: NonNull<Remote>,
}

/// How a poll (or a cancellation) ended. One or two bytes, returned in a
/// register: the record of a task that ended goes to the caller's slot
/// ([`poll_task`]), so that the pending case, five polls in six of the
/// headline workload, neither builds nor matches a large enum (callgrind;
/// PROFILING.md, "Findings").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polled {
    /// The id is stale (the task ended): nothing was polled.
    Stale,
    /// The task is still pending; the [`Next`] says what the run loop does
    /// with it. (Its group, which only a scheduler other than
    /// `RunnableFifo` needs, is looked up there: [`TaskSlab::group_of_id`].)
    Pending(Next),
    /// The task ended; its record is in the caller's slot.
    Done,
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

/// A task that ended; the caller finishes the job outside the slab borrow.
pub(crate) struct Done {
    pub(crate) queue: usize,
    pub(crate) group: GroupId,
    pub(crate) finish: Finish,
    /// It ended by `abort()`.
    pub(crate) cancelled: bool,
    /// Panics for the panic policy: the task's own payload when asked for
    /// (panic propagation), and those of the user code that ending the task
    /// ran (a delivery, the joiner's waker, the result's destructor). Rare,
    /// so boxed: one word in the common case's record.
    pub(crate) panics: Option<Box<Panics>>,
}

/// Panics kept for the panic policy ([`Done::panics`]).
#[derive(Default)]
pub(crate) struct Panics {
    /// The task's own panic, taken for `Propagate`.
    pub(crate) task: Option<Payload>,
    /// Panics of other user code, in the order they were caught.
    pub(crate) caught: Vec<Payload>,
}

/// Keeps `payload` in `panics` for the panic policy.
#[cold]
fn keep(panics: &mut Option<Box<Panics>>, payload: Payload) {
    panics.get_or_insert_with(Box::default).caught.push(payload);
}

/// Keeps the panic of `result`, if any, in `panics`.
#[inline(always)]
fn check(panics: &mut Option<Box<Panics>>, result: Result<(), Payload>) {
    if let Err(p) = result {
        keep(panics, p);
    }
}

impl Done {
    /// The record with the panics caught while the task ended added.
    #[cold]
    #[inline(never)]
    fn with(mut self, caught: Box<Panics>) -> Done {
        match &mut self.panics {
            Some(panics) => panics.caught.extend(caught.caught),
            None => self.panics = Some(caught),
        }
        self
    }
}

/// What completing a task leaves to do once the slab is released.
struct Completion {
    done: Done,
    /// The join handle's waker, to wake.
    join_waker: Option<Waker>,
    /// The removed entry.
    entry: TaskEntry,
    /// A join handle lives: the result stays in the cell for it.
    joined: bool,
    /// A remotely spawned task's delivery to its remote join handle.
    deliver: Option<Deliver>,
}

impl Completion {
    /// Delivers a remote task's result, lets go of the entry (dropping the
    /// result of a detached task) and wakes the joiner. Must run with the
    /// slab released: all may run user code, whose panics are caught into
    /// the record (the task's own record is complete by then: its end is
    /// counted whatever they do).
    #[inline(always)]
    fn settle(self) -> Done {
        // Taken apart first: moved as a whole, the record was built on the
        // stack and copied field by field (callgrind).
        let Completion {
            done,
            join_waker,
            entry,
            joined,
            deliver,
        } = self;
        // Kept apart from `done` (not written through a reference) so that
        // the record stays in registers (callgrind).
        let mut caught = None;
        if let Some(deliver) = deliver {
            let raw = entry.task.raw();
            check(&mut caught, boundary::call(move || deliver(raw)));
        }
        // Before the wake: the joiner may drop its handle in there, and then
        // finds the handle the cell's last owner.
        if joined {
            entry.release_keep_stage();
        } else if let Some(p) = entry.release() {
            keep(&mut caught, p);
        }
        if let Some(w) = join_waker {
            check(&mut caught, boundary::call(move || w.wake()));
        }
        match caught {
            None => done,
            Some(caught) => done.with(caught),
        }
    }
}

/// The id of a task whose output is `T`. Only [`TaskSlab::insert`] makes
/// one, from the future it stores, so whoever holds it may read that task's
/// result as a `T`: the proof that [`RawTask::take_result`] asks for (a
/// remote delivery, [`TaskSlab::set_deliver`]), checked by the compiler
/// instead of by a `TypeId` comparison.
pub(crate) struct OutputId<T> {
    id: TaskId,
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
    pub(crate) fn id(self) -> TaskId {
        self.id
    }
}

/// Hands a remotely spawned task's result to its remote join handle: called
/// with the completed task (its result still in the cell), or dropped
/// uncalled when the task is dropped unfinished (the handle then reads
/// `Cancelled`).
pub(crate) type Deliver = Box<dyn FnOnce(RawTask)>;

/// A [`Deliver`] for the task `_id` (whose output is `T`), passing the
/// result to `send`; [`TaskSlab::set_deliver`] attaches it to that task.
fn deliverer<T: 'static>(
    _id: OutputId<T>,
    send: impl FnOnce(Result<T, JoinError>) + 'static,
) -> Deliver {
    Box::new(move |raw: RawTask| {
        // SAFETY: `Completion::settle` calls this with the removed entry
        // alive (it owns a reference to the cell), the task COMPLETE and not
        // RUNNING (its stage holds the result), on the executor thread; the
        // task is the one of the `OutputId<T>` this was made from
        // (`set_deliver`), so its output type is `T`.
        if let Some(result) = unsafe { raw.take_result::<T>() } {
            send(result);
        }
    })
}

impl TaskSlab {
    pub(crate) fn new(remote: Arc<Remote>) -> Self {
        Self {
            entries: Slab::new(),
            generations: Vec::new(),
            names: Vec::new(),
            deliver: Vec::new(),
            ready_ns: Vec::new(),
            keyed: Vec::new(),
            remote_ptr: NonNull::new(Arc::as_ptr(&remote).cast_mut())
                .expect("an Arc's pointer is not null"),
            _remote: remote,
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
        // SAFETY: `insert_cell` just made this cell for `F` with the
        // handle's bit, on this thread; this is its only `JoinCell`.
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
        let id = TaskId::new(index as u32, generation);
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
        // SAFETY: `remote_ptr` is `Arc::as_ptr` of `self._remote`, which
        // outlives the entry: an entry is dropped either after its removal,
        // while the slab (and its `Arc`) lives, or when the slab drops
        // `entries`, before `_remote`.
        let task =
            unsafe { OwnedTask::new(future, id, self.remote_ptr, queue as u16, keyed, handle) };
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
    pub(crate) fn set_deliver<T: 'static>(
        &mut self,
        oid: OutputId<T>,
        send: impl FnOnce(Result<T, JoinError>) + 'static,
    ) {
        let deliver = deliverer(oid, send);
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

    fn take_deliver(&mut self, index: usize) -> Option<Deliver> {
        self.deliver.get_mut(index).and_then(Option::take)
    }

    /// Names task `id` (it must be live).
    pub(crate) fn set_name(&mut self, id: TaskId, name: Rc<str>) {
        let index = id.index() as usize;
        if index >= self.names.len() {
            self.names.resize(index + 1, None);
        }
        self.names[index] = Some(name);
    }

    /// The name of task `id`, if it has one.
    pub(crate) fn name(&self, id: TaskId) -> Option<Rc<str>> {
        self.get(id)?;
        self.names.get(id.index() as usize)?.clone()
    }

    /// Records that task `id` became runnable at `now_ns`.
    pub(crate) fn set_ready(&mut self, id: TaskId, now_ns: u64) {
        let index = id.index() as usize;
        if index >= self.ready_ns.len() {
            self.ready_ns.resize(index + 1, 0);
        }
        self.ready_ns[index] = now_ns;
    }

    /// When task `id` last became runnable (see [`set_ready`](Self::set_ready)).
    pub(crate) fn ready_ns(&self, id: TaskId) -> Option<u64> {
        self.get(id)?;
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
    pub(crate) fn group_of_id(&self, id: TaskId) -> GroupId {
        match self.get(id) {
            Some(e) => self.group_of(e.task.header()),
            None => GroupId::task(id.index()),
        }
    }

    pub(crate) fn get(&self, id: TaskId) -> Option<&TaskEntry> {
        self.entries
            .get(id.index() as usize)
            .filter(|e| e.task.header().id.generation() == id.generation())
    }

    fn remove(&mut self, id: TaskId) -> TaskEntry {
        let index = id.index() as usize;
        let entry = self.entries.remove(index);
        debug_assert!(!entry.state().is_running());
        self.generations[index] = self.generations[index].wrapping_add(1);
        if let Some(name) = self.names.get_mut(index) {
            *name = None;
        }
        entry
    }

    /// Checks an id that queue `queue`'s scheduler handed out: `Some` when
    /// it names a live task that was not the scheduler's to hand out (one
    /// of another queue, or one not queued: an id returned twice or never
    /// pushed). Ids of ended tasks pass: `poll_task` skips them.
    pub(crate) fn check_handout(&self, id: TaskId, queue: usize) -> Option<Spurious> {
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
    pub(crate) fn wake(&mut self, id: TaskId) -> Option<(usize, GroupId)> {
        let e = self.get(id)?;
        match e.update(|st| st.transition_to_scheduled()) {
            TransitionToScheduled::Push => Some((e.queue(), self.group_of(e.task.header()))),
            TransitionToScheduled::AfterPoll | TransitionToScheduled::Nothing => None,
        }
    }

    /// Where a deferred (yielded) task goes at the next host turn, if it is
    /// still waiting there.
    pub(crate) fn deferred_target(&self, id: TaskId) -> Option<(usize, GroupId)> {
        let e = self.get(id)?;
        let st = e.state();
        (st.is_scheduled() && !st.is_complete() && !st.is_running())
            .then(|| (e.queue(), self.group_of(e.task.header())))
    }

    /// A clone of live task `id`'s waker (an owned reference), for the
    /// loom models that hand it to another thread.
    #[cfg(all(test, tourbillon_loom))]
    pub(crate) fn waker_clone(&self, id: TaskId) -> Waker {
        self.get(id).expect("live task").task.waker_clone()
    }

    /// Clears the foreign-wake dedup flag of `id` before its wake is applied.
    pub(crate) fn clear_remote_notified(&self, id: TaskId) {
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
    pub(crate) fn abort(&mut self, id: TaskId) -> bool {
        let Some(e) = self.get(id) else {
            return false;
        };
        e.update(|st| {
            if st.is_complete() {
                return false;
            }
            st.set_cancelled();
            !st.is_running()
        })
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

    /// Marks `id` complete after its stage was finished; returns the
    /// completion record.
    ///
    /// `raw` is the cell of `id`, whose RUNNING bit the caller holds (so
    /// its entry is still in the slab: no lookup).
    #[inline(always)]
    fn complete(
        &mut self,
        id: TaskId,
        raw: RawTask,
        finish: Finish,
        panic: Option<Box<dyn Any + Send>>,
        cancelled: bool,
    ) -> Completion {
        // SAFETY: RUNNING is set, so the entry (and the slab's reference to
        // the cell) stays until `remove` below, after the last use.
        let header = unsafe { raw.header_unbound() };
        let joined = header.update_state(|st| {
            st.set_running(false);
            st.set_notified(false);
            st.set_scheduled(false);
            st.set_complete();
            st.has_join_interest()
        });
        let (queue, group) = (header.queue as usize, self.group_of(header));
        // SAFETY: as above, and we are on the executor thread (the slab is
        // `!Send`), the only one that touches the joiner's waker.
        let join_waker = unsafe { raw.take_join_waker() };
        let deliver = self.take_deliver(id.index() as usize);
        Completion {
            deliver,
            done: Done {
                queue,
                group,
                finish,
                cancelled,
                panics: panic.map(|p| {
                    Box::new(Panics {
                        task: Some(p),
                        caught: Vec::new(),
                    })
                }),
            },
            join_waker,
            entry: self.remove(id),
            joined,
        }
    }
}

/// A task removed at shutdown, with what the executor still has to do for
/// it.
pub(crate) struct Drained {
    pub(crate) entry: TaskEntry,
    pub(crate) group: GroupId,
    /// Its joiner's waker, to wake (the join handle then reads Cancelled).
    pub(crate) join_waker: Option<Waker>,
    /// A remote task's delivery, to drop (its handle reads Cancelled).
    pub(crate) deliver: Option<Deliver>,
}

/// The group of the task whose header is `header`: its own (derived from
/// its id) unless it is `KEYED`, when `keyed` holds it by slot.
#[inline]
fn group_of(keyed: &[u32], header: &Header) -> GroupId {
    let index = header.id.index();
    if header.state().is_keyed() {
        GroupId::keyed(keyed[index as usize])
    } else {
        GroupId::task(index)
    }
}

/// What to do with a task whose poll returned `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for a wake.
    Wait,
    /// Woken during its poll: push it to its scheduler now.
    Requeue,
    /// Yielded through `yield_now`: push it to its scheduler now, or, when
    /// the executor is nested in a host runtime, hold it until the host's
    /// next turn (the state already says SCHEDULED, so wakes in between
    /// are merged).
    Yield,
}

/// Polls task `id` once (or cancels it, if it was aborted while queued).
/// The slab is not borrowed while the future runs. A task that yielded
/// through `yield_now` comes back as [`Next::Yield`]. `second_site` picks
/// the call site of the poll ([`RawTask::poll`]). When the task ends, its
/// record goes to `done` and `Polled::Done` is returned; the record holds
/// the task's panic payload when `take_panic` asks for it, and the panics
/// of the user code that ending the task ran (wakers, destructors).
#[inline(always)]
pub(crate) fn poll_task(
    slab: &RefCell<TaskSlab>,
    id: TaskId,
    take_panic: bool,
    second_site: bool,
    done: &mut Option<Done>,
) -> Polled {
    let (raw, cancelled) = {
        // Exclusive though it only reads: no other borrow is live here, and
        // a `RefMut`'s flag costs fewer instructions than a `Ref`'s count.
        let s = slab.borrow_mut();
        let Some(e) = s.get(id) else {
            return Polled::Stale;
        };
        // Read before the state is written: the compiler cannot tell that
        // the write leaves the entry alone, and would read it again.
        let raw = e.task.raw();
        let mut st = e.state();
        if st.is_complete() || st.is_running() {
            // Ended (a stale id a scheduler may keep after `forget`). The
            // built-in schedulers hand out only queued tasks; the ids of a
            // custom one are checked when it hands them out
            // (`TaskSlab::check_handout`).
            return Polled::Stale;
        }
        st.set_scheduled(false);
        st.set_running(true);
        e.task.header().set_state(st);
        (raw, st.is_cancelled())
    };
    if cancelled {
        // SAFETY: RUNNING is set (the entry stays, nothing else touches the
        // stage), the stage is Running (not COMPLETE), executor thread.
        let finish = unsafe { raw.cancel() };
        return ended(slab, id, raw, finish, take_panic, true, done);
    }
    context::begin_poll(raw.header_addr());
    // SAFETY: as above.
    let code = unsafe { raw.poll(second_site) };
    let yielded = context::end_poll();
    // The byte itself, not a `Poll` made of it: the two call sites'
    // results meet here, and the compiler re-checks a byte turned into an
    // enum there (nine instructions per poll; callgrind).
    if code != PollCode::PENDING {
        return ended(slab, id, raw, code.finish(), take_panic, false, done);
    }
    settle_pending(slab, id, raw, yielded, take_panic, done)
}

/// The end of [`poll_task`] for a task that ended (its poll returned
/// `Ready` or panicked, or it was cancelled): completes it and leaves its
/// record in `done`.
#[inline(always)]
fn ended(
    slab: &RefCell<TaskSlab>,
    id: TaskId,
    raw: RawTask,
    finish: Finish,
    take_panic: bool,
    cancelled: bool,
    done: &mut Option<Done>,
) -> Polled {
    let panic = match finish {
        // SAFETY: RUNNING is still set; the stage is Finished.
        Finish::Panicked if take_panic => unsafe { raw.take_panic() },
        _ => None,
    };
    let c = slab
        .borrow_mut()
        .complete(id, raw, finish, panic, cancelled);
    *done = Some(c.settle());
    Polled::Done
}

/// The end of [`poll_task`] for a poll that returned `Pending`.
#[inline(always)]
fn settle_pending(
    slab: &RefCell<TaskSlab>,
    id: TaskId,
    raw: RawTask,
    yielded: bool,
    take_panic: bool,
    done: &mut Option<Done>,
) -> Polled {
    // SAFETY: RUNNING is still set, so the entry (and with it the slab's
    // reference to the cell) stays for this block: the header is read
    // without borrowing the slab again.
    let header = unsafe { raw.header_unbound() };
    let mut st = header.state();
    if st.is_cancelled() {
        // Aborted during its own poll: drop it now, unpolled.
        // SAFETY: RUNNING is still set: the entry stays and nothing else
        // touches the stage; the stage is Running; executor thread.
        let f = unsafe { raw.cancel() };
        return ended(slab, id, raw, f, take_panic, true, done);
    }
    st.set_running(false);
    let next = if st.is_notified() {
        st.set_notified(false);
        st.set_scheduled(true);
        Next::Requeue
    } else if yielded {
        st.set_scheduled(true);
        Next::Yield
    } else {
        Next::Wait
    };
    header.set_state(st);
    Polled::Pending(next)
}

/// Cancels an aborted task that is not running, at a poll boundary.
pub(crate) fn cancel_idle(slab: &RefCell<TaskSlab>, id: TaskId, take_panic: bool) -> Option<Done> {
    let raw = {
        let s = slab.borrow();
        let e = s.get(id)?;
        let ok = e.update(|st| {
            if st.is_complete() || st.is_running() || !st.is_cancelled() {
                return false;
            }
            st.set_running(true);
            true
        });
        if !ok {
            return None;
        }
        e.task.raw()
    };
    // SAFETY: RUNNING is set (the entry stays, nothing else touches the
    // stage), the stage is Running (not COMPLETE), executor thread.
    let finish = unsafe { raw.cancel() };
    // The destructor's panic is the task's: taken for `Propagate`, as in
    // `ended`.
    let panic = match finish {
        // SAFETY: RUNNING is still set; the stage is Panicked.
        Finish::Panicked if take_panic => unsafe { raw.take_panic() },
        _ => None,
    };
    let c = slab.borrow_mut().complete(id, raw, finish, panic, true);
    Some(c.settle())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_tell_reused_slots_apart() {
        let mut s = TaskSlab::new(Arc::new(Remote::default()));
        let (a, _) = s.insert(async {}, 0, None);
        let a = a.id();
        // Complete it by hand through the harness.
        let cell = RefCell::new(s);
        let mut done = None;
        assert_eq!(poll_task(&cell, a, false, false, &mut done), Polled::Done);
        assert!(done.is_some());
        let mut s = cell.into_inner();
        assert!(s.get(a).is_none());
        let (b, _) = s.insert(async {}, 0, None);
        let b = b.id();
        assert_eq!(a.index(), b.index());
        assert_ne!(a, b);
        assert!(s.get(a).is_none());
        assert!(s.get(b).is_some());
        assert!(s.wake(a).is_none());
    }

    /// Both call sites of a poll ([`RawTask::poll`]) report `Pending`, an
    /// output and a panic alike.
    #[test]
    fn both_call_sites_report_pending_output_and_panic() {
        for second_site in [false, true] {
            let mut s = TaskSlab::new(Arc::new(Remote::default()));
            let mut first = true;
            let pend_once = std::future::poll_fn(move |_| {
                if std::mem::take(&mut first) {
                    std::task::Poll::Pending
                } else {
                    std::task::Poll::Ready(7)
                }
            });
            let (a, _) = s.insert(pend_once, 0, None);
            let (b, _) = s.insert(async { panic!("boom") }, 0, None);
            let (a, b) = (a.id(), b.id());
            let cell = RefCell::new(s);
            let mut done = None;
            let polled = poll_task(&cell, a, true, second_site, &mut done);
            assert_eq!(polled, Polled::Pending(Next::Wait));
            assert!(done.is_none());
            // Runnable again, as a wake would leave it.
            cell.borrow()
                .get(a)
                .unwrap()
                .update(|st| st.set_scheduled(true));
            let polled = poll_task(&cell, a, true, second_site, &mut done);
            assert_eq!(polled, Polled::Done);
            let d = done.take().unwrap();
            assert_eq!(d.finish, Finish::Output);
            assert!(d.panics.is_none());
            let polled = poll_task(&cell, b, true, second_site, &mut done);
            assert_eq!(polled, Polled::Done);
            let d = done.take().unwrap();
            assert_eq!(d.finish, Finish::Panicked);
            let payload = d.panics.expect("the payload, asked for").task.unwrap();
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
        }
    }
}
