//! Numbers at the limits: a call whose counts are out of range is refused before anything is stored, and the
//! sums of a run's counts are exact past 2^63 and saturate past 2^64, whatever its rows hold, on both engines.

use crate::common;

use common::*;
use nmb_store::limits::{MAX_LATENCY_MS, MAX_TOKENS};
use nmb_store::{Store, StoreError};
use nmb_test_support::postgres::cluster;

#[test]
fn a_call_with_a_count_out_of_range_is_refused_and_nothing_is_stored() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap().run_id;
        let prompt = put_text_prompt(&store, "t1", 0);
        let fine = call(&run, "t1", 0, &prompt);
        let cases = [
            ("tokens_in", 1u64 << 63),
            ("tokens_out", MAX_TOKENS + 1),
            ("tokens_reasoning", u64::MAX),
            ("latency_ms", MAX_LATENCY_MS + 1),
        ];
        for (field, value) in cases {
            let mut c = fine;
            match field {
                "tokens_in" => c.tokens_in = Some(value),
                "tokens_out" => c.tokens_out = Some(value),
                "tokens_reasoning" => c.tokens.reasoning = Some(value),
                _ => c.latency_ms = Some(value),
            }
            let err = store
                .record_call(&c, &[ok_choice(0, "answer", true)])
                .unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, StoreError::Invalid { .. }), "{text}");
            assert!(
                text.contains(&format!("{field} = {value}")),
                "{field}: {text}"
            );
        }
        assert!(store.run_calls(&run).unwrap().is_empty());
        assert!(store.run_samples(&run).unwrap().is_empty());
        // At the bounds themselves, a call is stored.
        let mut c = fine;
        c.tokens_in = Some(MAX_TOKENS);
        c.latency_ms = Some(MAX_LATENCY_MS);
        store
            .record_call(&c, &[ok_choice(0, "answer", true)])
            .unwrap();
    });
}

/// Three calls, then each count set straight in the rows.
fn three_calls(store: &Store) -> String {
    let run = store.create_run("cfg", &manifest()).unwrap().run_id;
    for (i, task) in ["t1", "t2", "t3"].iter().enumerate() {
        record_ok(store, &run, task, i as u32, "answer");
    }
    run
}

/// 2^62 three times: a plain sum overflows a signed 64-bit integer, yet fits an unsigned one.
const QUARTER: &str =
    "UPDATE calls SET tokens_in = 4611686018427387904, tokens_out = 9223372036854775807,
                       tokens_reasoning = -9223372036854775808, latency_ms = 9223372036854775807";

fn check_sums(store: &Store, run: &str) {
    let s = store.summary(run).unwrap();
    assert_eq!(s.tokens_in, 3 * (1u64 << 62));
    assert_eq!(s.tokens_out, u64::MAX, "three times i64::MAX saturates");
    assert_eq!(s.tokens_reasoning, 0, "a negative sum reads as none");
    assert_eq!(s.calls, 3);
    assert_eq!(s.latency_ms.max, i64::MAX as u64);
    assert!(s.latency_ms.mean.is_finite());
}

#[test]
fn sums_of_a_run_holding_counts_at_the_limits_are_exact_or_saturate_on_sqlite() {
    let (_dir, store) = temp_store();
    let run = three_calls(&store);
    store
        .with_conn("write counts at the limits", |c| c.execute(QUARTER, []))
        .unwrap();
    check_sums(&store, &run);
}

#[test]
fn sums_of_a_run_holding_counts_at_the_limits_are_exact_or_saturate_on_postgres() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let store = Store::connect(&url).unwrap();
    let run = three_calls(&store);
    pg.psql(&url, QUARTER);
    check_sums(&store, &run);
}
