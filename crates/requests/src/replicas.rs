//! Which replica a call goes to, when several servers serve one model (`openai:m@http://a/v1,http://b/v1`).
//!
//! A call goes to the replica with the fewest calls in flight (counted from the moment it is picked, waits for a
//! concurrency slot included), ties going to the lowest index, so the choice is deterministic. A replica whose
//! call fails in a way that says something about the server rather than the request (see
//! [`takes_replica_out`]) is taken out for a back-off period and tried again once it has passed; a success
//! brings the period back to its start. When every replica is out, calls go to the one whose back-off ends
//! first: a run never fails for want of a replica, its calls fail or succeed as they would on one server.
//!
//! The [`Router`] is the policy alone, clocked by the `now` its callers pass, so it can be tested without
//! waiting; the scheduler holds one per lane and asks it before every attempt.

use std::time::{Duration, Instant};

use crate::error::ErrorClass;

/// How long a failing replica is left out: `first_backoff` the first time, doubling each time it fails again
/// after coming back, never more than `max_backoff`.
///
/// A server that answers 5xx or drops connections is usually restarting, overloaded or out of memory; sending
/// it more calls at once only fails them too (each costing a retry and its wait) and adds load while it
/// recovers. Half a minute is long enough for a process manager to restart a server and short enough that a
/// replica that blipped is soon used again; a replica that stays down is asked once per period, at most every
/// five minutes, so that it rejoins within minutes of coming back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaPolicy {
    pub first_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for ReplicaPolicy {
    fn default() -> Self {
        ReplicaPolicy {
            first_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(300),
        }
    }
}

