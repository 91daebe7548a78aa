#![forbid(unsafe_code)]
//! EEVDF (earliest eligible virtual deadline first) across task queues.
//!
//! Pure arithmetic over a table of entities, one per queue: no clock, no
//! tasks, no I/O, so every rule is unit-tested here without an executor.
//! It imports nothing of the crate; the run loop decides when each rule
//! applies.
//!
//! # Concepts
//!
//! Each queue `i` has a weight `w_i` (its shares) and a request `r_i` (its
//! slice, in ns). CPU time is shared in proportion to the weights of the
//! queues that are *runnable* (have a runnable task). The accounting is in
//! virtual time:
//!
//! * **vruntime** `v_i` grows by `ceil(Δ·K / w_i)` when queue `i` receives
//!   `Δ` ns of service (R1), with `K = 1024`: a queue of weight 1024 sees
//!   virtual time pass at real speed, heavier queues slower.
//! * **V**, the zero-lag point, is the weight-averaged vruntime of the
//!   runnable queues (R2): `V = v0 + floor(Σ (v_j - v0)·w_j / Σ w_j)`.
//!   `v0` is a reference point that only moves forward (`min v_j`), kept so
//!   that every sum is over small relative values.
//! * **lag** `w_i·(V - v_i)/K` is the service queue `i` is owed (positive) or
//!   has received in excess (negative). The lags of the runnable queues sum
//!   to zero. A queue is **eligible** when its lag is `>= 0`, tested without
//!   a division as `Σ_j (v_j - v_i)·w_j >= 0` (R3).
//! * **virtual deadline** `d_i = v_i + r_i·K/w_i` (R4): when the queue would
//!   have received its request. Renewed when `v_i` reaches it.
//!
//! # The pick (R5)
//!
//! At a run boundary: a lone runnable queue runs (fast path). Otherwise the
//! queue that just ran continues if it is still eligible and has not used
//! the request it was picked with (`v < d`, RUN_TO_PARITY: the run loop
//! passes no such queue once R4 renewed that request, as Linux's
//! `protect_slice` ends with the deadline it protected); else the eligible
//! queue with the
//! earliest deadline runs, ties to the lower index. Picking by deadline gives
//! latency to queues with short requests; eligibility keeps them from taking
//! more than their share. With no join or leave, EEVDF keeps every lag within
//! `(-r_max, max(r_max, q))` (Stoica and Abdel-Wahab, 1995), where `q` is the
//! quantum: here one poll, since a cooperative executor cannot stop a poll.
//!
//! # Joins and leaves (R6, R7)
//!
//! A queue that runs out of tasks leaves with its virtual lag
//! `vl = V - v_i` saved, a credit clamped to `2·r_i·K/w_i` (R7). When it
//! becomes runnable again it is placed so that its lag is what it left with:
//! `v_i = V - vl·(W + w_i)/W` over the other runnable weights `W` (Linux
//! `place_entity` with `PLACE_LAG`). A debt (negative lag) is not clamped:
//! it decays by the progress of `V` of the other queues while the queue
//! slept, never turning into credit (Linux `DELAY_DEQUEUE` + `DELAY_ZERO`,
//! where an ineligible sleeper stays queued until its debt is paid):
//! sleeping does not erase debt, and long sleepers come back even. A new
//! queue starts at `V` with half a request (`PLACE_DEADLINE_INITIAL`); a
//! queue that wakes alone starts at `V`.
//!
//! # Reweighting (R10)
//!
//! `set_weight` keeps the lag and the relative deadline:
//! `v' = V - vl·w/w'`, `d' = v' + (d - v)·w/w'`.
//!
//! # Numbers (R11)
//!
//! Vruntimes are `u64` compared through wrapping signed differences, as the
//! kernel does; weighted sums use `i128`. Nothing is ever reset on overflow.
//! No legal input overflows (nor panics in a debug build): one charge adds
//! at most [`V_SPAN`] (`2^62 - 1`) virtual ns, a request in virtual time is
//! at most that, and every offset from `V` computed by a placement or a
//! reweighting (lag × weight ratio) is clamped to `±V_SPAN`, so that after
//! a jump of the clock of any size (up to its whole `u64` range) the queue
//! charged with it is ahead of `V`, not wrapped around behind it.
//! Lags in real ns saturate at the bounds of `i64`. With requests up to
//! 1 s, and polls and lags shorter than `V_SPAN / K` ns (52 days), none of
//! these bounds is reached and every result is exact.
//!
//! Symbols to fields: `w_i` = [`Entity::weight`], `r_i` = [`Entity::request_ns`],
//! `v_i` = [`Entity::v`], `d_i` = [`Entity::d`], saved `vl_i` =
//! [`Entity::vlag`], `V` at departure = [`Entity::v_saved`], `v0` =
//! [`Eevdf::v0`].
//!
//! References: Linux `kernel/sched/fair.c` (`avg_vruntime`,
//! `vruntime_eligible`, `pick_eevdf`, `place_entity`, `reweight_entity`);
//! Documentation/scheduler/sched-eevdf.rst; LWN 925371 and 969062.

/// Virtual nanoseconds per real nanosecond at weight `K`.
pub(crate) const K: u64 = 1024;

/// The largest virtual-time offset the table works with: a charge, a
/// request and an offset from `V` are clamped to it (R11). A quarter of the
/// `u64` range, so that two vruntimes within it of a common `V` compare
/// correctly through [`rel`].
pub(crate) const V_SPAN: u64 = u64::MAX / 4;

/// A virtual-time offset clamped to `±V_SPAN` (R11).
#[inline]
fn clamp_span(x: i128) -> i64 {
    x.clamp(-(V_SPAN as i128), V_SPAN as i128) as i64
}

