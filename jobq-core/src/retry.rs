//! When a failed job runs again.
//!
//! # The default schedule
//!
//! [`RetryPolicy::DEFAULT`] is exponential with a cap and downward jitter:
//!
//! ```text
//! base(n)  = min(cap, 1s × 2^(n−1))          n = the attempt that just failed (1, 2, …)
//! delay(n) = base(n) × (1 − 0.25 × u)        u uniform in [0, 1)
//! ```
//!
//! so the delay after attempt `n` lies in `(0.75 × base(n), base(n)]`. Because
//! the jitter (at most ½) only shortens a delay, the jittered schedule is
//! non-decreasing until it reaches the cap and never exceeds the cap.
//! With the default `max_attempts` of 20 the un-jittered schedule is:
//!
//! | after attempt | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 12 | 13–19 |
//! |---|---|---|---|---|---|---|---|---|---|---|---|---|---|
//! | delay | 1s | 2s | 4s | 8s | 16s | 32s | 64s | 128s | 256s | 512s | 1024s | 2048s | 1h (cap) |
//!
//! about 9 hours from the first failure to the last attempt. Attempt 20 failing marks the job `failed`.

use std::borrow::Cow;
use std::time::Duration;

/// How long to wait before the next attempt of a failed job.
///
/// ```
/// use std::time::Duration;
/// use jobq_core::RetryPolicy;
///
/// let p = RetryPolicy::exponential(Duration::from_secs(1), Duration::from_secs(60));
/// assert_eq!(p.base_delay(1), Duration::from_secs(1));
/// assert_eq!(p.base_delay(4), Duration::from_secs(8));
/// assert_eq!(p.base_delay(30), Duration::from_secs(60));
///
/// const DELAYS: &[Duration] = &[Duration::from_secs(1), Duration::from_secs(30)];
/// let p = RetryPolicy::schedule(DELAYS);
/// assert_eq!(p.delay(1), Duration::from_secs(1));
/// assert_eq!(p.delay(5), Duration::from_secs(30)); // the last entry repeats
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RetryPolicy {
    /// `min(max, base × 2^(n−1)) × (1 − jitter × u)`, `u` uniform in `[0, 1)`.
    Exponential {
        /// Delay after the first failed attempt.
        base: Duration,
        /// The cap.
        max: Duration,
        /// Fraction (0 to 0.5) by which a delay may be shortened at random.
        jitter: f64,
    },
    /// The same delay after every attempt.
    Fixed(Duration),
    /// `min(max, step × n)`.
    Linear {
        /// Added per attempt.
        step: Duration,
        /// The cap.
        max: Duration,
    },
    /// An explicit list: entry `n−1` after attempt `n`, the last entry repeating.
    Schedule(Cow<'static, [Duration]>),
}

impl RetryPolicy {
    /// The default: exponential from 1 s, doubling, capped at 1 hour, 25 % downward jitter.
    pub const DEFAULT: Self = Self::Exponential {
        base: Duration::from_secs(1),
        max: Duration::from_secs(3600),
        jitter: 0.25,
    };

    /// Exponential backoff from `base`, doubling per attempt, capped at `max`, with the default 25 % jitter.
    pub const fn exponential(base: Duration, max: Duration) -> Self {
        Self::Exponential {
            base,
            max,
            jitter: 0.25,
        }
    }

    /// The same delay after every attempt.
    pub const fn fixed(delay: Duration) -> Self {
        Self::Fixed(delay)
    }

    /// `step × n`, capped at `max`.
    pub const fn linear(step: Duration, max: Duration) -> Self {
        Self::Linear { step, max }
    }

    /// An explicit list of delays; the last one repeats. An empty list means "retry at once".
    pub const fn schedule(delays: &'static [Duration]) -> Self {
        Self::Schedule(Cow::Borrowed(delays))
    }

    /// The delay after failed attempt `attempt` (1-based) before jitter.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let n = attempt.max(1);
        match self {
            Self::Exponential { base, max, .. } => {
                let factor = 1u32.checked_shl(n - 1).unwrap_or(u32::MAX);
                base.checked_mul(factor).map_or(*max, |d| d.min(*max))
            }
            Self::Fixed(delay) => *delay,
            Self::Linear { step, max } => step.checked_mul(n).map_or(*max, |d| d.min(*max)),
            Self::Schedule(delays) => {
                let index = usize::try_from(n - 1).unwrap_or(usize::MAX);
                delays
                    .get(index)
                    .or(delays.last())
                    .copied()
                    .unwrap_or(Duration::ZERO)
            }
        }
    }

    /// The delay after failed attempt `attempt`, with jitter drawn at random.
    pub fn delay(&self, attempt: u32) -> Duration {
        self.delay_with(attempt, rand::random::<f64>())
    }

    /// The delay after failed attempt `attempt` for a given jitter draw `u` in `[0, 1)`.
    pub fn delay_with(&self, attempt: u32, u: f64) -> Duration {
        let base = self.base_delay(attempt);
        match self {
            Self::Exponential { jitter, .. } => {
                let jitter = jitter.clamp(0.0, 0.5);
                base.mul_f64(1.0 - jitter * u.clamp(0.0, 1.0))
            }
            _ => base,
        }
    }

    /// The un-jittered delays after attempts `1..attempts`: what a job with
    /// `max_attempts = attempts` waits between its attempts.
    pub fn plan(&self, attempts: u32) -> Vec<Duration> {
        (1..attempts).map(|n| self.base_delay(n)).collect()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_default_schedule_is_the_documented_table() {
        let secs: Vec<u64> = RetryPolicy::DEFAULT
            .plan(20)
            .iter()
            .map(Duration::as_secs)
            .collect();
        assert_eq!(
            secs,
            [
                1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3600, 3600, 3600, 3600, 3600,
                3600, 3600
            ]
        );
    }

    #[test]
    fn linear_fixed_and_schedule_follow_their_formulas() {
        let l = RetryPolicy::linear(Duration::from_secs(10), Duration::from_secs(25));
        assert_eq!(l.plan(5), [10, 20, 25, 25].map(Duration::from_secs));
        let f = RetryPolicy::fixed(Duration::from_millis(5));
        assert_eq!(f.delay(7), Duration::from_millis(5));
        let s = RetryPolicy::schedule(&[]);
        assert_eq!(s.delay(3), Duration::ZERO);
    }

    proptest! {
        #[test]
        fn exponential_delays_are_non_decreasing_up_to_the_cap_and_within_jitter(
            base_ms in 1u64..10_000,
            cap_ms in 1u64..10_000_000,
            attempt in 1u32..200,
            u1 in 0.0f64..1.0,
            u2 in 0.0f64..1.0,
        ) {
            let base = Duration::from_millis(base_ms);
            let cap = Duration::from_millis(cap_ms).max(base);
            let p = RetryPolicy::exponential(base, cap);
            let d = p.delay_with(attempt, u1);
            let b = p.base_delay(attempt);
            // within the jitter bounds, never above the cap
            prop_assert!(d <= b && b <= cap);
            prop_assert!(d >= b.mul_f64(0.75));
            // formula
            let expected = base.saturating_mul(1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX)).min(cap);
            prop_assert_eq!(b, expected);
            // non-decreasing while the next base delay is below the cap
            let next_base = p.base_delay(attempt + 1);
            if next_base < cap {
                prop_assert!(p.delay_with(attempt + 1, u2) >= d);
            }
            prop_assert!(next_base >= b);
        }
    }
}
