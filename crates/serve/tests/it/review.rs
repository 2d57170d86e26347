//! The blinded review pages over a real loopback listener: a store built through the public API (a run with
//! answered samples, a review set from `nmb_review::assign` with tokens from `nmb_review::new_token`), and plain
//! HTTP requests as a browser would send them.

mod support;

use nmb_serve::{CSP, REVIEW_CSP};
use nmb_store::Store;

use support::*;

#[tokio::test]
async fn a_token_link_becomes_a_cookie_and_the_set_resumes_where_the_reviewer_was() {
    let f = review_fixture();
    let base = start(f.store.clone(), None).await;
    let ann = &f.tokens["ann"];
    let r = Browser::new(&base, &f.set_id)
        .get(&format!("?token={ann}"))
        .await;
    assert_eq!(r.status, 303);
    assert_eq!(
        r.location(),
        format!("/review/{}", f.set_id),
        "the token leaves the address"
    );
    assert_eq!(r.headers["content-security-policy"], REVIEW_CSP);
    let cookie = r.headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with(&format!("nmb_review={ann};")),
        "{cookie}"
    );
    for attr in [
        "HttpOnly",
        "SameSite=Strict",
        &format!("Path=/review/{}", f.set_id),
    ] {
        assert!(cookie.contains(attr), "{attr} in {cookie}");
    }

    let b = Browser::enter(&base, &f.set_id, ann).await;
    let r = b.get("").await;
    assert_eq!(r.status, 303);
    assert_eq!(r.location(), format!("/review/{}/items/1", f.set_id));
    assert_eq!(
        b.get("/").await.location(),
        r.location(),
        "with or without the slash"
    );

    // Grades of positions 1 and 2 (through the form), and a partial one of 3 (no verdict): resume at 3.
    for position in 1..=2 {
        let csrf = b.csrf(position).await;
        let r = b
            .post(position, &grade_form(&csrf, "correct", &[], "", ""), &[])
            .await;
        assert_eq!(r.status, 303, "{}", r.body);
        assert_eq!(
            r.location(),
            format!("/review/{}/items/{}", f.set_id, position + 1)
        );
    }
    let csrf = b.csrf(3).await;
    let partial = b
        .post(3, &grade_form(&csrf, "", &[("overall", "2")], "", ""), &[])
        .await;
    assert_eq!(partial.status, 303);
    assert_eq!(
        b.get("").await.location(),
        format!("/review/{}/items/3", f.set_id)
    );

    // Everything graded (one skipped): the done page, with this reviewer's counts only.
    let total = f.lists["ann"].len() as u32;
    for position in 3..=total {
        let csrf = b.csrf(position).await;
        let verdict = if position == total {
            "skip"
        } else {
            "incorrect"
        };
        let r = b
            .post(position, &grade_form(&csrf, verdict, &[], "", ""), &[])
            .await;
        assert_eq!(r.status, 303);
    }
    let done = b.get("/").await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.headers["content-security-policy"], REVIEW_CSP);
    let counts = format!(
        "You graded {} of {total} items and marked 1 as unsure / skipped",
        total - 1
    );
    assert!(done.body.contains(&counts), "{}", done.body);
    let last = b
        .post(
            total,
            &grade_form(&b.csrf(total).await, "skip", &[], "", ""),
            &[],
        )
        .await;
    assert_eq!(
        last.location(),
        format!("/review/{}", f.set_id),
        "after the last item: resume"
    );
}

