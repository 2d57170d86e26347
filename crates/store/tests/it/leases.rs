//! Workers sharing a run: claims never overlap while a lease lasts, a dead worker's samples come back when its
//! lease runs out, and an errored sample is tried once more by each worker that starts after the error.

use crate::common;

use common::*;
use nmb_store::now_ms;

#[test]
fn claims_do_not_overlap_and_expire_with_their_lease() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        store.plan_samples(id, &[("t1", 3), ("t2", 2)]).unwrap();
        let start = now_ms();

        assert_eq!(
            store.claim_samples(id, "t1", "a", 60_000, start).unwrap(),
            vec![0, 1, 2]
        );
        assert!(store
            .claim_samples(id, "t1", "b", 60_000, start)
            .unwrap()
            .is_empty());
        // The holder may claim again (after a restart of its task, say).
        assert_eq!(
            store.claim_samples(id, "t1", "a", 60_000, start).unwrap(),
            vec![0, 1, 2]
        );

        // A lease that ran out is anyone's: "c" claims t2 for no time at all, as if it died at once.
        assert_eq!(
            store.claim_samples(id, "t2", "c", -1, start).unwrap(),
            vec![0, 1]
        );
        assert_eq!(
            store.claim_samples(id, "t2", "b", 60_000, start).unwrap(),
            vec![0, 1]
        );
        assert_eq!(store.renew_leases(id, "b", 60_000).unwrap(), 2);
        assert_eq!(store.renew_leases(id, "c", 60_000).unwrap(), 0);

        // Answered samples are never claimed; released ones are free at once.
        record_ok(&store, id, "t1", 0, "answer");
        assert_eq!(store.release_leases(id, "a").unwrap(), 3);
        assert_eq!(
            store.claim_samples(id, "t1", "b", 60_000, start).unwrap(),
            vec![1, 2]
        );
        assert_eq!(store.work_left(id, start).unwrap(), 4);
    });
}

#[test]
fn an_errored_sample_is_retried_only_by_workers_started_after_the_error() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        store.plan_samples(id, &[("t1", 1)]).unwrap();
        let before = now_ms() - 1;
        let prompt = put_text_prompt(&store, "t1", 0);
        let mut failed = call(id, "t1", 0, &prompt);
        failed.error = error("server_error", "HTTP 500");
        store.record_call(&failed, &[failed_choice(0)]).unwrap();
        assert!(store
            .claim_samples(id, "t1", "old", 60_000, before)
            .unwrap()
            .is_empty());
        assert_eq!(store.work_left(id, before).unwrap(), 0);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = now_ms();
        assert_eq!(store.work_left(id, later).unwrap(), 1);
        assert_eq!(
            store.claim_samples(id, "t1", "new", 60_000, later).unwrap(),
            vec![0]
        );
    });
}

#[test]
fn fleet_slots_are_shared_given_back_and_expire_and_pauses_only_grow() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let s = "http://gpu1:8000/v1";
        assert_eq!(store.take_fleet_slot(s, 2, "a", 60_000).unwrap(), Some(0));
        assert_eq!(store.take_fleet_slot(s, 2, "b", 60_000).unwrap(), Some(1));
        assert_eq!(store.take_fleet_slot(s, 2, "c", 60_000).unwrap(), None);
        // Another server has slots of its own; a larger limit opens more.
        assert_eq!(
            store.take_fleet_slot("other", 2, "c", 60_000).unwrap(),
            Some(0)
        );
        assert_eq!(store.take_fleet_slot(s, 3, "c", 60_000).unwrap(), Some(2));
        store.give_back_fleet_slot(s, 1, "someone else").unwrap();
        assert_eq!(store.take_fleet_slot(s, 2, "c", 60_000).unwrap(), None);
        store.give_back_fleet_slot(s, 1, "b").unwrap();
        assert_eq!(store.take_fleet_slot(s, 2, "c", -1).unwrap(), Some(1));
        // "c" held slot 1 for no time at all, as if killed: it is free again.
        assert_eq!(store.take_fleet_slot(s, 2, "d", 60_000).unwrap(), Some(1));

        assert_eq!(store.fleet_pause(s).unwrap(), None);
        store.pause_fleet(s, 5_000).unwrap();
        store.pause_fleet(s, 3_000).unwrap();
        assert_eq!(store.fleet_pause(s).unwrap(), Some(5_000));
        store.pause_fleet(s, 9_000).unwrap();
        assert_eq!(store.fleet_pause(s).unwrap(), Some(9_000));
    });
}
