//! Daily budgets per tier: a user over budget goes to the heuristic lane or waits for tomorrow.

use chrono::Duration;
use memsift::budget::OVER_BUDGET_KEY;
use memsift::pipeline::run_until_idle;
use memsift_core::config::OverBudget;
use memsift_sim::FaultConfig;
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, app_on, line};

async fn over_budget_after_one_batch(policy: OverBudget) -> (TestApp, memsift::app::App) {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    let mut config = test.app.config.clone();
    // Any real answer costs more than this, so the first segment spends the whole day's budget.
    config.billing.daily_budget_usd.insert("standard".to_owned(), 0.000_001);
    config.billing.over_budget = policy;
    let app = app_on(&test.app.store, &test.clock, config, "budgeted");
    test.import("first.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    run_until_idle(&app).await.unwrap();
    let spent = test.app.store.cost_by_user_stage().await.unwrap();
    assert_eq!(spent.len(), 1);
    assert!(spent[0].cost_usd > 0.000_001, "the batch answer was priced: {spent:?}");
    test.import(
        "second.jsonl",
        &line("ana", "c2", 10, "user", "I have a dog named Rex.", true),
    )
    .await
    .unwrap();
    (test, app)
}

#[tokio::test]
async fn a_user_over_budget_is_extracted_on_the_heuristic_lane_for_free() {
    let (test, app) = over_budget_after_one_batch(OverBudget::Heuristic).await;
    let creates_before = test.sim().counters().creates;
    let report = run_until_idle(&app).await.unwrap();
    assert_eq!((report.n_segments_extracted, report.n_memories), (1, 1));
    assert_eq!(
        test.sim().counters().creates,
        creates_before,
        "no provider batch for an over-budget user"
    );
    let requests = test.app.store.list_requests(Some("ana"), None, None).await.unwrap();
    let newest = requests.iter().max_by_key(|row| row.created_at).unwrap();
    assert_eq!((newest.lane.as_str(), newest.cost_usd), ("heuristic", 0.0));
    let detail = test.app.store.request_detail(newest.id.parse().unwrap()).await.unwrap();
    assert_eq!(detail.config_key, OVER_BUDGET_KEY);
    test.finish().await;
}

#[tokio::test]
async fn a_user_over_budget_waits_for_the_next_day_without_spending_an_attempt() {
    let (test, app) = over_budget_after_one_batch(OverBudget::Defer).await;
    let report = run_until_idle(&app).await.unwrap();
    assert_eq!(report.n_segments_extracted, 0);
    let waiting = test
        .app
        .store
        .list_segments(Some("ana"), Some("closed"), None)
        .await
        .unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].attempts, 0, "deferral is not a failed attempt");
    assert!(
        waiting[0]
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("daily budget"),
        "{waiting:?}"
    );
    // Tomorrow the budget is fresh and the segment goes through its tier's own lane.
    test.advance(Duration::days(1));
    let next_day = run_until_idle(&app).await.unwrap();
    assert_eq!(
        (next_day.n_segments_extracted, next_day.batch.n_batches_created),
        (1, 1)
    );
    test.finish().await;
}

/// An app like `over_budget_after_one_batch`'s whose relationship classification also goes to the
/// provider's batch lane, with two memories it would classify.
async fn stages_over_budget(policy: OverBudget) -> (TestApp, memsift::app::App) {
    let (test, app) = over_budget_after_one_batch(policy).await;
    let mut config = app.config.clone();
    let provider = config.llm["extraction_standard"].clone();
    config.llm.insert("relationship_standard".to_owned(), provider);
    let app = app_on(&test.app.store, &test.clock, config, "budgeted");
    for text in [
        "Ana lives in Lisbon with her husband Tiago.",
        "Ana no longer lives in Lisbon with her husband Tiago.",
    ] {
        test.app.store.insert_test_memory("ana", text).await.unwrap();
    }
    (test, app)
}

#[tokio::test]
async fn a_user_over_budget_gets_post_processing_on_the_heuristic_lane_or_later() {
    use memsift::pipeline::run_stage;
    use memsift::stages::Stage;
    let (test, app) = stages_over_budget(OverBudget::Heuristic).await;
    let creates_before = test.sim().counters().creates;
    let run = run_stage(&app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    assert!(run.plan.n_requests > 0, "{run:?}");
    assert_eq!(test.sim().counters().creates, creates_before, "no provider batch");
    let requests = test.app.store.list_requests(Some("ana"), None, None).await.unwrap();
    let stage: Vec<_> = requests.iter().filter(|r| r.purpose == "relationship").collect();
    assert!(!stage.is_empty());
    assert!(
        stage.iter().all(|r| r.lane == "heuristic" && r.cost_usd == 0.0),
        "{stage:?}"
    );
    test.finish().await;

    // Deferred: nothing is planned today, and the memories stay new for tomorrow's run.
    let (test, app) = stages_over_budget(OverBudget::Defer).await;
    let run = run_stage(&app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!(run.plan.n_requests, 0, "{run:?}");
    test.advance(Duration::days(1));
    let tomorrow = run_stage(&app, Stage::Relationships, Some("ana"), true, false)
        .await
        .unwrap();
    assert!(tomorrow.plan.n_requests > 0, "{tomorrow:?}");
    test.finish().await;
}