#[tokio::test]
async fn each_post_appends_a_grade_and_the_newest_fills_the_form() {
    let f = review_fixture();
    let base = start(f.store.clone(), None).await;
    let b = Browser::enter(&base, &f.set_id, &f.tokens["ann"]).await;
    let i = f.task_at("ann", 2);
    let csrf = b.csrf(2).await;
    let first = grade_form(
        &csrf,
        "incorrect",
        &[("overall", "1"), ("diagnostic_correctness", "0")],
        "knowledge_gap",
        "missed the enhancement",
    );
    let r = b.post(2, &first, &[]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let h = history(&f, "ann", i);
    assert_eq!(h.len(), 1);
    let g = &h[0].grade;
    assert_eq!(g.verdict.as_deref(), Some("incorrect"));
    assert_eq!(g.scores.get("overall"), Some(&1));
    assert_eq!(g.scores.get("diagnostic_correctness"), Some(&0));
    assert_eq!(g.taxonomy.as_deref(), Some("knowledge_gap"));
    assert_eq!(g.comment.as_deref(), Some("missed the enhancement"));
    assert_eq!(h[0].rubric_hash, nmb_results::Rubric::builtin().hash);

    // The script's autosave: 204, another row; the first stays (the audit trail).
    let second = grade_form(
        &csrf,
        "partly",
        &[("overall", "3")],
        "",
        "</textarea><script>x()</script>",
    );
    let r = b.post(2, &second, &[("accept", "application/json")]).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let h = history(&f, "ann", i);
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].grade.verdict.as_deref(), Some("incorrect"));
    assert_eq!(h[1].grade.verdict.as_deref(), Some("partly"));
    // The same grade again (the form's own submit after an autosave) adds nothing.
    assert_eq!(b.post(2, &second, &[]).await.status, 303);
    assert_eq!(history(&f, "ann", i).len(), 2);

    let page = b.get("/items/2").await.body;
    assert!(
        page.contains("name=\"verdict\" value=\"partly\" checked"),
        "{page}"
    );
    assert!(page.contains("name=\"score.overall\" value=\"3\" checked"));
    assert!(page.contains("name=\"score.diagnostic_correctness\" value=\"\" checked"));
    assert!(!page.contains("value=\"knowledge_gap\" selected"));
    assert!(
        page.contains("&lt;/textarea&gt;&lt;script&gt;x()&lt;/script&gt;</textarea>"),
        "the comment, escaped"
    );
    assert!(!page.contains("<script>x()"));
    // "go=prev" goes back; "go=stay" stays.
    let third = format!("{}&go=prev", grade_form(&csrf, "correct", &[], "", ""));
    assert_eq!(
        b.post(2, &third, &[]).await.location(),
        format!("/review/{}/items/1", f.set_id)
    );
}

#[tokio::test]
async fn an_invalid_grade_is_refused_with_every_problem_and_nothing_is_stored() {
    let f = review_fixture();
    let base = start(f.store.clone(), None).await;
    let b = Browser::enter(&base, &f.set_id, &f.tokens["ann"]).await;
    let csrf = b.csrf(1).await;
    let bad = grade_form(
        &csrf,
        "maybe",
        &[("overall", "9"), ("charm", "3")],
        "bad_luck",
        "kept <b>comment</b>",
    );
    let r = b.post(1, &bad, &[]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.headers["content-security-policy"], REVIEW_CSP);
    for problem in [
        "verdict &quot;maybe&quot;",
        "overall: &quot;9&quot;",
        "charm",
        "bad_luck",
    ] {
        assert!(r.body.contains(problem), "{problem} listed: {}", r.body);
    }
    assert!(
        r.body
            .contains("kept &lt;b&gt;comment&lt;/b&gt;</textarea>"),
        "what they typed is kept"
    );
    let r = b.post(1, &bad, &[("accept", "application/json")]).await;
    assert_eq!(r.status, 400);
    let problems: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        problems["problems"].as_array().unwrap().len(),
        4,
        "{problems}"
    );
    assert!(
        history(&f, "ann", f.task_at("ann", 1)).is_empty(),
        "nothing stored"
    );
    let long = grade_form(
        &csrf,
        "correct",
        &[],
        "",
        &"x".repeat(nmb_review::COMMENT_LIMIT + 1),
    );
    assert_eq!(b.post(1, &long, &[]).await.status, 400);
    assert!(history(&f, "ann", f.task_at("ann", 1)).is_empty());
}