/// `x` saturated to the range of `i64`.
#[inline]
fn saturate_i64(x: i128) -> i64 {
    x.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// `a / b` (`b > 0`), in 64 bits when `a` fits there, as it does unless a
/// queue's service is enormous: the 128-bit division of the runtime library
/// is a call of about 150 instructions, the 64-bit one an instruction
/// (callgrind). Same result either way.
#[inline]
fn div_u128(a: u128, b: u64) -> u128 {
    debug_assert!(b > 0);
    match u64::try_from(a) {
        Ok(a) => (a / b) as u128,
        Err(_) => a / b as u128,
    }
}

/// `ceil(a / b)` (`b > 0`), as [`div_u128`].
#[inline]
fn div_ceil_u128(a: u128, b: u64) -> u128 {
    debug_assert!(b > 0);
    match u64::try_from(a) {
        Ok(a) => a.div_ceil(b) as u128,
        Err(_) => a.div_ceil(b as u128),
    }
}

/// `floor(a / b)` (`b > 0`) for a 64-bit divisor (`W`), in 64 bits when
/// `a` fits, as [`div_u128`].
#[inline]
fn div_floor_by(a: i128, b: i64) -> i128 {
    debug_assert!(b > 0);
    match i64::try_from(a) {
        Ok(a) => a.div_euclid(b) as i128,
        Err(_) => a.div_euclid(b as i128),
    }
}

/// `a / b` rounded toward zero (`b > 0`), in 64 bits when both fit.
#[inline]
fn div_trunc_i128(a: i128, b: i128) -> i128 {
    debug_assert!(b > 0);
    match (i64::try_from(a), i64::try_from(b)) {
        // `b > 0`: no `i64::MIN / -1` overflow.
        (Ok(a), Ok(b)) => (a / b) as i128,
        _ => a / b,
    }
}

/// `a / b` rounded toward zero (`b > 0`): a shift when `b` is a power of
/// two (shares 1, 2, 4, ..., and their sums such as the 2 + 2 of two
/// queues of 2 shares), a division otherwise. Same result either way: a
/// negative `a` is biased by `b - 1` before the arithmetic shift, which
/// rounds toward negative infinity.
#[inline(always)]
fn div_trunc_i64(a: i64, b: i64) -> i64 {
    debug_assert!(b > 0);
    if b & (b - 1) == 0 {
        // `a < 0` only adds the bias: `a + b - 1` cannot overflow.
        let bias = (a >> 63) & (b - 1);
        (a + bias) >> b.trailing_zeros()
    } else {
        a / b
    }
}

/// `a - b` as a signed difference of wrapping vruntimes.
#[inline]
pub(crate) fn rel(a: u64, b: u64) -> i64 {
    a.wrapping_sub(b) as i64
}

/// `log2 w` for a power-of-two weight `w` (shares 1, 2, 4, ...), else
/// [`NOT_POW2`]: the shift that divides by `w`.
#[inline]
fn weight_shift(weight: u64) -> u8 {
    if weight.is_power_of_two() {
        weight.trailing_zeros() as u8
    } else {
        NOT_POW2
    }
}

/// [`weight_shift`] of a weight that is not a power of two.
const NOT_POW2: u8 = u8::MAX;

/// Virtual time for `delta_ns` of service at weight `w`: `ceil(Δ·K/w)` (R1),
/// at most [`V_SPAN`], with the weight's [`weight_shift`] given (an entity
/// keeps it with its weight: no test of the weight per charge). Inlined
/// into every charge: out of line, the call costs about as much as the
/// 64-bit path (callgrind).
#[inline(always)]
fn vdelta_by(delta_ns: u64, weight: u64, shift: u8) -> u64 {
    debug_assert_eq!(shift, weight_shift(weight));
    if delta_ns < 1 << 52 {
        // `Δ·K < 2^62` and `Δ·K + w - 1 < 2^64`: the same quotient in 64
        // bits as in 128 (every poll shorter than 52 days), and no clamp:
        // `ceil(Δ·K/w) <= Δ·K <= 2^62 - K`, below `V_SPAN`.
        let num = delta_ns * K;
        let q = if shift != NOT_POW2 {
            (num + (weight - 1)) >> shift
        } else {
            num.div_ceil(weight)
        };
        debug_assert!(q <= V_SPAN);
        return q;
    }
    let num = delta_ns as u128 * K as u128;
    let q = if shift != NOT_POW2 {
        // A shift instead of a division (shares 1, 2, 4, ...): the same
        // rounded-up quotient.
        (num + (weight - 1) as u128) >> shift
    } else {
        div_ceil_u128(num, weight)
    };
    q.min(V_SPAN as u128) as u64
}

/// Real nanoseconds that `vdelta` virtual ns are worth at weight `w`,
/// saturated to `i64` (reached only by a lag of more than `i64::MAX` ns,
/// 292 years, after a jump of the clock).
#[inline]
pub(crate) fn real_ns(vdelta: i64, weight: u64) -> i64 {
    saturate_i64(div_trunc_i128(vdelta as i128 * weight as i128, K as i128))
}

/// One queue's EEVDF state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entity {
    pub(crate) weight: u64,
    pub(crate) request_ns: u64,
    pub(crate) v: u64,
    pub(crate) d: u64,
    pub(crate) vlag: i64,
    pub(crate) v_saved: u64,
    pub(crate) runnable: bool,
    /// Never placed yet (first placement uses half a request).
    pub(crate) fresh: bool,
    /// [`vslice`](Self::vslice), kept with the weight (`set_weight`): a
    /// division less in every charge that renews, placement and departure.
    vreq: u64,
    /// [`weight_shift`] of the weight, kept with it (`set_weight`).
    wshift: u8,
}

impl Entity {
    pub(crate) fn new(weight: u64, request_ns: u64) -> Self {
        // Shares are `u32`: the sum of the weights fits in `i64` (`load`).
        debug_assert!(weight > 0 && weight <= u32::MAX as u64);
        Self {
            weight,
            request_ns,
            v: 0,
            d: 0,
            vlag: 0,
            v_saved: 0,
            runnable: false,
            fresh: true,
            vreq: Self::vslice_of(weight, request_ns),
            wshift: weight_shift(weight),
        }
    }

    /// [`vdelta_by`] at this entity's weight.
    #[inline(always)]
    fn vdelta(&self, delta_ns: u64) -> u64 {
        vdelta_by(delta_ns, self.weight, self.wshift)
    }

    /// The request in virtual time, `r·K/w`, at most [`V_SPAN`].
    #[inline]
    pub(crate) fn vslice(&self) -> u64 {
        debug_assert_eq!(self.vreq, Self::vslice_of(self.weight, self.request_ns));
        self.vreq
    }

    /// `r·K/w`, at most [`V_SPAN`].
    fn vslice_of(weight: u64, request_ns: u64) -> u64 {
        div_u128(request_ns as u128 * K as u128, weight).min(V_SPAN as u128) as u64
    }

    /// The lag clamp `L_i = 2·r_i·K/w_i` (R7): at most `2·V_SPAN`, which
    /// is below `i64::MAX`, so no clamp to it.
    #[inline(always)]
    fn lag_limit(&self) -> i64 {
        const { assert!(2 * V_SPAN <= i64::MAX as u64) };
        (2 * self.vslice()) as i64
    }
}

/// The entity table of one executor.
#[derive(Clone, Debug)]
pub(crate) struct Eevdf {
    pub(crate) ents: Vec<Entity>,
    pub(crate) v0: u64,
    runnable: usize,
    /// `S = Σ_j (v_j - v0)·w_j` over the runnable queues, exact, kept up to
    /// date by every change of a runnable queue's `v` or weight, of the
    /// runnable set and of `v0` (as Linux keeps `avg_vruntime`'s sums), so
    /// that V and eligibility cost no pass over the queues.
    sum: i128,
    /// `W = Σ_j w_j` over the runnable queues: at most 256 queues of at
    /// most 10,000 shares (`MAX_QUEUES`, `MAX_SHARES`), so 64 bits hold it,
    /// and each product with it is one 64-by-64-bit multiplication.
    load: i64,
    /// The runnable queues as a bit set (bit `i % 64` of word `i / 64`),
    /// so that the pick and `v0` visit only them, and a lone runnable
    /// queue is found without a pass over the table.
    mask: Vec<u64>,
    /// The runnable queue when exactly one is, else [`NO_QUEUE`]: kept
    /// with the runnable set, so that the lone queue (the pick's fast
    /// path, V, a queue switch's test) is known without reading the set.
    lone: usize,
}

/// [`Eevdf::lone`] when not exactly one queue is runnable.
const NO_QUEUE: usize = usize::MAX;

impl Eevdf {
    pub(crate) fn new(ents: Vec<Entity>) -> Self {
        let mut t = Self {
            ents,
            v0: 0,
            runnable: 0,
            sum: 0,
            load: 0,
            mask: Vec::new(),
            lone: NO_QUEUE,
        };
        t.resync();
        t
    }

    /// Recomputes the runnable count and the sums from the entities (after
    /// a test wrote their fields directly).
    pub(crate) fn resync(&mut self) {
        self.runnable = self.ents.iter().filter(|e| e.runnable).count();
        (self.sum, self.load) = self.recompute_sums();
        self.mask = vec![0; self.ents.len().div_ceil(64)];
        for i in 0..self.ents.len() {
            if self.ents[i].runnable {
                self.mask[i / 64] |= 1 << (i % 64);
            }
        }
        self.lone = self.lone_by_mask();
    }

    /// What [`lone`](Self::lone) must hold, from the runnable set.
    fn lone_by_mask(&self) -> usize {
        match self.runnable {
            1 => self.first_runnable().unwrap_or(NO_QUEUE),
            _ => NO_QUEUE,
        }
    }

