use crate::common;

use common::*;
use nmb_store::{cache_key, SampleStatus, StoreError};

#[test]
fn only_successful_responses_are_cache_hits() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        let prompt = put_text_prompt(&store, "t", 0);
        let key0 = cache_key(MODEL, PARAMS, &prompt, 0);
        let key1 = cache_key(MODEL, PARAMS, &prompt, 1);

        let mut failed = call(id, "t", 0, &prompt);
        failed.error = error("server_error", "503");
        store.record_call(&failed, &[failed_choice(0)]).unwrap();
        assert!(
            store.lookup_cache(&key0).unwrap().is_none(),
            "an errored response is not cached"
        );

        store
            .record_call(
                &call(id, "t", 0, &prompt),
                &[ok_choice(0, "the answer", true)],
            )
            .unwrap();
        let hit = store
            .lookup_cache(&key0)
            .unwrap()
            .expect("ok response cached");
        assert_eq!(hit.text, "the answer");
        assert_eq!(hit.origin_run_id, id);
        assert_eq!(hit.tokens_out, Some(3));
        // Another sample index is another key.
        assert!(store.lookup_cache(&key1).unwrap().is_none());
        // Parameters spelled differently but equal give the same key.
        let respelled = cache_key(
            MODEL,
            r#"{ "top_p": 0.95, "temperature": 0.7, "max_tokens": 256 }"#,
            &prompt,
            0,
        );
        assert_eq!(respelled, key0);
        // Other parameters or another model miss.
        assert!(store
            .lookup_cache(&cache_key(MODEL, r#"{"temperature":0}"#, &prompt, 0))
            .unwrap()
            .is_none());
        assert!(store
            .lookup_cache(&cache_key("openai:other", PARAMS, &prompt, 0))
            .unwrap()
            .is_none());

        // The retried sample is ok now, stored once, with its error cleared.
        let states = store.sample_states(id).unwrap();
        assert_eq!(states.len(), 1);
        assert_eq!(states[0].status, SampleStatus::Ok);
        assert_eq!(states[0].error_class, None);
        let s = store.summary(id).unwrap();
        assert_eq!((s.calls, s.calls_errored, s.samples_errored), (2, 1, 0));
        assert_eq!(s.call_errors_by_class.get("server_error"), Some(&1));
    });
}

#[test]
fn a_new_run_reuses_stored_answers_and_records_the_reuse() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let first = store.create_run("cfg", &manifest()).unwrap();
        let prompt = put_text_prompt(&store, "t", 0);
        let call_id = store
            .record_call(
                &call(&first.run_id, "t", 0, &prompt),
                &[ok_choice(0, "A", true)],
            )
            .unwrap();

        let second = store.create_run("cfg", &manifest()).unwrap();
        store.plan_samples(&second.run_id, &[("t", 1)]).unwrap();
        let hit = store
            .lookup_cache(&cache_key(MODEL, PARAMS, &prompt, 0))
            .unwrap()
            .unwrap();
        assert_eq!(hit.call_id, call_id);
        assert!(store
            .record_cache_hit(&second.run_id, "t", 0, 0, &hit, true)
            .unwrap());

        let s = store.summary(&second.run_id).unwrap();
        assert_eq!(
            (s.samples_ok, s.cache_hits, s.requests_sent, s.calls),
            (1, 1, 0, 0)
        );
        assert_eq!(
            (s.tokens_in, s.tokens_out),
            (0, 0),
            "reused answers spend no tokens"
        );
        let samples = store.run_samples(&second.run_id).unwrap();
        assert_eq!(samples[0].final_text.as_deref(), Some("A"));
        assert!(samples[0].turns[0].cached);
        assert_eq!(samples[0].turns[0].call.run_id, first.run_id);
    });
}

#[test]
fn a_resumed_run_revisiting_its_own_answer_is_not_a_new_hit() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        let p0 = put_text_prompt(&store, "multi", 0);
        store
            .record_call(&call(id, "multi", 0, &p0), &[ok_choice(0, "first", false)])
            .unwrap();
        assert_eq!(
            store.sample_states(id).unwrap()[0].status,
            SampleStatus::Pending
        );
        assert_eq!(store.sample_states(id).unwrap()[0].turns_done, 1);

        // Resume: turn 0 comes from the cache (this run's own answer), turn 1 is sent.
        let hit = store
            .lookup_cache(&cache_key(MODEL, PARAMS, &p0, 0))
            .unwrap()
            .unwrap();
        assert!(!store
            .record_cache_hit(id, "multi", 0, 0, &hit, false)
            .unwrap());
        let p1 = put_text_prompt(&store, "multi", 1);
        store
            .record_call(&call(id, "multi", 1, &p1), &[ok_choice(0, "second", true)])
            .unwrap();

        let s = store.summary(id).unwrap();
        assert_eq!(
            (s.samples_total, s.samples_ok, s.cache_hits, s.calls),
            (1, 1, 0, 2)
        );
        let samples = store.run_samples(id).unwrap();
        assert_eq!(samples[0].turns.len(), 2);
        assert_eq!(samples[0].final_text.as_deref(), Some("second"));
    });
}

#[test]
fn a_new_answer_at_an_earlier_turn_drops_later_turns() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        let p0 = put_text_prompt(&store, "m", 0);
        let p1 = put_text_prompt(&store, "m", 1);
        store
            .record_call(&call(id, "m", 0, &p0), &[ok_choice(0, "a", false)])
            .unwrap();
        store
            .record_call(&call(id, "m", 1, &p1), &[ok_choice(0, "b", true)])
            .unwrap();
        let mut failed = call(id, "m", 0, &p0);
        failed.error = error("network", "connection reset");
        store.record_call(&failed, &[failed_choice(0)]).unwrap();
        let samples = store.run_samples(id).unwrap();
        assert_eq!(samples[0].status, SampleStatus::Errored);
        assert_eq!(
            samples[0].turns.len(),
            1,
            "turn 1 answered a conversation that no longer exists"
        );
        assert_eq!(samples[0].turns_done, 0);
        assert_eq!(samples[0].final_text, None);
    });
}

#[test]
fn malformed_calls_are_refused_with_a_reason() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        let prompt = put_text_prompt(&store, "t", 0);
        let c = call(id, "t", 0, &prompt);
        let no_text = failed_choice(0);
        let e = store.record_call(&c, &[no_text]).unwrap_err();
        assert!(e.to_string().contains("no text"), "{e}");
        assert!(store.record_call(&c, &[]).is_err());
        let dup = [ok_choice(0, "a", true), ok_choice(0, "b", true)];
        assert!(store
            .record_call(&c, &dup)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let mut bad_class = call(id, "t", 0, &prompt);
        bad_class.error = error("Rate Limit!", "x");
        assert!(store.record_call(&bad_class, &[failed_choice(0)]).is_err());
        let unknown_prompt = call(id, "t", 0, "not-stored");
        let e = store
            .record_call(&unknown_prompt, &[ok_choice(0, "a", true)])
            .unwrap_err();
        assert!(e.to_string().contains("put_prompt"), "{e}");
        let unknown_run = call("r-missing", "t", 0, &prompt);
        let e = store
            .record_call(&unknown_run, &[ok_choice(0, "a", true)])
            .unwrap_err();
        assert!(matches!(e, StoreError::UnknownRun { .. }), "{e}");
        assert_eq!(store.summary(id).unwrap().calls, 0, "nothing half-written");
        let e = store.lookup_cache("not-a-key").unwrap_err();
        assert!(e.to_string().contains("cache_key"), "{e}");
    });
}