#[tokio::test]
async fn a_post_without_the_form_key_or_from_another_site_is_refused() {
    let f = review_fixture();
    let base = start(f.store.clone(), None).await;
    let ann = Browser::enter(&base, &f.set_id, &f.tokens["ann"]).await;
    let bob = Browser::enter(&base, &f.set_id, &f.tokens["bob"]).await;
    let good = ann.csrf(1).await;
    let bobs = bob.csrf(1).await;
    assert_ne!(good, bobs, "each reviewer has their own key");
    let host = base.trim_start_matches("http://");
    let cases: Vec<(String, Vec<(&str, &str)>)> = vec![
        ("verdict=correct".to_string(), vec![]),
        (grade_form("", "correct", &[], "", ""), vec![]),
        (grade_form(&bobs, "correct", &[], "", ""), vec![]),
        (grade_form(&good[..63], "correct", &[], "", ""), vec![]),
        (
            grade_form(&good, "correct", &[], "", ""),
            vec![("origin", "http://evil.example")],
        ),
        (
            grade_form(&good, "correct", &[], "", ""),
            vec![("origin", "null")],
        ),
        (
            grade_form(&good, "correct", &[], "", ""),
            vec![("sec-fetch-site", "cross-site")],
        ),
        (
            grade_form(&good, "correct", &[], "", ""),
            vec![("sec-fetch-site", "same-site")],
        ),
    ];
    for (form, headers) in &cases {
        let r = ann.post(1, form, headers).await;
        assert_eq!(r.status, 403, "{form} {headers:?}: {}", r.body);
        let json = ann
            .post(
                1,
                form,
                &[headers.as_slice(), &[("accept", "application/json")]].concat(),
            )
            .await;
        assert_eq!(json.status, 403);
        assert!(json.body.contains("problems"), "{}", json.body);
    }
    assert!(
        history(&f, "ann", f.task_at("ann", 1)).is_empty(),
        "nothing stored"
    );
    let origin = format!("http://{host}");
    let same = [
        ("origin", origin.as_str()),
        ("sec-fetch-site", "same-origin"),
    ];
    let r = ann
        .post(1, &grade_form(&good, "correct", &[], "", ""), &same)
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(history(&f, "ann", f.task_at("ann", 1)).len(), 1);
    // What Chromium sends for a form post from a page with `Referrer-Policy: no-referrer`.
    let null = [("origin", "null"), ("sec-fetch-site", "same-origin")];
    let r = ann
        .post(1, &grade_form(&good, "partly", &[], "", ""), &null)
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(history(&f, "ann", f.task_at("ann", 1)).len(), 2);
}