    /// Whether `i` is the lone runnable queue: one comparison.
    #[inline(always)]
    pub(crate) fn is_lone(&self, i: usize) -> bool {
        debug_assert_eq!(self.lone, self.lone_by_mask());
        self.lone == i
    }

    /// The runnable queues, in index order.
    #[inline]
    fn runnable_queues(&self) -> impl Iterator<Item = usize> + '_ {
        self.mask.iter().enumerate().flat_map(|(w, &bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(w * 64 + b)
            })
        })
    }

    /// The runnable queue of lowest index.
    #[inline(always)]
    fn first_runnable(&self) -> Option<usize> {
        // The first 64 queues (all of them, for most executors): no loop.
        if let Some(&bits) = self.mask.first() {
            if bits != 0 {
                return Some(bits.trailing_zeros() as usize);
            }
        }
        self.mask
            .iter()
            .position(|&bits| bits != 0)
            .map(|w| w * 64 + self.mask[w].trailing_zeros() as usize)
    }

    /// Number of runnable queues.
    pub(crate) fn runnable_count(&self) -> usize {
        self.runnable
    }

    /// V (R2): weighted average vruntime of the runnable queues, floored;
    /// `v0` when none is runnable.
    pub(crate) fn avg_vruntime(&self) -> u64 {
        self.avg_now()
    }

    /// [`avg_vruntime`](Self::avg_vruntime), inlined into placement and
    /// departure.
    #[inline(always)]
    fn avg_now(&self) -> u64 {
        debug_assert_eq!(self.lone, self.lone_by_mask());
        // One runnable queue `j`: `S = (v_j - v0)·w_j` and `W = w_j`, so V
        // is `v_j` exactly, without a division. (`NO_QUEUE` is no index.)
        if let Some(e) = self.ents.get(self.lone) {
            debug_assert_eq!(e.v, self.avg_of(self.weighted_sums()));
            return e.v;
        }
        self.avg_of(self.weighted_sums())
    }

    /// V from the sums of [`weighted_sums`](Self::weighted_sums).
    #[inline]
    fn avg_of(&self, (sum, load): (i128, i64)) -> u64 {
        if load == 0 {
            return self.v0;
        }
        self.v0.wrapping_add(div_floor_by(sum, load) as i64 as u64)
    }

    /// `S = Σ_j (v_j - v0)·w_j` and `W = Σ_j w_j` over the runnable queues,
    /// exactly (kept up to date; debug builds check them against a pass
    /// over the queues).
    #[inline]
    fn weighted_sums(&self) -> (i128, i64) {
        debug_assert_eq!(
            (self.sum, self.load),
            self.recompute_sums(),
            "tourbillon bug: EEVDF sums out of date"
        );
        (self.sum, self.load)
    }

    /// The sums of [`weighted_sums`](Self::weighted_sums) by a pass over the
    /// queues.
    fn recompute_sums(&self) -> (i128, i64) {
        let (mut sum, mut load) = (0i128, 0i64);
        for e in self.ents.iter().filter(|e| e.runnable) {
            sum += rel(e.v, self.v0) as i128 * e.weight as i128;
            load += e.weight as i64;
        }
        (sum, load)
    }

    /// R3 from the sums of [`weighted_sums`](Self::weighted_sums): `i` is
    /// eligible iff `Σ_j (v_j - v_i)·w_j = S - (v_i - v0)·W >= 0`.
    #[inline]
    fn eligible_in(&self, i: usize, (sum, load): (i128, i64)) -> bool {
        sum - rel(self.ents[i].v, self.v0) as i128 * load as i128 >= 0
    }

    /// R3: `i` is eligible iff `Σ_j (v_j - v_i)·w_j >= 0` over runnable `j`.
    pub(crate) fn eligible(&self, i: usize) -> bool {
        self.eligible_in(i, self.weighted_sums())
    }

    /// R1 + R4: charges `delta_ns` of service to `i`. Returns `true` when the
    /// request is used up (`v >= d`); the deadline is then renewed.
    #[must_use = "`true` means the request was used and renewed: the run's slice is over (R8b)"]
    #[inline(always)]
    pub(crate) fn charge(&mut self, i: usize, delta_ns: u64) -> bool {
        let v0 = self.v0;
        let e = &mut self.ents[i];
        let old = e.v;
        let vd = e.vdelta(delta_ns);
        e.v = e.v.wrapping_add(vd);
        if e.runnable {
            // `v - v0` grows by `vd` unless it passes `i64::MAX` (after a
            // jump of the clock), where `rel` wraps: one 64-by-64-bit
            // product then.
            self.sum += match rel(old, v0).checked_add(vd as i64) {
                Some(_) => vd as i128 * e.weight as i128,
                None => (rel(e.v, v0) as i128 - rel(old, v0) as i128) * e.weight as i128,
            };
        }
        if rel(e.v, e.d) >= 0 {
            e.d = e.v.wrapping_add(e.vslice());
            true
        } else {
            false
        }
    }

    /// R5: the queue to run next. `prev` is the queue whose run just ended,
    /// if it may continue under RUN_TO_PARITY (pass `None` after a
    /// preemption, or when its request was used and renewed during the
    /// run). `general` disables the single-queue fast path.
    #[must_use = "the picked queue is the one EEVDF owes the thread to"]
    pub(crate) fn pick(&mut self, prev: Option<usize>, general: bool) -> Option<usize> {
        let chosen = match self.runnable {
            0 => None,
            1 if !general => return self.pick_lone(),
            _ => match prev {
                Some(c)
                    if self.ents[c].runnable
                        && rel(self.ents[c].v, self.ents[c].d) < 0
                        && self.eligible(c) =>
                {
                    Some(c)
                }
                _ => self.earliest_eligible(),
            },
        };
        self.advance_v0();
        chosen
    }

    /// [`pick`](Self::pick) with one runnable queue and no general pick:
    /// the lone queue, which is also the minimum of `v0`'s update.
    #[inline(always)]
    pub(crate) fn pick_lone(&mut self) -> Option<usize> {
        debug_assert_eq!(self.runnable, 1);
        debug_assert_eq!(self.lone, self.lone_by_mask());
        let lone = (self.lone != NO_QUEUE).then_some(self.lone);
        if let Some(i) = lone {
            let v = self.ents[i].v;
            if rel(v, self.v0) > 0 {
                // `raise_v0(v)`: `S = (v - v0)·w` for the lone queue, so
                // `S - (v - v0)·W` is 0, without the product.
                self.v0 = v;
                self.sum = 0;
                debug_assert_eq!(self.weighted_sums(), (0, self.load));
            }
        }
        lone
    }

    /// The eligible runnable queue with the earliest deadline, ties to the
    /// lower index.
    pub(crate) fn earliest_eligible(&self) -> Option<usize> {
        // R3 for every queue from one pass of sums (linear in the number of
        // queues, not quadratic): `Σ_j (v_j - v_i)·w_j = S - (v_i - v0)·W`
        // with `S = Σ_j (v_j - v0)·w_j` and `W = Σ_j w_j`, exactly.
        let sums = self.weighted_sums();
        let mut best: Option<usize> = None;
        for i in self.runnable_queues() {
            let e = &self.ents[i];
            if !self.eligible_in(i, sums) {
                continue;
            }
            match best {
                Some(b) if rel(e.d, self.ents[b].d) >= 0 => {}
                _ => best = Some(i),
            }
        }
        best
    }

    /// `v0 = max(v0, min v_j)` over runnable queues: `v0` never decreases.
    fn advance_v0(&mut self) {
        let min = self
            .runnable_queues()
            .map(|i| self.ents[i].v)
            .min_by(|a, b| rel(*a, *b).cmp(&0));
        if let Some(m) = min {
            self.raise_v0(m);
        }
    }

    /// `v0 = max(v0, m)`, for `m` the least runnable vruntime.
    #[inline]
    fn raise_v0(&mut self, m: u64) {
        let up = rel(m, self.v0);
        if up > 0 {
            // Every runnable `v_j - v0` shrinks by `up`.
            self.sum -= up as i128 * self.load as i128;
            self.v0 = m;
        }
    }

    /// R6: queue `i` goes from empty to non-empty.
    pub(crate) fn place(&mut self, i: usize) {
        debug_assert!(!self.ents[i].runnable);
        // `i` is not runnable yet: the load of the sums is the others'.
        let (v_avg, others) = (self.avg_now(), self.weighted_sums().1);
        let e = &mut self.ents[i];
        let vslice = e.vslice();
        if others == 0 {
            e.v = v_avg;
            e.vlag = 0;
            e.d = e.v.wrapping_add(if e.fresh { vslice / 2 } else { vslice });
        } else if e.fresh {
            e.v = v_avg;
            e.d = e.v.wrapping_add(vslice / 2);
        } else {
            let mut vl = e.vlag;
            if vl < 0 {
                // Debt decays by the progress of V (of the others, as at
                // departure) while asleep; it never grows. (A negative
                // plus a non-negative `i64`: no overflow.)
                vl = (vl + rel(v_avg, e.v_saved).max(0)).min(0);
            }
            let w = e.weight as i64;
            // `vl·(W + w)/W`, in 64 bits when the product fits (the same
            // truncated quotient as in 128).
            let scaled = match vl.checked_mul(others + w) {
                Some(p) => div_trunc_i64(p, others).clamp(-(V_SPAN as i64), V_SPAN as i64),
                None => clamp_span(div_trunc_i128(
                    vl as i128 * (others + w) as i128,
                    others as i128,
                )),
            };
            e.v = v_avg.wrapping_sub(scaled as u64);
            e.d = e.v.wrapping_add(vslice);
        }
        e.fresh = false;
        e.runnable = true;
        let (v, w) = (e.v, e.weight as i64);
        self.mask[i / 64] |= 1 << (i % 64);
        self.runnable += 1;
        self.lone = if self.runnable == 1 { i } else { NO_QUEUE };
        self.sum += rel(v, self.v0) as i128 * w as i128;
        self.load += w;
    }

    /// R7: queue `i` ran out of runnable tasks at the end of its run.
    #[inline(always)]
    pub(crate) fn depart(&mut self, i: usize) {
        debug_assert!(self.ents[i].runnable);
        let (sum, load) = self.weighted_sums();
        let v_avg = self.avg_now();
        // The sums without `i`, for the V of the queues that stay (below).
        let (w, vi) = (self.ents[i].weight as i64, self.ents[i].v);
        let staying = (sum - rel(vi, self.v0) as i128 * w as i128, load - w);
        let e = &mut self.ents[i];
        let limit = e.lag_limit();
        // Credit is clamped; debt is kept whole and decays while asleep
        // (R6): clamping it would let a queue escape a long poll's debt by
        // sleeping (E6).
        e.vlag = rel(v_avg, e.v).min(limit);
        e.runnable = false;
        self.mask[i / 64] &= !(1 << (i % 64));
        self.runnable -= 1;
        self.lone = self.lone_by_mask();
        (self.sum, self.load) = staying;
        // The progress of V while asleep is measured on the V of the queues
        // that stay, the V `place` sees: V with `i` included would drop when
        // a debtor leaves and count that drop as more debt.
        self.ents[i].v_saved = self.avg_now();
        debug_assert_eq!(self.ents[i].v_saved, self.avg_of(staying));
    }

    /// R6 then R7 for a queue switch: queue `b` goes from empty to
    /// non-empty ([`place`](Self::place)) while `a`, the lone runnable
    /// queue, runs out of tasks ([`depart`](Self::depart)). The table
    /// ends exactly as after `place(b)` then `depart(a)`, in one pass.
    ///
    /// With `a` alone, V is `v_a`; `b` is placed at `v_b = v_a + δ`
    /// (`δ = 0` for a fresh queue, else `-vl·(w_a + w_b)/w_a`); the V
    /// that `a` leaves with is then
    /// `v0 + floor(((v_a - v0)·w_a + (v_a + δ - v0)·w_b) / (w_a + w_b))`
    /// `= v_a + floor(δ·w_b / (w_a + w_b))` (the multiple of `W` leaves
    /// the floor), so its lag is `floor(δ·w_b / W)`, and the V of the
    /// queues that stay, its `v_saved`, is `v_b`. Computed in 64 bits when
    /// `δ·w_b` and the sums fit (always, short of a jump of the clock);
    /// otherwise by `place` and `depart` themselves.
    #[inline(always)]
    pub(crate) fn switch_lone(&mut self, a: usize, b: usize) {
        debug_assert!(a != b && self.ents[a].runnable && !self.ents[b].runnable);
        debug_assert_eq!(self.runnable, 1);
        debug_assert!(self.is_lone(a));
        let v0 = self.v0;
        let (va, wa) = (self.ents[a].v, self.ents[a].weight as i64);
        let wb = self.ents[b].weight as i64;
        let Some((delta, dslice)) = self.lone_placement(va, wa, b) else {
            return self.switch_lone_wide(a, b);
        };
        let vb = va.wrapping_add(delta as u64);
        // `v_b - v0 = (v_a - v0) + δ` without a wrap, and the sums after
        // the switch (`b` alone, `(v_b - v0)·w_b`) and `δ·w_b` in 64 bits.
        let fits = rel(va, v0)
            .checked_add(delta)
            .and_then(|xb| xb.checked_mul(wb))
            .zip(delta.checked_mul(wb));
        let Some((sum_b, dw)) = fits else {
            return self.switch_lone_wide(a, b);
        };
        self.finish_lone_switch(a, b, vb, dslice, dw, (v0, sum_b));
    }

    /// The end of a queue switch from the lone runnable queue `a` to `b`
    /// ([`switch_lone`](Self::switch_lone),
    /// [`switch_lone_picked`](Self::switch_lone_picked)): `b` placed at
    /// `vb` with the deadline offset `dslice`, `a` departed with the lag
    /// `floor(δ·w_b / W)` (`dw = δ·w_b`, `W = w_a + w_b`) clamped as
    /// credit (R7) and `v_saved = vb`, and the sums of `b` alone: `v0`
    /// and `S` as `after` gives them, `W = w_b`.
    #[inline(always)]
    fn finish_lone_switch(
        &mut self,
        a: usize,
        b: usize,
        vb: u64,
        dslice: u64,
        dw: i64,
        after: (u64, i64),
    ) {
        let wb = self.ents[b].weight as i64;
        let w = self.ents[a].weight as i64 + wb;
        // `floor(δ·w_b / W)` (`W > 0`): one division, its remainder's sign
        // rounding the truncated quotient down; none for `δ = 0` (`b`
        // placed at V: fresh, or back without lag, as in a ping-pong
        // between two queues).
        let lag_a = if dw == 0 {
            0
        } else {
            dw / w - i64::from(dw % w < 0)
        };
        let limit = self.ents[a].lag_limit();
        let e = &mut self.ents[b];
        e.v = vb;
        e.d = vb.wrapping_add(dslice);
        e.fresh = false;
        e.runnable = true;
        let e = &mut self.ents[a];
        e.vlag = lag_a.min(limit);
        e.runnable = false;
        e.v_saved = vb;
        self.finish_lone_set(a, b, (after.0, after.1, wb));
    }

    /// Where `place(b)` puts queue `b` when queue `a`, at vruntime `va`
    /// and of weight `wa`, is the only other runnable one (so V = `va`):
    /// `δ = v_b - v_a` and `b`'s deadline offset. `None` when the lag's
    /// scaling `vlag·(w_a + w_b)` does not fit in 64 bits (the callers'
    /// wide path).
    #[inline(always)]
    fn lone_placement(&self, va: u64, wa: i64, b: usize) -> Option<(i64, u64)> {
        let e = &self.ents[b];
        let vslice = e.vslice();
        if e.fresh {
            return Some((0, vslice / 2));
        }
        let mut vl = e.vlag;
        if vl < 0 {
            vl = (vl + rel(va, e.v_saved).max(0)).min(0);
        }
        if vl == 0 {
            // Back without lag: at V, without the scaling.
            return Some((0, vslice));
        }
        let p = vl.checked_mul(wa + e.weight as i64)?;
        let scaled = div_trunc_i64(p, wa).clamp(-(V_SPAN as i64), V_SPAN as i64);
        Some((-scaled, vslice))
    }

    /// [`switch_lone`](Self::switch_lone) when a product does not fit in
    /// 64 bits: the two steps it fuses.
    #[cold]
    #[inline(never)]
    fn switch_lone_wide(&mut self, a: usize, b: usize) {
        self.place(b);
        self.depart(a);
    }

    /// R1 + R4, R6, R7 and R5 for a queue switch whose next run is
    /// certain: `a`, the lone runnable queue, is charged `charge_ns` of
    /// service (when a poll of its run is uncharged; [`charge`](Self::charge)),
    /// runs out of tasks and departs while `b` is placed
    /// ([`switch_lone`](Self::switch_lone)), and the pick finds `b` alone
    /// ([`pick_lone`](Self::pick_lone)). The table ends exactly as after
    /// those four steps, in one pass: the charge's update of the sums is
    /// left out (the switch writes them whole: `b` alone), and the pick's
    /// `v0 = max(v0, v_b)` is folded into them (with `v_b - v0 = x > 0`,
    /// `S = x·w_b` becomes `0` at `v0 = v_b`; otherwise `S = x·w_b` at the
    /// same `v0`). Only when the pick follows at once: a pick made later,
    /// after other placements, may see another `v0`.
    #[inline(always)]
    pub(crate) fn switch_lone_picked(&mut self, a: usize, charge_ns: Option<u64>, b: usize) {
        debug_assert!(a != b && self.ents[a].runnable && !self.ents[b].runnable);
        debug_assert_eq!(self.runnable, 1);
        debug_assert!(self.is_lone(a));
        let v0 = self.v0;
        // One slice for both entities: its length stays in a register
        // across their stores.
        let ents = &mut self.ents[..];
        let ea = &mut ents[a];
        if let Some(ns) = charge_ns {
            // R1 and R4 of `charge`, without its update of the sums.
            ea.v = ea.v.wrapping_add(ea.vdelta(ns));
            if rel(ea.v, ea.d) >= 0 {
                ea.d = ea.v.wrapping_add(ea.vslice());
            }
        }
        let va = ea.v;
        // `b` back without lag (as in a ping-pong between two queues):
        // placed at V (`v_b = v_a`, `δ = 0`) with a whole request, so `a`
        // departs with no lag (`floor(0·w_b / W) = 0`, within any clamp)
        // and `v_saved = v_b`; with `v_a` at or past `v0`, the pick's `v0`
        // is `v_b` and `S = 0` (at `v_a = v0` both forms agree).
        let eb = &mut ents[b];
        if !eb.fresh && eb.vlag == 0 && rel(va, v0) >= 0 {
            eb.v = va;
            eb.d = va.wrapping_add(eb.vslice());
            eb.runnable = true;
            let wb = eb.weight as i64;
            let ea = &mut ents[a];
            ea.vlag = 0;
            ea.runnable = false;
            ea.v_saved = va;
            return self.finish_lone_set(a, b, (va, 0, wb));
        }
        let wa = self.ents[a].weight as i64;
        let wb = self.ents[b].weight as i64;
        let Some((delta, dslice)) = self.lone_placement(va, wa, b) else {
            return self.switch_lone_picked_wide(a, b);
        };
        let vb = va.wrapping_add(delta as u64);
        // `x = v_b - v0` without a wrap, `δ·w_b`, and the sum at the
        // pick's `v0`, in 64 bits. `b` placed at V (`δ = 0`: fresh, or back
        // without lag, as in a ping-pong between two queues): `x = v_a -
        // v0` and `δ·w_b = 0`, without the checks.
        let (x, dw) = if delta == 0 {
            (rel(va, v0), 0)
        } else {
            let Some(x) = rel(va, v0).checked_add(delta) else {
                return self.switch_lone_picked_wide(a, b);
            };
            let Some(dw) = delta.checked_mul(wb) else {
                return self.switch_lone_picked_wide(a, b);
            };
            (x, dw)
        };
        let (v0_after, sum_after) = if x > 0 {
            (vb, 0)
        } else {
            let Some(s) = x.checked_mul(wb) else {
                return self.switch_lone_picked_wide(a, b);
            };
            (v0, s)
        };
        self.finish_lone_switch(a, b, vb, dslice, dw, (v0_after, sum_after));
    }

    /// The runnable set and the sums after a queue switch from the lone
    /// runnable queue `a` to `b`: `b` alone, and `v0`, `S` and `W` as
    /// `sums` gives them.
    #[inline(always)]
    fn finish_lone_set(&mut self, a: usize, b: usize, sums: (u64, i64, i64)) {
        // `a` was the lone runnable queue and `b` is: one bit in the set.
        // Up to 64 queues (most executors), one word, one store.
        if let [word] = &mut self.mask[..] {
            *word = 1 << (b % 64);
        } else {
            self.mask[a / 64] = 0;
            self.mask[b / 64] |= 1 << (b % 64);
        }
        self.lone = b;
        (self.v0, self.sum, self.load) = (sums.0, sums.1 as i128, sums.2);
        debug_assert_eq!(
            (self.sum, self.load),
            self.recompute_sums(),
            "tourbillon bug: EEVDF sums out of date"
        );
    }

    /// [`switch_lone_picked`](Self::switch_lone_picked) when a product
    /// does not fit in 64 bits: after the charge (whose update of the sums
    /// was left out: recomputed here), the steps it fuses.
    #[cold]
    #[inline(never)]
    fn switch_lone_picked_wide(&mut self, a: usize, b: usize) {
        (self.sum, self.load) = self.recompute_sums();
        self.place(b);
        self.depart(a);
        let _ = self.pick_lone();
    }

    /// R10: changes the weight of `i`, keeping its lag and relative deadline.
    pub(crate) fn set_weight(&mut self, i: usize, weight: u64) {
        debug_assert!(weight > 0 && weight <= u32::MAX as u64);
        let v_avg = self.avg_vruntime();
        let v0 = self.v0;
        let e = &mut self.ents[i];
        let (w, w2) = (e.weight as i128, weight as i128);
        if e.runnable {
            let vl = rel(v_avg, e.v) as i128;
            let rd = rel(e.d, e.v) as i128;
            let old = rel(e.v, v0) as i128 * w;
            e.v = v_avg.wrapping_sub(clamp_span(div_trunc_i128(vl * w, w2)) as u64);
            e.d =
                e.v.wrapping_add(clamp_span(div_trunc_i128(rd * w, w2)) as u64);
            self.sum += rel(e.v, v0) as i128 * w2 - old;
            self.load += (w2 - w) as i64;
        } else {
            e.vlag = clamp_span(div_trunc_i128(e.vlag as i128 * w, w2));
        }
        e.weight = weight;
        e.vreq = Entity::vslice_of(weight, e.request_ns);
        e.wshift = weight_shift(weight);
    }

    /// Would `j` be picked over the running queue `cur` now, ignoring the
    /// slice protection of RUN_TO_PARITY (R9)? `j` must be eligible and have
    /// an earlier deadline than `cur`, or `cur` must not be eligible.
    pub(crate) fn would_preempt(&self, cur: usize, j: usize) -> bool {
        if !self.ents[j].runnable {
            return false;
        }
        let sums = self.weighted_sums();
        if !self.eligible_in(j, sums) {
            return false;
        }
        if !self.ents[cur].runnable || !self.eligible_in(cur, sums) {
            return true;
        }
        let dj = self.ents[j].d;
        let dc = self.ents[cur].d;
        rel(dj, dc) < 0 || (dj == dc && j < cur)
    }

    /// The lag of `i` in real ns: `w_i·(V - v_i)/K` when runnable, the saved
    /// lag otherwise.
    pub(crate) fn lag_ns(&self, i: usize) -> i64 {
        let e = &self.ents[i];
        if e.runnable {
            real_ns(rel(self.avg_vruntime(), e.v), e.weight)
        } else {
            real_ns(e.vlag, e.weight)
        }
    }

    /// Real ns left of `i`'s current request (`(d - v)·w/K`, at least 0).
    pub(crate) fn slice_left_ns(&self, i: usize) -> u64 {
        let e = &self.ents[i];
        real_ns(rel(e.d, e.v), e.weight).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`vdelta_by`] at weight `weight`.
    fn vdelta(delta_ns: u64, weight: u64) -> u64 {
        vdelta_by(delta_ns, weight, weight_shift(weight))
    }

    fn table(ws: &[u64]) -> Eevdf {
        Eevdf::new(ws.iter().map(|&w| Entity::new(w, 1_000_000)).collect())
    }

    /// The shift of `div_trunc_i64` for a power-of-two divisor rounds
    /// toward zero as `/` does, negatives and the edges of `i64` included.
    #[test]
    fn power_of_two_division_truncates() {
        let nums = [
            0,
            1,
            -1,
            2,
            -2,
            3,
            -3,
            7,
            -7,
            1023,
            -1025,
            i64::MAX,
            i64::MIN,
            i64::MIN + 1,
        ];
        let divs = [1, 2, 3, 4, 6, 1024, 1 << 40, i64::MAX, 1 << 62];
        for &a in &nums {
            for &b in &divs {
                assert_eq!(div_trunc_i64(a, b), a / b, "{a} / {b}");
            }
        }
    }

    /// The 64-bit paths of the divisions give the 128-bit results, at the
    /// edges of the 64-bit range too.
    #[test]
    fn narrow_divisions_agree_with_128_bit() {
        let nums: Vec<i128> = vec![
            0,
            1,
            -1,
            7,
            -7,
            1023,
            -1025,
            i64::MAX as i128,
            i64::MIN as i128,
            i64::MAX as i128 + 1,
            i64::MIN as i128 - 1,
            u64::MAX as i128,
            u64::MAX as i128 + 1,
            i128::MAX / 3,
            i128::MIN / 3,
        ];
        let divs: Vec<i128> = vec![1, 2, 3, 1024, 7919, i64::MAX as i128, i64::MAX as i128 + 5];
        for &a in &nums {
            for &b in &divs {
                if let Ok(b64) = i64::try_from(b) {
                    assert_eq!(div_floor_by(a, b64), a.div_euclid(b), "floor {a} / {b}");
                }
                assert_eq!(div_trunc_i128(a, b), a / b, "trunc {a} / {b}");
                if a >= 0 && b <= u64::MAX as i128 {
                    let (ua, ub) = (a as u128, b as u64);
                    assert_eq!(div_u128(ua, ub), ua / ub as u128, "{a} / {b}");
                    assert_eq!(
                        div_ceil_u128(ua, ub),
                        ua.div_ceil(ub as u128),
                        "ceil {a} / {b}"
                    );
                }
            }
        }
    }

    /// The shift of a power-of-two weight, and the 64-bit quotient of a
    /// service below `2^52` ns, give the rounded-up quotient of the 128-bit
    /// division, at the edges of the range and of the 64-bit path too.
    #[test]
    fn vdelta_shift_agrees_with_division() {
        let deltas = [
            0,
            1,
            2,
            1023,
            1024,
            1025,
            999_999,
            (1 << 52) - 1,
            1 << 52,
            (1 << 53) - 1,
            1 << 53,
            u64::MAX / 1024,
            u64::MAX,
        ];
        let odd = [3, 7, 10_000, u32::MAX as u64];
        for w in (0..32).map(|k| 1u64 << k).chain(odd) {
            for &d in &deltas {
                let div = div_ceil_u128(d as u128 * K as u128, w).min(V_SPAN as u128) as u64;
                assert_eq!(vdelta(d, w), div, "{d} at weight {w}");
            }
        }
    }

    /// V of a lone runnable queue is its vruntime, as the weighted average
    /// gives it, wrapping vruntimes included.
    #[test]
    fn lone_queue_average_is_its_vruntime() {
        for (w, v0, v) in [(1, 0, 5), (7, u64::MAX - 3, 10), (9_999, 100, 100)] {
            let mut t = table(&[3, w]);
            t.v0 = v0;
            t.place(1);
            t.ents[1].v = v;
            t.resync();
            assert_eq!(t.avg_vruntime(), v);
            assert_eq!(t.avg_vruntime(), t.avg_of(t.weighted_sums()));
        }
    }

    #[test]
    fn vdelta_rounds_up() {
        assert_eq!(vdelta(1, 1024), 1);
        assert_eq!(vdelta(1, 3), 342); // ceil(1024/3)
        assert_eq!(vdelta(3, 1024), 3);
        assert_eq!(vdelta(0, 7), 0);
    }

    #[test]
    fn avg_is_weighted_and_floored() {
        let mut t = table(&[1, 3]);
        t.place(0);
        t.place(1);
        t.ents[0].v = 10;
        t.ents[1].v = 0;
        t.resync();
        // (10*1 + 0*3)/4 = 2.5 -> 2
        assert_eq!(t.avg_vruntime(), 2);
        assert!(!t.eligible(0));
        assert!(t.eligible(1));
    }

    #[test]
    fn floor_goes_toward_minus_infinity() {
        let mut t = table(&[1, 1]);
        t.v0 = 100;
        t.place(0);
        t.place(1);
        t.ents[0].v = 99;
        t.ents[1].v = 100;
        t.resync();
        // (-1 + 0)/2 = -0.5 -> -1
        assert_eq!(t.avg_vruntime(), 99);
    }

    #[test]
    fn lags_sum_to_zero_within_rounding() {
        let mut t = table(&[1, 2, 3, 4, 5]);
        for i in 0..5 {
            t.place(i);
        }
        for (i, e) in t.ents.iter_mut().enumerate() {
            e.v = 1000 + 37 * i as u64 * i as u64;
        }
        t.resync();
        let v = t.avg_vruntime();
        let s: i128 = t
            .ents
            .iter()
            .map(|e| e.weight as i128 * rel(v, e.v) as i128)
            .sum();
        let w: i128 = t.ents.iter().map(|e| e.weight as i128).sum();
        assert!(s <= 0 && s > -w, "sum {s}");
    }

    /// The one-pass eligibility test of `earliest_eligible` (and of
    /// `eligible`) agrees with R3 computed pair by pair on random tables,
    /// wrapping vruntimes included.
    #[test]
    fn earliest_eligible_agrees_with_pairwise_r3() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2_000 {
            let n = 1 + (next() % 12) as usize;
            let base = next();
            let ents: Vec<Entity> = (0..n)
                .map(|_| {
                    let mut e = Entity::new(1 + next() % 10_000, 750_000);
                    e.v = base.wrapping_add(next() % 1_000_000_000);
                    e.d = e.v.wrapping_add(next() % 10_000_000);
                    e.runnable = next() % 4 != 0;
                    e
                })
                .collect();
            let mut t = Eevdf::new(ents);
            t.v0 = base;
            t.resync();
            // R3 by its definition: `Σ_j (v_j - v_i)·w_j >= 0`.
            let r3 = |i: usize| {
                let vi = t.ents[i].v;
                let s: i128 = t
                    .ents
                    .iter()
                    .filter(|e| e.runnable)
                    .map(|e| rel(e.v, vi) as i128 * e.weight as i128)
                    .sum();
                s >= 0
            };
            for i in (0..n).filter(|&i| t.ents[i].runnable) {
                assert_eq!(t.eligible(i), r3(i));
            }
            let brute = (0..n)
                .filter(|&i| t.ents[i].runnable && r3(i))
                .min_by(|&a, &b| rel(t.ents[a].d, t.ents[b].d).cmp(&0).then(a.cmp(&b)));
            assert_eq!(t.earliest_eligible(), brute);
        }
    }

    #[test]
    fn pick_prefers_earliest_eligible_deadline() {
        let mut t = table(&[1, 1, 1]);
        for i in 0..3 {
            t.place(i);
        }
        // All at V with half-slice deadlines: tie -> lowest index.
        assert_eq!(t.pick(None, false), Some(0));
        // Queue 0 runs a whole request: it becomes ineligible.
        assert!(t.charge(0, 1_000_000));
        assert_eq!(t.pick(Some(0), false), Some(1));
    }

    #[test]
    fn run_to_parity_keeps_current_within_its_request() {
        let mut t = table(&[1, 1]);
        t.place(0);
        t.place(1);
        t.ents[0].d = 1_000_000_000;
        t.ents[1].d = 10;
        // 0 is eligible (both at V) and has request left: it continues.
        assert_eq!(t.pick(Some(0), false), Some(0));
        // Without RUN_TO_PARITY the earlier deadline wins.
        assert_eq!(t.pick(None, false), Some(1));
    }

    #[test]
    fn single_queue_fast_path_equals_general_rule() {
        let mut a = table(&[5, 7]);
        let mut b = a.clone();
        a.place(1);
        b.place(1);
        for _ in 0..10 {
            let pa = a.pick(Some(1), false);
            let pb = b.pick(Some(1), true);
            assert_eq!(pa, pb);
            let _ = a.charge(1, 123_456);
            let _ = b.charge(1, 123_456);
        }
    }

    /// Every field of two tables, the sums and the runnable set included.
    fn same_table(x: &Eevdf, y: &Eevdf) -> bool {
        x.ents == y.ents
            && (x.v0, x.runnable, x.sum, x.load, &x.mask, x.lone)
                == (y.v0, y.runnable, y.sum, y.load, &y.mask, y.lone)
    }

    /// A fixed pseudo-random walk (xorshift) over `0..n` for each call
    /// `next(n)`: deterministic, and wide enough to meet every edge of
    /// [`switch_case`] with every other.
    fn xorshift(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |n| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        }
    }

    /// A table of 2 to 4 queues for the fused switch tests, drawn with
    /// `next`: queue `a` runs alone at vruntime `va`, queue `b` (fresh or
    /// returning, with credit or debt) is to be placed. Weights from 1 to
    /// `u32::MAX`, vruntimes around the wrap of `u64`, lags and requests
    /// at the edges of `V_SPAN`, where the 64-bit products overflow and
    /// the wide path takes over. Returns `(table, a, b, va)`.
    fn switch_case(next: &mut impl FnMut(usize) -> usize) -> (Eevdf, usize, usize, u64) {
        let weights = [1, 2, 3, 7, 1024, 10_000, u32::MAX as u64];
        let requests = [1, 1_000_000, 3_000_000_000, u64::MAX];
        let vs = [
            0,
            1,
            12_345,
            u64::MAX,
            u64::MAX - 5_000,
            1 << 63,
            V_SPAN,
            3 * V_SPAN,
        ];
        let lags = [
            0,
            1,
            -1,
            -7_777,
            999_999,
            V_SPAN as i64,
            -(V_SPAN as i64),
            i64::MIN / 2,
            i64::MAX / 2,
        ];
        let offsets = [0u64, 1, 5_000, u64::MAX - 9, V_SPAN];
        let n = 2 + next(3);
        let ents = (0..n)
            .map(|_| Entity::new(weights[next(7)], requests[next(4)]))
            .collect();
        let mut t = Eevdf::new(ents);
        let a = next(n);
        let b = (a + 1 + next(n - 1)) % n;
        let va = vs[next(vs.len())];
        t.ents[a].v = va;
        t.ents[a].d = va.wrapping_add(offsets[next(offsets.len())]);
        t.ents[a].fresh = false;
        t.ents[a].runnable = true;
        t.v0 = va.wrapping_sub(offsets[next(offsets.len())]);
        let e = &mut t.ents[b];
        e.fresh = next(3) == 0;
        e.vlag = lags[next(lags.len())];
        e.v_saved = va.wrapping_sub(offsets[next(offsets.len())]);
        e.v = vs[next(vs.len())];
        e.d = e.v;
        t.resync();
        (t, a, b, va)
    }

    /// `switch_lone(a, b)` leaves the table exactly as `place(b)` then
    /// `depart(a)`, over the edges of [`switch_case`] (credit and debt,
    /// decayed or not).
    #[test]
    fn switch_lone_equals_place_then_depart() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut wide, mut narrow) = (0, 0);
        for _ in 0..200_000 {
            let (t, a, b, va) = switch_case(&mut next);
            let mut fused = t.clone();
            fused.switch_lone(a, b);
            let mut steps = t.clone();
            steps.place(b);
            steps.depart(a);
            assert!(
                same_table(&fused, &steps),
                "switch_lone({a}, {b}) on {t:?}:\n{fused:?}\n!=\n{steps:?}"
            );
            // Which path it took: the 64-bit one unless a product or the
            // offset of `b` from `v0` overflows.
            let delta = rel(steps.ents[b].v, va);
            let wb = steps.ents[b].weight as i64;
            let fits = rel(va, t.v0)
                .checked_add(delta)
                .and_then(|x| x.checked_mul(wb));
            if fits.is_some() && delta.checked_mul(wb).is_some() {
                narrow += 1;
            } else {
                wide += 1;
            }
        }
        // Both paths are covered.
        assert!(
            narrow > 10_000 && wide > 10_000,
            "{narrow} narrow, {wide} wide"
        );
    }

    /// `switch_lone_picked(a, ns, b)` leaves the table exactly as
    /// `charge(a, ns)` (when given), `place(b)`, `depart(a)` and the pick,
    /// over the same edges as `switch_lone_equals_place_then_depart`, with
    /// charges from nothing to the clock's whole range.
    #[test]
    fn switch_lone_picked_equals_charge_place_depart_pick() {
        let charges = [None, Some(0), Some(1), Some(40_000), Some(u64::MAX)];
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let (mut raised, mut kept, mut wide, mut lag_free) = (0, 0, 0, 0);
        for _ in 0..200_000 {
            let (t, a, b, _) = switch_case(&mut next);
            let ns = charges[next(charges.len())];
            let mut fused = t.clone();
            fused.switch_lone_picked(a, ns, b);
            let mut steps = t.clone();
            if let Some(ns) = ns {
                let _ = steps.charge(a, ns);
            }
            steps.place(b);
            steps.depart(a);
            assert_eq!(steps.pick(None, false), Some(b));
            assert!(
                same_table(&fused, &steps),
                "switch_lone_picked({a}, {ns:?}, {b}) on {t:?}:\n{fused:?}\n!=\n{steps:?}"
            );
            // Which path it took, as `switch_lone_equals_place_then_depart`
            // tells them apart.
            let mut charged = t.clone();
            if let Some(ns) = ns {
                let _ = charged.charge(a, ns);
            }
            let va = charged.ents[a].v;
            // The stores-only path: `b` back without lag, `v_a` at or
            // past `v0`.
            if !t.ents[b].fresh && t.ents[b].vlag == 0 && rel(va, t.v0) >= 0 {
                lag_free += 1;
            }
            let delta = rel(steps.ents[b].v, va);
            let wb = steps.ents[b].weight as i64;
            let x = rel(va, t.v0).checked_add(delta);
            let fits = x.and_then(|x| if x > 0 { Some(0) } else { x.checked_mul(wb) });
            if fits.is_none() || delta.checked_mul(wb).is_none() {
                wide += 1;
            } else if steps.v0 != t.v0 {
                raised += 1;
            } else {
                kept += 1;
            }
        }
        // Every path is covered: the pick raising `v0`, keeping it, the
        // wide fallback, and a return without lag.
        assert!(
            raised > 10_000 && kept > 10_000 && wide > 10_000 && lag_free > 10_000,
            "{raised} raised, {kept} kept, {wide} wide, {lag_free} without lag"
        );
    }

    #[test]
    fn placement_keeps_lag() {
        let mut t = table(&[1, 1]);
        t.place(0);
        t.place(1);
        // Queue 1 runs ahead of queue 0 by 1 ms real.
        let _ = t.charge(1, 1_000_000);
        let lag_before = t.lag_ns(0);
        assert!(lag_before > 0);
        // Queue 0 leaves with its credit (clamped to 2 requests) ...
        t.depart(0);
        let saved = t.ents[0].vlag;
        assert!(saved > 0);
        // ... and comes back with the same lag.
        t.place(0);
        assert_eq!(t.lag_ns(0), lag_before);
    }

    #[test]
    fn credit_is_clamped_to_two_requests() {
        let mut t = table(&[1, 1]);
        t.place(0);
        t.place(1);
        let _ = t.charge(1, 50_000_000);
        t.depart(0);
        assert_eq!(t.ents[0].vlag, 2 * t.ents[0].vslice() as i64);
    }

    #[test]
    fn debt_decays_while_others_run_but_never_turns_to_credit() {
        let mut t = table(&[1, 1]);
        t.place(0);
        t.place(1);
        let _ = t.charge(0, 1_000_000);
        t.depart(0);
        let debt = t.ents[0].vlag;
        assert!(debt < 0);
        // The other queue runs a little: part of the debt is forgiven.
        let _ = t.charge(1, 200_000);
        t.place(0);
        let lag = t.lag_ns(0);
        assert!(lag < 0 && lag > real_ns(debt, 1), "lag {lag}");
        t.depart(0);
        // It runs for long: the debt is gone, but no credit appears.
        let _ = t.charge(1, 100_000_000);
        t.place(0);
        assert_eq!(t.ents[0].v, t.avg_vruntime());
    }

    #[test]
    fn debt_is_not_clamped_nor_grown_by_leaving() {
        let mut t = table(&[1, 1]);
        t.place(0);
        t.place(1);
        // A 50 ms poll: 25 ms of debt, far beyond 2 requests (2 ms).
        let _ = t.charge(0, 50_000_000);
        let debt = t.lag_ns(0);
        assert_eq!(debt, -25_000_000);
        t.depart(0);
        assert_eq!(real_ns(t.ents[0].vlag, 1), debt);
        // It wakes before anyone ran: the same debt, not more.
        t.place(0);
        assert_eq!(t.lag_ns(0), debt);
    }

    #[test]
    fn fresh_queue_gets_half_a_request() {
        let mut t = table(&[1, 1]);
        t.place(0);
        t.place(1);
        assert_eq!(rel(t.ents[1].d, t.ents[1].v) as u64, t.ents[1].vslice() / 2);
    }

    #[test]
    fn wrapping_vruntimes_compare_correctly() {
        let mut t = table(&[1, 1]);
        t.v0 = u64::MAX - 10;
        t.place(0);
        t.place(1);
        assert_eq!(t.ents[0].v, u64::MAX - 10);
        let _ = t.charge(0, 1); // wraps past zero
        assert!(t.ents[0].v < 10_000);
        assert!(!t.eligible(0));
        assert!(t.eligible(1));
        assert_eq!(t.pick(None, false), Some(1));
    }

    #[test]
    fn reweight_keeps_lag() {
        let mut t = table(&[2, 2]);
        t.place(0);
        t.place(1);
        let _ = t.charge(1, 1_000_000);
        let lag = t.lag_ns(0);
        t.set_weight(0, 8);
        // Lag in real ns is preserved up to rounding of the new average.
        assert!((t.lag_ns(0) - lag).abs() <= 2, "{} vs {lag}", t.lag_ns(0));
    }

    /// R11: a charge of the clock's whole range, then reweighting and
    /// placement with that debt, clamp their virtual offsets instead of
    /// wrapping them: the debtor stays ahead of `V` with a negative lag
    /// (saturated in real ns), the others behind it with a credit.
    #[test]
    fn huge_charges_saturate_and_keep_their_sign() {
        let mut t = table(&[10_000, 10_000, 10_000]);
        for i in 0..3 {
            t.place(i);
        }
        let _ = t.charge(0, u64::MAX);
        assert_eq!(t.ents[0].v, vdelta(u64::MAX, 10_000));
        // `10000·(V - v_0)/K`, about -1.2e19: beyond i64.
        assert_eq!(t.lag_ns(0), i64::MIN);
        assert!(t.lag_ns(1) > 0 && t.lag_ns(2) > 0);
        for w in [1, 2, 3, 7, 9_999] {
            let mut u = t.clone();
            u.set_weight(0, w);
            let ahead = rel(u.ents[0].v, u.avg_vruntime());
            assert!(ahead > 0, "w {w}: {ahead}");
            assert!(rel(u.ents[0].d, u.ents[0].v) > 0, "w {w}");
            assert!(u.lag_ns(0) < 0 && u.lag_ns(1) > 0, "w {w}");
            // And back: still a debt.
            u.set_weight(0, 10_000);
            assert!(u.lag_ns(0) < 0, "w {w}");
        }
        // It leaves with its debt and comes back among light queues: the
        // debt scaled by `(W + w)/W` (5001) is clamped, not wrapped.
        t.depart(0);
        assert!(t.ents[0].vlag < 0);
        t.set_weight(1, 1);
        t.set_weight(2, 1);
        t.place(0);
        assert_eq!(t.ents[0].v, t.ents[0].v_saved.wrapping_add(V_SPAN));
        assert!(rel(t.ents[0].v, t.ents[1].v) > 0);
        assert!(rel(t.ents[0].v, t.avg_vruntime()) > 0);
        assert!(t.lag_ns(0) < 0);
        assert!(!t.eligible(0) && t.eligible(1) && t.eligible(2));
        // A reweighted sleeper's saved lag is clamped alike.
        t.depart(0);
        t.set_weight(0, 1);
        assert_eq!(t.ents[0].vlag, -(V_SPAN as i64));
        assert!(t.lag_ns(0) < 0);
    }

    #[test]
    fn preemption_needs_eligibility_and_earlier_deadline() {
        let mut t = table(&[1, 1]);
        t.place(0);
        t.place(1);
        t.ents[0].d = 1_000;
        t.ents[1].d = 10;
        assert!(t.would_preempt(0, 1));
        assert!(!t.would_preempt(1, 0));
        t.ents[1].v = 100; // no longer eligible
        t.resync();
        assert!(!t.would_preempt(0, 1));
    }
}
