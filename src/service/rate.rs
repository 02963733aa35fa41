//! Per-user request rates: a token bucket per (user, kind) in this process.
//!
//! A bucket holds at most one minute's allowance and refills continuously, so a user may burst up
//! to the per-minute limit and then continues at the steady rate.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::config::Limits;

/// What a rate limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateKind {
    /// Turns: HTTP, OpenAI chat completions, MCP `ask`.
    Turns,
    /// Collection searches: HTTP, MCP `search`.
    Searches,
}

impl RateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RateKind::Turns => "turns",
            RateKind::Searches => "searches",
        }
    }
}

/// A refused request: how long until the bucket holds a whole token again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateRefusal {
    pub per_minute: u32,
    pub retry_after_secs: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Buckets beyond this many are pruned of the full ones (users idle for a minute or more).
const PRUNE_ABOVE: usize = 10_000;

/// The token buckets of every user, for the rates `limits` sets (0: unlimited).
#[derive(Debug)]
pub struct RateLimiter {
    turns_per_minute: u32,
    searches_per_minute: u32,
    buckets: Mutex<HashMap<(i64, RateKind), Bucket>>,
}

impl RateLimiter {
    pub fn new(limits: &Limits) -> Self {
        Self {
            turns_per_minute: limits.turns_per_minute,
            searches_per_minute: limits.searches_per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// The limit of `kind` per minute (0: unlimited).
    pub fn per_minute(&self, kind: RateKind) -> u32 {
        match kind {
            RateKind::Turns => self.turns_per_minute,
            RateKind::Searches => self.searches_per_minute,
        }
    }

    /// Takes one token of `user_id`'s `kind` bucket at `now`, or says when to retry.
    pub fn admit(&self, user_id: i64, kind: RateKind, now: Instant) -> Result<(), RateRefusal> {
        self.admit_n(user_id, kind, 1, now)
    }

    /// Takes `n` tokens of `user_id`'s `kind` bucket at `now` (all or none), or says when the
    /// bucket holds them again; `n` above the per-minute limit never fits (the wait is a minute).
    pub fn admit_n(
        &self,
        user_id: i64,
        kind: RateKind,
        n: u32,
        now: Instant,
    ) -> Result<(), RateRefusal> {
        let per_minute = self.per_minute(kind);
        if per_minute == 0 {
            return Ok(());
        }
        let capacity = f64::from(per_minute);
        let per_second = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, b| {
                now.saturating_duration_since(b.updated).as_secs_f64() * per_second + b.tokens
                    < capacity
            });
        }
        let bucket = buckets.entry((user_id, kind)).or_insert(Bucket {
            tokens: capacity,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(capacity);
        bucket.updated = now;
        let cost = f64::from(n);
        if bucket.tokens >= cost {
            bucket.tokens -= cost;
            Ok(())
        } else {
            let wait = (cost.min(capacity) - bucket.tokens) / per_second;
            Err(RateRefusal {
                per_minute,
                retry_after_secs: wait.ceil().max(1.0) as u64,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limiter(turns: u32) -> RateLimiter {
        RateLimiter::new(&Limits {
            turns_per_minute: turns,
            searches_per_minute: 0,
            ..Limits::default()
        })
    }

    #[test]
    fn a_burst_up_to_the_limit_then_refusal_with_the_wait() {
        let limiter = limiter(3);
        let t0 = Instant::now();
        for _ in 0..3 {
            limiter.admit(1, RateKind::Turns, t0).unwrap();
        }
        let refused = limiter.admit(1, RateKind::Turns, t0).unwrap_err();
        // One token every 20 s at 3 per minute.
        assert_eq!(refused.retry_after_secs, 20);
        assert_eq!(refused.per_minute, 3);
        // Another user and another kind are not affected.
        limiter.admit(2, RateKind::Turns, t0).unwrap();
        limiter.admit(1, RateKind::Searches, t0).unwrap();
        // After the wait one more is admitted, not two.
        let later = t0 + Duration::from_secs(20);
        limiter.admit(1, RateKind::Turns, later).unwrap();
        assert!(limiter.admit(1, RateKind::Turns, later).is_err());
    }

    #[test]
    fn zero_is_unlimited() {
        let limiter = limiter(0);
        let t0 = Instant::now();
        for _ in 0..1000 {
            limiter.admit(1, RateKind::Turns, t0).unwrap();
        }
    }
}