#[tokio::test]
async fn a_reviewer_reaches_only_their_own_items_and_never_anothers_grade() {
    let f = review_fixture();
    let base = start(f.store.clone(), None).await;
    let ann = Browser::enter(&base, &f.set_id, &f.tokens["ann"]).await;
    let bob = Browser::enter(&base, &f.set_id, &f.tokens["bob"]).await;

    // Bob grades a shared item with a comment only he may see.
    let shared = f.shared[0];
    let shared_task = f.items[&shared];
    let bob_pos = f.position_of("bob", shared_task).unwrap();
    let form = grade_form(
        &bob.csrf(bob_pos).await,
        "incorrect",
        &[("overall", "0")],
        "",
        "BOB-ONLY-NOTE",
    );
    assert_eq!(bob.post(bob_pos, &form, &[]).await.status, 303);
    let ann_pos = f.position_of("ann", shared_task).unwrap();
    let page = ann.get(&format!("/items/{ann_pos}")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(&format!("Question for {}", task(shared_task))),
        "the same item"
    );
    assert!(!page.body.contains("BOB-ONLY-NOTE"), "not Bob's comment");
    assert!(
        !page
            .body
            .contains("name=\"verdict\" value=\"incorrect\" checked"),
        "not Bob's verdict"
    );
    assert!(
        page.body
            .contains("name=\"score.overall\" value=\"\" checked"),
        "not Bob's score"
    );

    // Ann's pages show Ann's items, and no item only Bob has.
    let ann_total = f.lists["ann"].len() as u32;
    let bobs_own: Vec<usize> = f.lists["bob"]
        .iter()
        .filter(|n| !f.shared.contains(n))
        .map(|n| f.items[n])
        .collect();
    assert!(!bobs_own.is_empty());
    for p in 1..=ann_total {
        let page = ann.get(&format!("/items/{p}")).await;
        assert_eq!(page.status, 200);
        assert!(
            page.body.contains(&format!("{p} / {ann_total}")),
            "progress"
        );
        for other in &bobs_own {
            assert!(!page
                .body
                .contains(&format!("Question for {}:", task(*other))));
        }
    }
    // Past Ann's list, and malformed positions: 404, reading or writing, and nothing stored for anyone.
    let good = ann.csrf(1).await;
    for p in [
        (ann_total + 1).to_string(),
        "0".into(),
        "-1".into(),
        "x".into(),
        "99999999999".into(),
    ] {
        let r = ann.get(&format!("/items/{p}")).await;
        assert_eq!(r.status, 404, "{p}");
        assert_eq!(r.headers["content-security-policy"], REVIEW_CSP);
    }
    let r = ann
        .post(
            ann_total + 1,
            &grade_form(&good, "correct", &[], "", ""),
            &[],
        )
        .await;
    assert_eq!(r.status, 404);
    for t in &bobs_own {
        assert!(history(&f, "bob", *t).is_empty());
    }

    // Images: those of Ann's item, named with its position; not another item's, not without one.
    let mine = sha(&png(f.task_at("ann", 1)));
    let img = ann.get(&format!("/images/{mine}?item=1")).await;
    assert_eq!(img.status, 200);
    assert_eq!(img.headers["content-type"], "image/png");
    let bobs_image = sha(&png(bobs_own[0]));
    for path in [
        format!("/images/{bobs_image}?item=1"),
        format!("/images/{mine}?item=2"),
        format!("/images/{mine}"),
        format!("/images/{mine}?item={}", ann_total + 1),
        "/images/..%2F..%2Fetc%2Fpasswd?item=1".to_string(),
        format!("/images/{}?item=1", mine.to_uppercase()),
    ] {
        assert_eq!(ann.get(&path).await.status, 404, "{path}");
    }
    assert_eq!(
        Browser::new(&base, &f.set_id)
            .get(&format!("/images/{mine}?item=1"))
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn other_sets_revoked_and_missing_tokens_are_refused() {
    let f = review_fixture();
    // A second set on the same run, with its own reviewer.
    let y = review_set(&f.store, &f.run_id, &["cy"], 0.0, false);
    let base = start(f.store.clone(), None).await;
    let ann = &f.tokens["ann"];

    // Ann's token on set Y: neither as a link nor as a cookie.
    let r = Browser::new(&base, &y.set_id)
        .get(&format!("?token={ann}"))
        .await;
    assert_eq!(r.status, 401);
    assert!(r.headers.get("set-cookie").is_none());
    let mut on_y = Browser::new(&base, &y.set_id);
    on_y.cookie = format!("nmb_review={ann}");
    for path in ["", "/", "/items/1"] {
        assert_eq!(on_y.get(path).await.status, 401, "{path}");
    }
    assert_eq!(on_y.post(1, "verdict=correct", &[]).await.status, 401);
    // Y's own reviewer is fine there.
    let cy = Browser::enter(&base, &y.set_id, &y.tokens["cy"]).await;
    assert_eq!(cy.get("/items/1").await.status, 200);

    // No token, an empty or a made-up one, an unknown set.
    let none = Browser::new(&base, &f.set_id);
    for path in ["", "/", "/items/1", "?token=", "?token=not-a-token"] {
        let r = none.get(path).await;
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(r.headers["content-security-policy"], REVIEW_CSP);
        assert!(r.body.contains("not valid"), "{}", r.body);
    }
    assert_eq!(none.post(1, "verdict=correct", &[]).await.status, 401);
    assert_eq!(
        Browser::new(&base, "rv-nope")
            .get(&format!("?token={ann}"))
            .await
            .status,
        401
    );

    // Revoked: refused at once, the cookie it already has included.
    let b = Browser::enter(&base, &f.set_id, ann).await;
    let csrf = b.csrf(1).await;
    assert!(f.store.revoke_reviewer(&f.set_id, "ann").unwrap());
    assert_eq!(b.get("/items/1").await.status, 401);
    assert_eq!(
        b.post(1, &grade_form(&csrf, "correct", &[], "", ""), &[])
            .await
            .status,
        401
    );
    assert_eq!(
        Browser::new(&base, &f.set_id)
            .get(&format!("?token={ann}"))
            .await
            .status,
        401
    );
    assert!(history(&f, "ann", f.task_at("ann", 1)).is_empty());
}

#[tokio::test]
async fn with_a_viewer_token_reviewers_get_their_pages_and_no_viewer_page() {
    let f = review_fixture();
    let base = start(f.store.clone(), Some("viewer-secret")).await;
    let ann = &f.tokens["ann"];
    let b = Browser::enter(&base, &f.set_id, ann).await;
    let page = b.get("/items/1").await;
    assert_eq!(page.status, 200, "the review needs no viewer token");
    for path in ["/review.js", "/review.css"] {
        let r = send(client().get(format!("{base}{path}"))).await;
        assert_eq!(r.status, 200, "{path}");
    }

    // The reviewer's cookie, token as bearer or link: every viewer page says 401.
    let with = |path: &str| {
        client()
            .get(format!("{base}{path}"))
            .header("cookie", format!("{}; token={ann}", b.cookie))
    };
    let run = format!("/runs/{}", f.run_id);
    for path in [
        "/",
        run.as_str(),
        "/style.css",
        &format!("/images/{}", sha(&png(0))),
    ] {
        let r = send(with(path)).await;
        assert_eq!(r.status, 401, "{path}");
        assert!(!r.body.contains(&f.run_id) && !r.body.contains(DISPLAY));
    }
    // A path that starts like a review page but climbs out of it is no viewer page either (sent raw: an HTTP
    // client would resolve the dots itself).
    let raw = raw_get(&base, &format!("/review/../runs/{}", f.run_id), &b.cookie).await;
    assert!(raw.starts_with("HTTP/1.1 404"), "{raw}");
    assert!(!raw.contains(DISPLAY));
    let r = send(client().get(format!("{base}/")).bearer_auth(ann)).await;
    assert_eq!(r.status, 401);
    let r = send(client().get(format!("{base}/?token={ann}"))).await;
    assert_eq!(r.status, 401);
    assert_eq!(
        r.headers["content-security-policy"], CSP,
        "the viewer stays script-free"
    );
    // The viewer's own token still opens the viewer.
    let r = send(
        client()
            .get(format!("{base}{run}"))
            .bearer_auth("viewer-secret"),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-security-policy"], CSP);
}

#[tokio::test]
async fn review_pages_never_name_the_run_or_model_and_escape_what_models_wrote() {
    let f = review_fixture();
    let base = start(f.store.clone(), None).await;
    for reviewer in ["ann", "bob"] {
        let b = Browser::enter(&base, &f.set_id, &f.tokens[reviewer]).await;
        for p in 1..=f.lists[reviewer].len() as u32 {
            let page = b.get(&format!("/items/{p}")).await;
            assert_eq!(page.status, 200);
            assert_eq!(page.headers["content-security-policy"], REVIEW_CSP);
            let i = f.task_at(reviewer, p);
            for secret in [
                f.run_id.as_str(),
                MODEL,
                "secret-model",
                DISPLAY,
                "0.8765",
                "0.877",
                "ann",
                "bob",
            ] {
                assert!(
                    !page.body.contains(secret),
                    "{secret} on {reviewer}'s item {p}"
                );
            }
            assert!(
                page.body.contains(&format!("Question for {}", task(i))),
                "the question as the model got it"
            );
            assert!(
                page.body.contains("You are a neurologist."),
                "the instructions"
            );
            assert!(page
                .body
                .contains("<script src=\"/review.js\" defer></script>"));
            assert_eq!(
                page.body.matches("<script").count(),
                1,
                "only the one script"
            );
            if i == 3 {
                assert!(
                    !page.body.contains("<script>document") && !page.body.contains("<img src=x")
                );
                assert!(page
                    .body
                    .contains("&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"));
                assert!(page.body.contains("onerror=alert(1)&gt;"));
            }
            if i == 4 {
                assert!(page.body.contains("Step 2 of 2"));
                assert!(page.body.contains("first-step answer: a venous infarct"));
                assert!(page.body.contains("Follow-up: the venogram"));
                assert!(page.body.contains(&answer(4)));
                assert_eq!(
                    page.body.matches("first-step answer").count(),
                    1,
                    "each answer once"
                );
            }
            // The rubric's dimensions from min to max, with their anchors.
            assert!(page
                .body
                .contains("name=\"score.clinical_safety\" value=\"5\""));
            assert!(page.body.contains("name=\"score.overall\" value=\"0\""));
            assert!(page
                .body
                .contains("exactly the reference diagnosis or an accepted synonym"));
            assert!(page.body.contains("value=\"perceptual_failure\""));
        }
    }
    let js = send(client().get(format!("{base}/review.js"))).await;
    assert!(js.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(js.body.contains("keydown") && js.body.contains("fetch("));
}

/// Every answer of the fixture has a thinking. A set made without `--show-thinking` never puts it on a page;
/// a set made with it shows each step's thinking collapsed above its answer, escaped.
#[tokio::test]
async fn the_thinking_reaches_reviewers_only_when_their_set_shows_it() {
    let f = review_fixture();
    let shown = review_set(&f.store, &f.run_id, &["cy"], 0.0, true);
    let base = start(f.store.clone(), None).await;
    for reviewer in ["ann", "bob"] {
        let b = Browser::enter(&base, &f.set_id, &f.tokens[reviewer]).await;
        for p in 1..=f.lists[reviewer].len() as u32 {
            let page = b.get(&format!("/items/{p}")).await;
            assert_eq!(page.status, 200);
            assert!(
                !page.body.contains("Pondering") && !page.body.contains("class=\"thinking\""),
                "{reviewer}'s item {p} shows the thinking"
            );
        }
    }
    let b = Browser::enter(&base, &shown.set_id, &shown.tokens["cy"]).await;
    for p in 1..=TASKS as u32 {
        let page = b.get(&format!("/items/{p}")).await;
        assert_eq!(page.status, 200);
        let i = shown.task_at("cy", p);
        let block = |answer: &str| {
            let thought = thinking(answer);
            format!(
                "<h2 id=\"answer\">The answer</h2><details class=\"thinking\"><summary>thinking ({} words)\
                 </summary><pre class=\"thinking\">{}</pre></details><pre class=\"answer\">",
                thought.split_whitespace().count(),
                escaped(&thought)
            )
        };
        assert_eq!(
            page.body.matches(&block(&answer(i))).count(),
            1,
            "item {p}: {}",
            page.body
        );
        let steps = if i == 4 { 2 } else { 1 };
        assert_eq!(
            page.body.matches("<details class=\"thinking\">").count(),
            steps
        );
        assert_eq!(
            page.body.matches("<script").count(),
            1,
            "only the page's own script"
        );
        if i == 4 {
            let first = escaped(&thinking("first-step answer: a venous infarct"));
            assert!(page.body.contains(&first), "the first step's thinking");
        }
    }
}

/// `text` as the pages escape it.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[tokio::test]
async fn grade_posts_have_their_own_body_limit() {
    let f = review_fixture();
    let base = start(f.store.clone(), None).await;
    let b = Browser::enter(&base, &f.set_id, &f.tokens["ann"]).await;
    let csrf = b.csrf(1).await;
    // 3,000 four-byte characters: 36 KB percent-encoded, far past the viewer's 1 KiB, within the limit.
    let comment = "🧠".repeat(3_000);
    let r = b
        .post(1, &grade_form(&csrf, "correct", &[], "", &comment), &[])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(
        history(&f, "ann", f.task_at("ann", 1))[0]
            .grade
            .comment
            .as_deref(),
        Some(comment.as_str())
    );
    let huge = grade_form(&csrf, "correct", &[], "", &"x".repeat(200_000));
    let r = b.post(1, &huge, &[]).await;
    assert_eq!(r.status, 413);
    assert_eq!(history(&f, "ann", f.task_at("ann", 1)).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_pages_work_on_postgres_too() {
    // Skips with a message locally without PostgreSQL's binaries, fails under CI=true.
    let Some(pg) = tokio::task::spawn_blocking(nmb_test_support::postgres::cluster)
        .await
        .unwrap()
    else {
        return;
    };
    let url = pg.fresh_database();
    let f = tokio::task::spawn_blocking(move || {
        fill(tempfile::tempdir().unwrap(), Store::connect(&url).unwrap())
    })
    .await
    .unwrap();
    let base = start(f.store.clone(), None).await;
    let b = Browser::enter(&base, &f.set_id, &f.tokens["ann"]).await;
    assert_eq!(
        b.get("").await.location(),
        format!("/review/{}/items/1", f.set_id)
    );
    let csrf = b.csrf(1).await;
    for verdict in ["partly", "correct"] {
        let r = b
            .post(
                1,
                &grade_form(&csrf, verdict, &[("overall", "4")], "", "ok"),
                &[],
            )
            .await;
        assert_eq!(r.status, 303, "{}", r.body);
    }
    let f2 = f.store.clone();
    let (set, item) = (f.set_id.clone(), f.lists["ann"][0]);
    let h = tokio::task::spawn_blocking(move || f2.grade_history(&set, "ann", item).unwrap())
        .await
        .unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(
        b.get("").await.location(),
        format!("/review/{}/items/2", f.set_id)
    );
    let page = b.get("/items/1").await.body;
    assert!(page.contains("value=\"correct\" checked"));
}

/// Behind a TLS proxy the reviewer's cookie is `__Secure-nmb_review`, marked `Secure` and still scoped to the
/// set's path (which the `__Host-` prefix would forbid), and it opens the set as the plain one does.
#[tokio::test]
async fn behind_tls_the_reviewers_cookie_is_secure() {
    let f = review_fixture();
    let bound = nmb_serve::bind(&nmb_serve::ServeOptions {
        port: 0,
        behind_tls: true,
        ..nmb_serve::ServeOptions::default()
    })
    .await
    .unwrap();
    let base = bound.url().trim_end_matches('/').to_string();
    tokio::spawn(bound.run(f.store.clone()));
    let ann = &f.tokens["ann"];
    let r = Browser::new(&base, &f.set_id)
        .get(&format!("?token={ann}"))
        .await;
    let cookie = r.headers["set-cookie"].to_str().unwrap();
    let attributes: Vec<&str> = cookie.split("; ").collect();
    assert_eq!(attributes[0], format!("__Secure-nmb_review={ann}"));
    let path = format!("Path=/review/{}", f.set_id);
    for wanted in ["Secure", "HttpOnly", "SameSite=Strict", path.as_str()] {
        assert!(attributes.contains(&wanted), "{wanted} in {cookie}");
    }
    let b = Browser::enter(&base, &f.set_id, ann).await;
    let r = b.get("").await;
    assert_eq!(r.status, 303);
    assert_eq!(r.location(), format!("/review/{}/items/1", f.set_id));
}