impl ReplicaPolicy {
    /// The period a replica stays out after its `strikes`-th take-out in a row (1-based).
    pub fn backoff(&self, strikes: u32) -> Duration {
        let factor = 2u32.saturating_pow(strikes.saturating_sub(1));
        self.first_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Whether a failure of this class takes the replica out: the server failed (5xx), the connection did (reset,
/// refused, cut short) or no answer came in time. Other failures belong to the request (a bad request, a too
/// long prompt, a refusal, a malformed answer) and would fail on any replica; rate limits (429) keep their own
/// handling, the lane's adaptive limit and the server's Retry-After, per replica.
pub fn takes_replica_out(class: ErrorClass) -> bool {
    matches!(
        class,
        ErrorClass::ServerError | ErrorClass::Network | ErrorClass::Timeout
    )
}

/// What an attempt said about the replica it went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// It answered.
    Up,
    /// It failed in a way [`takes_replica_out`] counts.
    Down,
    /// Nothing either way (the request's own fault, a rate limit).
    Unknown,
}

impl Health {
    pub fn of<T>(result: &Result<T, crate::CallError>) -> Health {
        match result {
            Ok(_) => Health::Up,
            Err(e) if takes_replica_out(e.class) => Health::Down,
            Err(_) => Health::Unknown,
        }
    }
}

/// A replica picked for one attempt. Hand it back to [`Router::finish`] (or [`Router::release`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub replica: usize,
    /// The replica's take-out count when picked: an attempt that started before the replica was last taken out
    /// says nothing new about it.
    generation: u64,
}

#[derive(Debug, Clone, Default)]
struct Slot {
    in_flight: usize,
    /// Left out until then (a time in the past: back, on probation until it answers).
    out_until: Option<Instant>,
    /// Take-outs since its last answer.
    strikes: u32,
    generation: u64,
}

/// The routing state of one lane's replicas.
#[derive(Debug, Clone)]
pub struct Router {
    policy: ReplicaPolicy,
    slots: Vec<Slot>,
}

impl Router {
    /// A router over `replicas` replicas (at least one).
    pub fn new(replicas: usize, policy: ReplicaPolicy) -> Router {
        Router {
            policy,
            slots: vec![Slot::default(); replicas.max(1)],
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Picks the replica for an attempt starting at `now` and counts it in flight there: the available replica
    /// with the fewest in flight (lowest index on a tie), other than `avoid` (where the call's previous attempt
    /// failed) while another one is available; when none is available, the one whose back-off ends first.
    pub fn pick(&mut self, now: Instant, avoid: Option<usize>) -> Pick {
        let available = |i: &usize| self.slots[*i].out_until.is_none_or(|t| t <= now);
        let others = (0..self.slots.len()).filter(|i| Some(*i) != avoid && available(i));
        let chosen = others
            .min_by_key(|i| (self.slots[*i].in_flight, *i))
            .or_else(|| avoid.filter(|a| *a < self.slots.len() && available(a)))
            .unwrap_or_else(|| {
                (0..self.slots.len())
                    .min_by_key(|i| (self.slots[*i].out_until, *i))
                    .unwrap_or(0)
            });
        let slot = &mut self.slots[chosen];
        slot.in_flight += 1;
        Pick {
            replica: chosen,
            generation: slot.generation,
        }
    }

    /// Ends an attempt that ended at `now` with `health`. Returns the back-off period when this took the
    /// replica out.
    pub fn finish(&mut self, pick: Pick, health: Health, now: Instant) -> Option<Duration> {
        self.release(pick);
        let slot = self.slots.get_mut(pick.replica)?;
        if pick.generation != slot.generation {
            return None; // started before the replica was last taken out
        }
        match health {
            Health::Up => {
                slot.out_until = None;
                slot.strikes = 0;
                None
            }
            // Already out (an attempt sent while every replica was): its period stands.
            Health::Down if slot.out_until.is_some_and(|t| t > now) => None,
            Health::Down => {
                slot.strikes = slot.strikes.saturating_add(1);
                slot.generation += 1;
                let period = self.policy.backoff(slot.strikes);
                slot.out_until = Some(now + period);
                Some(period)
            }
            Health::Unknown => None,
        }
    }

    /// Ends an attempt that was abandoned (its future dropped) without judging the replica.
    pub fn release(&mut self, pick: Pick) {
        if let Some(slot) = self.slots.get_mut(pick.replica) {
            slot.in_flight = slot.in_flight.saturating_sub(1);
        }
    }

    /// Attempts in flight on `replica`.
    pub fn in_flight(&self, replica: usize) -> usize {
        self.slots.get(replica).map_or(0, |s| s.in_flight)
    }

    /// When `replica` comes back, if it is out at `now`.
    pub fn out_until(&self, replica: usize, now: Instant) -> Option<Instant> {
        self.slots
            .get(replica)
            .and_then(|s| s.out_until)
            .filter(|t| *t > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn router(n: usize) -> Router {
        Router::new(n, ReplicaPolicy::default())
    }

    #[test]
    fn least_in_flight_with_ties_to_the_lowest_index() {
        let t0 = Instant::now();
        let mut r = router(3);
        let picks: Vec<Pick> = (0..7).map(|_| r.pick(t0, None)).collect();
        let order: Vec<usize> = picks.iter().map(|p| p.replica).collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0]);
        // replica 1 frees two slots: the next two go there, then the tie goes to the lowest index
        r.finish(picks[1], Health::Up, t0);
        r.finish(picks[4], Health::Up, t0);
        assert_eq!(r.pick(t0, None).replica, 1);
        assert_eq!(r.pick(t0, None).replica, 1);
        assert_eq!((r.in_flight(0), r.in_flight(1), r.in_flight(2)), (3, 2, 2));
        let order: Vec<usize> = (0..3).map(|_| r.pick(t0, None).replica).collect();
        assert_eq!(order, [1, 2, 0]);
        // an abandoned attempt only frees its slot
        r.release(picks[2]);
        assert_eq!(r.in_flight(2), 2);
    }

    #[test]
    fn a_failing_replica_is_out_for_its_back_off_and_then_tried_again() {
        let t0 = Instant::now();
        let mut r = router(2);
        let a = r.pick(t0, None);
        let b = r.pick(t0, None);
        assert_eq!((a.replica, b.replica), (0, 1));
        assert_eq!(r.finish(a, Health::Down, t0), Some(30 * S));
        assert_eq!(r.out_until(0, t0), Some(t0 + 30 * S));
        // while out, everything goes to replica 1, however busy it is
        for _ in 0..5 {
            assert_eq!(r.pick(t0 + 29 * S, None).replica, 1);
        }
        // after the period it is tried again (it has fewer in flight)
        let again = r.pick(t0 + 30 * S, None);
        assert_eq!(again.replica, 0);
        assert_eq!(r.out_until(0, t0 + 30 * S), None);
        // failing again doubles the period, up to five minutes
        assert_eq!(r.finish(again, Health::Down, t0 + 31 * S), Some(60 * S));
        let mut now = t0 + 31 * S;
        let mut periods = Vec::new();
        for _ in 0..5 {
            now = r.out_until(0, now).unwrap();
            let p = r.pick(now, None);
            assert_eq!(p.replica, 0);
            periods.push(r.finish(p, Health::Down, now).unwrap().as_secs());
        }
        assert_eq!(periods, [120, 240, 300, 300, 300]);
        // an answer brings it back at once and resets the period
        now = r.out_until(0, now).unwrap();
        let p = r.pick(now, None);
        assert_eq!(r.finish(p, Health::Up, now), None);
        let p = r.pick(now, None);
        assert_eq!(p.replica, 0);
        assert_eq!(r.finish(p, Health::Down, now), Some(30 * S));
    }

    #[test]
    fn attempts_started_before_the_take_out_say_nothing_new() {
        let t0 = Instant::now();
        let mut r = router(2);
        let early: Vec<Pick> = (0..6).map(|_| r.pick(t0, None)).collect();
        assert_eq!(early[4].replica, 0);
        assert_eq!(r.finish(early[0], Health::Down, t0 + S), Some(30 * S));
        // another call that was on replica 0 before it went out answers late: it stays out
        assert_eq!(r.finish(early[2], Health::Up, t0 + 5 * S), None);
        assert_eq!(r.out_until(0, t0 + 5 * S), Some(t0 + 31 * S));
        // a third fails after the replica came back: old news, it stays in
        assert_eq!(r.finish(early[4], Health::Down, t0 + 40 * S), None);
        assert_eq!(r.out_until(0, t0 + 40 * S), None);
        // back on probation: its next failure doubles the period
        let p = r.pick(t0 + 40 * S, None);
        assert_eq!(p.replica, 0);
        assert_eq!(r.finish(p, Health::Down, t0 + 41 * S), Some(60 * S));
        // failures that are the request's own leave a replica alone
        let q = r.pick(t0 + 41 * S, None);
        assert_eq!(q.replica, 1);
        assert_eq!(r.finish(q, Health::Unknown, t0 + 42 * S), None);
        assert_eq!(r.out_until(1, t0 + 42 * S), None);
    }

    #[test]
    fn with_every_replica_out_the_one_back_first_is_used() {
        let t0 = Instant::now();
        let mut r = router(3);
        let p: Vec<Pick> = (0..3).map(|_| r.pick(t0, None)).collect();
        r.finish(p[1], Health::Down, t0);
        r.finish(p[0], Health::Down, t0 + 2 * S);
        r.finish(p[2], Health::Down, t0 + S);
        let now = t0 + 10 * S;
        for _ in 0..3 {
            assert_eq!(r.pick(now, None).replica, 1, "back at t0 + 30 s");
        }
        // a failure there while it is still out changes nothing; an answer brings it back
        let q = r.pick(now, None);
        assert_eq!(r.finish(q, Health::Down, now), None);
        assert_eq!(r.out_until(1, now), Some(t0 + 30 * S));
        let q = r.pick(now, None);
        r.finish(q, Health::Up, now);
        assert_eq!(r.out_until(1, now), None);
        // one replica: always that one, out or not
        let mut one = router(1);
        let p = one.pick(t0, None);
        one.finish(p, Health::Down, t0);
        assert_eq!(one.pick(t0, Some(0)).replica, 0);
    }

    #[test]
    fn a_retry_goes_elsewhere_while_another_replica_is_available() {
        let t0 = Instant::now();
        let mut r = router(3);
        let busy: Vec<Pick> = (0..3).map(|_| r.pick(t0, Some(0))).collect();
        assert_eq!(
            busy.iter().map(|p| p.replica).collect::<Vec<_>>(),
            [1, 2, 1]
        );
        // replica 0 is idle, but the call just failed there
        assert_ne!(r.pick(t0, Some(0)).replica, 0);
        // with the others out, the same replica is better than none
        let mut two = router(2);
        let p = two.pick(t0, None);
        let q = two.pick(t0, None);
        two.finish(q, Health::Down, t0);
        two.finish(p, Health::Unknown, t0);
        assert_eq!(two.pick(t0, Some(0)).replica, 0);
    }

    #[test]
    fn failure_classes() {
        for c in ErrorClass::ALL {
            let out = matches!(
                c,
                ErrorClass::ServerError | ErrorClass::Network | ErrorClass::Timeout
            );
            assert_eq!(takes_replica_out(c), out, "{c}");
        }
        assert_eq!(Health::of::<()>(&Ok(())), Health::Up);
        let e = |c| Err::<(), _>(crate::CallError::new(c, "x"));
        assert_eq!(Health::of(&e(ErrorClass::Network)), Health::Down);
        assert_eq!(Health::of(&e(ErrorClass::RateLimit)), Health::Unknown);
        assert_eq!(
            ReplicaPolicy::default().backoff(u32::MAX),
            Duration::from_secs(300)
        );
    }
}
