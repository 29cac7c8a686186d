//! The sign-in throttle: a small token bucket per client address, spent by each wrong token, so
//! guessing over HTTP is slowed to a few tries a minute per client (300 wrong tries once took
//! 2.8 s). Time comes from the application's clock, so tests move it instead of sleeping.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// Wrong tries a client may make at once.
pub const BURST: f64 = 5.0;
/// Seconds for one more try to come back.
pub const REFILL_SECS: f64 = 12.0;
/// Clients remembered at most; past this, those whose bucket has refilled are forgotten first,
/// so a flood of addresses cannot grow the table without bound.
const MAX_CLIENTS: usize = 10_000;

/// One client's bucket: tries left, as of `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tries: f64,
    at: DateTime<Utc>,
}

impl Bucket {
    fn refilled(self, now: DateTime<Utc>) -> Bucket {
        let elapsed = (now - self.at).num_milliseconds().max(0) as f64 / 1000.0;
        Bucket {
            tries: (self.tries + elapsed / REFILL_SECS).min(BURST),
            at: now,
        }
    }
}

/// Per-client buckets of wrong sign-in tries; clones share the table.
#[derive(Clone, Debug, Default)]
pub struct LoginThrottle(Arc<Mutex<HashMap<Option<IpAddr>, Bucket>>>);

impl LoginThrottle {
    /// `Err(seconds)` to wait when `client` has no try left at `now`; `Ok` lets it try. A client
    /// with no known address (no connect info) shares one bucket.
    pub fn check(&self, client: Option<IpAddr>, now: DateTime<Utc>) -> Result<(), u64> {
        let table = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match table.get(&client).map(|bucket| bucket.refilled(now)) {
            Some(bucket) if bucket.tries < 1.0 => Err(((1.0 - bucket.tries) * REFILL_SECS).ceil().max(1.0) as u64),
            _ => Ok(()),
        }
    }

    /// Spends one try of `client` for a wrong token.
    pub fn failed(&self, client: Option<IpAddr>, now: DateTime<Utc>) {
        let mut table = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if table.len() >= MAX_CLIENTS && !table.contains_key(&client) {
            table.retain(|_, bucket| bucket.refilled(now).tries < BURST);
            if table.len() >= MAX_CLIENTS {
                // Every remembered client is mid-guessing: forget the one that failed longest ago.
                if let Some(oldest) = table.iter().min_by_key(|(_, bucket)| bucket.at).map(|(key, _)| *key) {
                    table.remove(&oldest);
                }
            }
        }
        let bucket = table
            .get(&client)
            .map(|bucket| bucket.refilled(now))
            .unwrap_or(Bucket { tries: BURST, at: now });
        table.insert(
            client,
            Bucket {
                tries: (bucket.tries - 1.0).max(0.0),
                at: now,
            },
        );
    }

    /// How many clients are remembered (tests check the bound).
    pub fn n_clients(&self) -> usize {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
    }

    #[test]
    fn a_client_gets_its_burst_then_waits_and_others_are_not_held() {
        let throttle = LoginThrottle::default();
        let guesser = Some("203.0.113.7".parse().unwrap());
        let other = Some("198.51.100.1".parse().unwrap());
        for _ in 0..BURST as usize {
            assert_eq!(throttle.check(guesser, t0()), Ok(()));
            throttle.failed(guesser, t0());
        }
        assert_eq!(throttle.check(guesser, t0()), Err(12));
        assert_eq!(throttle.check(other, t0()), Ok(()));
        assert_eq!(throttle.check(guesser, t0() + Duration::seconds(6)), Err(6));
        assert_eq!(throttle.check(guesser, t0() + Duration::seconds(12)), Ok(()));
    }

    #[test]
    fn a_flood_of_addresses_stays_bounded() {
        let throttle = LoginThrottle::default();
        for n in 0..(MAX_CLIENTS as u32 + 500) {
            throttle.failed(Some(IpAddr::from(n.to_be_bytes())), t0());
        }
        assert!(throttle.n_clients() <= MAX_CLIENTS, "{}", throttle.n_clients());
    }
}
