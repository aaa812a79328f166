//! Injected time and randomness: nothing in the engine reads the system clock or an
//! OS random source directly, so tests control both.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of "now" in microseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The current time in microseconds since the Unix epoch.
    fn now_us(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to: for tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_us: AtomicI64,
}

impl ManualClock {
    /// A clock standing at `now_us`.
    pub fn new(now_us: i64) -> Self {
        Self {
            now_us: AtomicI64::new(now_us),
        }
    }
    /// Moves the clock to `now_us`.
    pub fn set(&self, now_us: i64) {
        self.now_us.store(now_us, Ordering::SeqCst);
    }
    /// Moves the clock forward by `delta_us`.
    pub fn advance(&self, delta_us: i64) {
        self.now_us.fetch_add(delta_us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> i64 {
        self.now_us.load(Ordering::SeqCst)
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now_us(&self) -> i64 {
        (**self).now_us()
    }
}

/// A seeded pseudo-random source (SplitMix64): `row_sample` draws from it, so a
/// test with a fixed seed sees the same sample every run.
#[derive(Debug)]
pub struct Rng {
    state: AtomicU64,
}

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: AtomicU64::new(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`.
    pub fn next_f64(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
