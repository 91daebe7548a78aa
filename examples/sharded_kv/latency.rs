//! A latency histogram for the load client: fixed memory whatever the
//! number of requests, and many requests with the same latency (the
//! answers of one read to one write) recorded at once.
//!
//! Log-linear buckets: values below 32 ns exactly, then 32 buckets per
//! power of two (each at most 1/32 of its value wide, about 3%). A
//! percentile is reported as the middle of its bucket.

/// Sub-buckets per power of two, as a bit count.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Buckets for every `u64` of nanoseconds.
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

/// Counts of latencies, in nanoseconds.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    max_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            max_ns: 0,
        }
    }
}

impl Histogram {
    fn index(ns: u64) -> usize {
        if ns < SUB as u64 {
            return ns as usize;
        }
        let exp = 63 - ns.leading_zeros();
        let mantissa = (ns >> (exp - SUB_BITS)) as usize & (SUB - 1);
        SUB + (exp - SUB_BITS) as usize * SUB + mantissa
    }

    /// The middle of bucket `i`, ns.
    fn middle(i: usize) -> u64 {
        if i < SUB {
            return i as u64;
        }
        let exp = ((i - SUB) / SUB) as u32 + SUB_BITS;
        let mantissa = ((i - SUB) % SUB) as u64;
        let width = 1u64 << (exp - SUB_BITS);
        (SUB as u64 + mantissa) * width + width / 2
    }

    /// Records `n` latencies of `ns` nanoseconds.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        self.counts[Self::index(ns)] += n;
        self.count += n;
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// The `q`-quantile (`q` in 0..=1), ns; 0 if nothing was recorded.
    pub fn percentile_ns(&self, q: f64) -> u64 {
        let rank = ((self.count as f64 * q).ceil() as u64).clamp(1, self.count.max(1));
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank && c > 0 {
                return Self::middle(i).min(self.max_ns);
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        assert_eq!(Histogram::index(0), 0);
        assert_eq!(Histogram::index(31), 31);
        assert_eq!(Histogram::index(32), 32);
        assert_eq!(Histogram::index(u64::MAX), BUCKETS - 1);
        let mut values: Vec<u64> = (0..40)
            .flat_map(|e| [(1u64 << e) - 1, 1 << e, (1 << e) + 1])
            .collect();
        values.sort_unstable();
        let mut last = 0;
        for ns in values {
            let i = Histogram::index(ns);
            assert!(i >= last);
            last = i;
            // The middle of a value's bucket is within 1/32 of it.
            let mid = Histogram::middle(i);
            assert!(mid.abs_diff(ns) <= ns / 32 + 1, "{ns} -> {mid}");
        }
    }

    #[test]
    fn percentiles_count_batches() {
        let mut a = Histogram::default();
        a.record_n(1_000, 98);
        let mut b = Histogram::default();
        b.record_n(50_000, 2);
        a.merge(&b);
        // 1,000 ns is the middle of its bucket (992..1,008); 50,000 ns is
        // in 49,152..50,176, reported as 49,664.
        assert_eq!(a.percentile_ns(0.5), 1_000);
        assert_eq!(a.percentile_ns(0.98), 1_000);
        assert_eq!(a.percentile_ns(0.99), 49_664);
        assert_eq!(a.max_ns(), 50_000);
        assert_eq!(Histogram::default().percentile_ns(0.99), 0);
    }
}
