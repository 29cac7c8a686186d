//! Daily budgets per tier: a user over budget goes to the heuristic lane or waits for tomorrow,
//! and the requests planned in one step reserve their estimates so together they cannot pass it.

use chrono::Duration;
use memsift_core::config::OverBudget;
use memsift_engine::app::OVER_BUDGET_KEY;
use memsift_engine::pipeline::run_until_idle;
use memsift_sim::FaultConfig;
use memsift_store::testing::TestDb;

use crate::helpers::{TestApp, app_on, line};

async fn over_budget_after_one_batch(policy: OverBudget) -> (TestApp, memsift_engine::app::App) {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    test.import("first.jsonl", &line("ana", "c1", 0, "user", "I live in Lisbon.", true))
        .await
        .unwrap();
    run_until_idle(&test.app).await.unwrap();
    let spent = test.app.store.listing().cost_by_user_stage().await.unwrap();
    assert_eq!(spent.len(), 1);
    assert!(spent[0].cost_usd > 0.0, "the batch answer was priced: {spent:?}");
    // A budget that holds one more segment's reservation (a second segment's is the first's and a
    // few tokens more), but not beside what the first one spent today.
    let first = &test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap()[0];
    let first = test
        .app
        .store
        .listing()
        .request_detail(first.id.parse().unwrap())
        .await
        .unwrap();
    let mut config = test.app.config.clone();
    let budget = first.reserved_usd + first.cost_usd / 2.0;
    config.billing.daily_budget_usd.insert("standard".to_owned(), budget);
    config.billing.over_budget = policy;
    let app = app_on(&test.app.store, &test.clock, config, "budgeted");
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
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    let newest = requests.iter().max_by_key(|row| row.created_at).unwrap();
    assert_eq!((newest.lane.as_str(), newest.cost_usd), ("heuristic", 0.0));
    let detail = test
        .app
        .store
        .listing()
        .request_detail(newest.id.parse().unwrap())
        .await
        .unwrap();
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
        .listing()
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

/// Apps like `over_budget_after_one_batch`'s whose relationship classification also goes to the
/// provider's batch lane, with two memories it would classify: one with a budget below any
/// reservation (over today), and one with that app's budget, which holds one classification.
async fn stages_over_budget(policy: OverBudget) -> (TestApp, memsift_engine::app::App, memsift_engine::app::App) {
    let (test, app) = over_budget_after_one_batch(policy).await;
    let mut config = app.config.clone();
    let provider = config.llm["extraction_standard"].clone();
    config.llm.insert("relationship_standard".to_owned(), provider);
    let roomy = app_on(&test.app.store, &test.clock, config.clone(), "budgeted");
    config.billing.daily_budget_usd.insert("standard".to_owned(), 0.000_001);
    let app = app_on(&test.app.store, &test.clock, config, "budgeted");
    for text in [
        "Ana lives in Lisbon with her husband Tiago.",
        "Ana no longer lives in Lisbon with her husband Tiago.",
    ] {
        test.app.store.insert_test_memory("ana", text).await.unwrap();
    }
    (test, app, roomy)
}

#[tokio::test]
async fn a_user_over_budget_gets_post_processing_on_the_heuristic_lane_or_later() {
    use memsift_engine::pipeline::run_stage;
    use memsift_engine::stages::Stage;
    let (test, app, _) = stages_over_budget(OverBudget::Heuristic).await;
    let creates_before = test.sim().counters().creates;
    let run = run_stage(&app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    assert!(run.plan.n_requests > 0, "{run:?}");
    assert_eq!(test.sim().counters().creates, creates_before, "no provider batch");
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    let stage: Vec<_> = requests.iter().filter(|r| r.purpose == "relationship").collect();
    assert!(!stage.is_empty());
    assert!(
        stage.iter().all(|r| r.lane == "heuristic" && r.cost_usd == 0.0),
        "{stage:?}"
    );
    test.finish().await;

    // Deferred: nothing is planned today, and the memories stay new for tomorrow's run, whose
    // budget has room for a classification.
    let (test, app, roomy) = stages_over_budget(OverBudget::Defer).await;
    let run = run_stage(&app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!(run.plan.n_requests, 0, "{run:?}");
    test.advance(Duration::days(1));
    let tomorrow = run_stage(&roomy, Stage::Relationships, Some("ana"), true, false)
        .await
        .unwrap();
    assert!(tomorrow.plan.n_requests > 0, "{tomorrow:?}");
    test.finish().await;
}

/// Facts the heuristic rules extract, one segment each, all imported before one step plans them.
const FACTS: [&str; 5] = [
    "I live in Lisbon.",
    "I have a dog named Rex.",
    "I work at Fernwood Labs.",
    "I'm allergic to peanuts.",
    "My sister is called Marta.",
];

/// An app on the simulator's batch lane whose `standard` tier has `budget_usd` a day, with
/// `FACTS` imported for ana as five closed segments.
async fn five_segments_under(budget_usd: f64, policy: OverBudget) -> (TestApp, memsift_engine::app::App) {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    let mut config = test.app.config.clone();
    config
        .billing
        .daily_budget_usd
        .insert("standard".to_owned(), budget_usd);
    config.billing.over_budget = policy;
    let app = app_on(&test.app.store, &test.clock, config, "budgeted");
    let chat: String = FACTS
        .iter()
        .enumerate()
        .map(|(index, fact)| line("ana", &format!("c{index}"), index as i64 * 10, "user", fact, true))
        .collect();
    test.import("chat.jsonl", &chat).await.unwrap();
    (test, app)
}

/// What ana's requests of today cost and reserved, by lane and config key.
struct Ledger {
    spent_usd: f64,
    reserved_usd: f64,
    on_batch: usize,
    over_budget_heuristic: usize,
}

async fn ledger(test: &TestApp) -> Ledger {
    let mut ledger = Ledger {
        spent_usd: 0.0,
        reserved_usd: 0.0,
        on_batch: 0,
        over_budget_heuristic: 0,
    };
    for row in test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap()
    {
        let detail = test
            .app
            .store
            .listing()
            .request_detail(row.id.parse().unwrap())
            .await
            .unwrap();
        ledger.spent_usd += row.cost_usd;
        ledger.reserved_usd += detail.reserved_usd;
        ledger.on_batch += usize::from(row.lane == "batch");
        ledger.over_budget_heuristic += usize::from(detail.config_key == OVER_BUDGET_KEY);
        if row.lane == "batch" {
            assert!(
                row.cost_usd <= detail.reserved_usd,
                "an answer costs at most its reservation: {row:?} {detail:?}"
            );
        } else {
            assert_eq!((row.cost_usd, detail.reserved_usd), (0.0, 0.0), "{row:?}");
        }
    }
    ledger
}

#[tokio::test]
async fn segments_planned_in_one_step_never_spend_past_the_budget_and_the_rest_go_heuristic() {
    // Before reservations, every segment planned in one step saw the same spend (nothing yet) and
    // went to the batch lane: $0.006 spent against a $0.001 budget. Each chunk now reserves its
    // most (its input and max_tokens of output, batch-discounted) when planned.
    for budget in [0.025, 0.001] {
        let (test, app) = five_segments_under(budget, OverBudget::Heuristic).await;
        let first = memsift_engine::pipeline::run_once(&app).await.unwrap();
        assert_eq!(first.n_segments_planned, FACTS.len() as u64, "one step plans them all");
        let report = run_until_idle(&app).await.unwrap();
        assert_eq!(
            first.n_segments_extracted + report.n_segments_extracted,
            FACTS.len() as u64
        );
        let ledger = ledger(&test).await;
        let overshoot = (ledger.spent_usd - budget).max(0.0);
        println!(
            "spent ${:.6} (reserved ${:.6}) of a ${budget:.6} daily budget, overshoot ${overshoot:.6}",
            ledger.spent_usd, ledger.reserved_usd
        );
        assert_eq!(overshoot, 0.0);
        assert!(ledger.reserved_usd <= budget, "reservations never pass the budget");
        let expected_on_batch = if budget >= 0.02 { 2 } else { 0 };
        assert_eq!(ledger.on_batch, expected_on_batch, "{budget}");
        assert_eq!(ledger.over_budget_heuristic, FACTS.len() - expected_on_batch);
        test.finish().await;
    }
}

#[tokio::test]
async fn segments_planned_in_one_step_never_spend_past_the_budget_and_the_rest_wait() {
    let budget = 0.025;
    let (test, app) = five_segments_under(budget, OverBudget::Defer).await;
    let first = memsift_engine::pipeline::run_once(&app).await.unwrap();
    assert_eq!(first.n_segments_planned, FACTS.len() as u64);
    assert_eq!(
        first.n_requests_planned, 2,
        "two segments' reservations fit, three wait"
    );
    run_until_idle(&app).await.unwrap();
    let ledger = ledger(&test).await;
    assert!(ledger.spent_usd <= budget, "{}", ledger.spent_usd);
    assert_eq!((ledger.on_batch, ledger.over_budget_heuristic), (2, 0));
    let waiting = test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), Some("closed"), None)
        .await
        .unwrap();
    assert_eq!(waiting.len(), 3, "{waiting:?}");
    assert!(
        waiting.iter().all(|segment| segment.attempts == 0
            && segment
                .last_error
                .as_deref()
                .unwrap_or_default()
                .contains("daily budget")),
        "{waiting:?}"
    );
    test.finish().await;
}

#[tokio::test]
async fn a_budget_below_one_reservation_sends_every_segment_of_the_step_to_the_policy() {
    // $0.001 is less than one chunk's reservation: nothing is planned on the provider, and nothing
    // is spent, though nothing was spent before either.
    let (test, app) = five_segments_under(0.001, OverBudget::Defer).await;
    let step = memsift_engine::pipeline::run_once(&app).await.unwrap();
    assert_eq!(
        (step.n_segments_planned, step.n_requests_planned),
        (FACTS.len() as u64, 0)
    );
    assert_eq!(test.sim().counters().creates, 0, "no provider batch");
    assert!(
        test.app
            .store
            .listing()
            .list_requests(Some("ana"), None, None)
            .await
            .unwrap()
            .is_empty()
    );
    let waiting = test
        .app
        .store
        .listing()
        .list_segments(Some("ana"), Some("closed"), None)
        .await
        .unwrap();
    assert_eq!(waiting.len(), FACTS.len());
    test.finish().await;
}

/// ana's budgeted run after `warm_answers` single-fact segments of other users were answered by
/// the same model with no budget: her twenty segments, every other one stating all of `FACTS`
/// at once (an answer five times as long as the others), planned in one step.
async fn budgeted_after(warm_answers: usize, budget: f64) -> Ledger {
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    let warm: String = (0..warm_answers)
        .map(|index| line(&format!("w{index}"), "c", 0, "user", FACTS[index % FACTS.len()], true))
        .collect();
    if !warm.is_empty() {
        test.import("warm.jsonl", &warm).await.unwrap();
        run_until_idle(&test.app).await.unwrap();
    }
    let mut config = test.app.config.clone();
    config.billing.daily_budget_usd.insert("standard".to_owned(), budget);
    let app = app_on(&test.app.store, &test.clock, config, "budgeted");
    let all_facts = FACTS.join(" ");
    let chat: String = (0..20)
        .map(|index| {
            let text = if index % 2 == 0 {
                FACTS[index / 2 % FACTS.len()]
            } else {
                all_facts.as_str()
            };
            line("ana", &format!("a{index}"), 100 + index as i64, "user", text, true)
        })
        .collect();
    test.import("ana.jsonl", &chat).await.unwrap();
    let step = memsift_engine::pipeline::run_once(&app).await.unwrap();
    assert_eq!(step.n_segments_planned, 20, "one step plans them all");
    run_until_idle(&app).await.unwrap();
    let ledger = ledger(&test).await;
    test.finish().await;
    ledger
}

#[tokio::test]
async fn a_learned_output_allowance_spends_the_budget_without_passing_it() {
    // Before: every request reserved max_tokens (4096) of output for answers of about a hundred
    // tokens, so a budget sent one segment in ten to the provider and spent a tenth of it.
    // After 24 answers of the same purpose and model, each request is allowed (and reserves) the
    // 99th percentile of their output plus a quarter, and is sent with that as its max_tokens:
    // an answer that wants more is cut there, so none costs more than it reserved (`ledger`
    // checks every row), and the budget is filled to within one reservation.
    let budget = 0.012;
    let cold = budgeted_after(0, budget).await;
    let warm = budgeted_after(24, budget).await;
    for (name, ledger) in [("max_tokens", &cold), ("learned", &warm)] {
        println!(
            "{name}: {} of 20 segments on the provider, ${:.6} spent and ${:.6} reserved of ${budget}",
            ledger.on_batch, ledger.spent_usd, ledger.reserved_usd
        );
        assert!(ledger.spent_usd <= budget && ledger.reserved_usd <= budget);
        assert_eq!(ledger.on_batch + ledger.over_budget_heuristic, 20);
        assert!(
            ledger.over_budget_heuristic > 0,
            "the budget ran out, so the lower bound is tested"
        );
        let one_reservation = ledger.reserved_usd / ledger.on_batch as f64;
        assert!(
            budget - ledger.reserved_usd < 1.5 * one_reservation,
            "{name}: the budget is reserved to within about one reservation: ${} of ${budget}",
            ledger.reserved_usd
        );
    }
    assert!(cold.on_batch >= 1);
    assert!(
        warm.on_batch >= 5 * cold.on_batch,
        "{} vs {}",
        warm.on_batch,
        cold.on_batch
    );
    assert!(
        warm.spent_usd >= 0.5 * budget,
        "learned reservations are close to real cost: ${} spent of ${budget}",
        warm.spent_usd
    );
    assert!(
        cold.spent_usd < 0.2 * budget,
        "the old estimate left the budget unspent"
    );
}

#[tokio::test]
async fn the_review_backlog_is_priced_at_the_learned_allowance_once_reviews_are_answered() {
    // `postprocess review-backlog` once priced every review at max_tokens (8,192 output tokens,
    // about $0.04 a review) though reviews answer in a few dozen. Before twenty reviews are
    // answered it still can, and says so; after, it prices them at the allowance learned from
    // those answers, the one a budget would send them with.
    let test = TestApp::with_batch_sim(TestDb::sqlite().await, FaultConfig::default()).await;
    let mut config = test.app.config.clone();
    let provider = config.llm["extraction_standard"].clone();
    config
        .llm
        .insert("extraction_review_standard".to_owned(), provider.clone());
    let old: String = FACTS
        .iter()
        .enumerate()
        .map(|(index, fact)| line("ana", &format!("c{index}"), index as i64, "user", fact, true))
        .collect();
    test.import("old.jsonl", &old).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    config.postprocess.extraction_reviewer = true;
    let app = app_on(&test.app.store, &test.clock, config, "reviewer");
    let cold = memsift_engine::stages::review_backlog(&app, Some("ana"), true)
        .await
        .unwrap();
    assert!(cold.n_requests > 0, "{cold:?}");
    assert_eq!(
        (cold.estimate.learned, cold.estimate.output_tokens_each),
        (false, provider.max_tokens),
        "{cold:?}"
    );

    test.clock.advance(Duration::minutes(5));
    let warm: String = (0..24)
        .map(|index| line(&format!("w{index}"), "c", 100, "user", FACTS[index % FACTS.len()], true))
        .collect();
    test.import("warm.jsonl", &warm).await.unwrap();
    run_until_idle(&app).await.unwrap();
    let answered: Vec<i64> = test
        .app
        .store
        .listing()
        .list_requests(None, None, None)
        .await
        .unwrap()
        .into_iter()
        .filter(|request| request.purpose == "extraction_review" && request.status == "applied")
        .map(|request| request.output_tokens)
        .collect();
    assert!(answered.len() >= 20, "{} reviews answered", answered.len());
    let warm = memsift_engine::stages::review_backlog(&app, Some("ana"), true)
        .await
        .unwrap();
    assert_eq!(warm.n_requests, cold.n_requests);
    let longest = answered.iter().copied().max().unwrap();
    let priced = warm.estimate.output_tokens_each;
    println!(
        "{} reviews: ${:.6} at max_tokens = {}; ${:.6} at the learned {priced} tokens (longest answer {longest})",
        warm.n_requests, cold.estimate.usd, cold.estimate.output_tokens_each, warm.estimate.usd
    );
    assert!(warm.estimate.learned, "{warm:?}");
    assert!(
        i64::from(priced) >= longest && priced < provider.max_tokens,
        "priced at {priced}; reviews answered in at most {longest}"
    );
    assert!(
        warm.estimate.usd < cold.estimate.usd / 2.0,
        "{} vs {}",
        warm.estimate.usd,
        cold.estimate.usd
    );
    test.finish().await;
}
