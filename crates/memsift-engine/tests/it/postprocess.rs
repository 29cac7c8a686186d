//! The post-processing stages end to end: planned through the router, answered on the offline lane
//! or the simulator's batch lane, applied through the journaled store operations, capped, and
//! undone to the exact prior rows.

use memsift_core::config::Config;
use memsift_engine::pipeline::run_stage;
use memsift_engine::stages::Stage;
use memsift_sim::SimConfig;
use memsift_store::testing::TestDb;

use crate::helpers::TestApp;

/// Words that share nothing with each other or the test facts, for filler memories.
const FILLER: [&str; 40] = [
    "stamps",
    "shells",
    "coins",
    "kites",
    "maps",
    "clocks",
    "masks",
    "fans",
    "bells",
    "keys",
    "lamps",
    "mugs",
    "pins",
    "rugs",
    "hats",
    "vases",
    "dolls",
    "drums",
    "flags",
    "gloves",
    "jars",
    "knots",
    "lenses",
    "mirrors",
    "needles",
    "oars",
    "pipes",
    "quills",
    "ropes",
    "saddles",
    "tiles",
    "umbrellas",
    "violins",
    "whistles",
    "yoyos",
    "zithers",
    "anchors",
    "buttons",
    "candles",
    "dice",
];

/// Ana: forty unrelated memories (so a run may change 5 % of 44, rounded up: 3 of them), a pair
/// the offline judge calls a conflict, and a near-duplicate pair consolidation should merge.
async fn seed(test: &TestApp) -> memsift_core::UserId {
    let store = &test.app.store;
    let mut user = None;
    for word in FILLER {
        let (id, _) = store
            .insert_test_memory("ana", &format!("Ana collects {word}."))
            .await
            .unwrap();
        user = Some(id);
    }
    for text in [
        "Ana lives in Lisbon with her husband Tiago.",
        "Ana no longer lives in Lisbon with her husband Tiago.",
        "Ana has a grey cat named Miso.",
        "Ana has a grey cat named Miso!",
    ] {
        store.insert_test_memory("ana", text).await.unwrap();
    }
    user.unwrap()
}

#[tokio::test]
async fn stages_on_the_offline_lane_link_merge_within_the_cap_and_undo_exactly() {
    let test = TestApp::sqlite().await;
    let ana = seed(&test).await;
    let store = &test.app.store;

    // Relationships: the conflicting pair is linked; nothing is archived by a conflict.
    let run = run_stage(&test.app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    assert!(run.plan.n_requests > 0);
    assert!(
        run.after.links_by_kind.get("conflicts").copied().unwrap_or(0) >= 1,
        "{run:?}"
    );
    assert_eq!(run.after.active_memories, run.before.active_memories);
    // Every offline request says what answered it.
    for request in store.listing().list_requests(Some("ana"), None, None).await.unwrap() {
        let detail = store
            .listing()
            .request_detail(request.id.parse().unwrap())
            .await
            .unwrap();
        assert_eq!(
            detail.model.as_deref(),
            Some(memsift_routing::HEURISTIC_MODEL),
            "{request:?}"
        );
    }
    // Every new memory is covered once: a second run plans nothing.
    let again = run_stage(&test.app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!(again.plan.n_requests, 0);

    // A dry run of consolidation plans the cat pair and writes nothing.
    let n_requests = store.count_rows("llm_requests").await.unwrap();
    let dry = run_stage(&test.app, Stage::Consolidation, Some("ana"), true, true)
        .await
        .unwrap();
    assert_eq!(dry.plan.n_requests, 1, "{dry:?}");
    assert!(dry.plan.planned[0].contains("Miso"), "{:?}", dry.plan.planned);
    assert_eq!(store.count_rows("llm_requests").await.unwrap(), n_requests);

    // The real run: proposal, independent review, then the merge — two of 44 memories changed,
    // within the cap (5 % of 44, rounded up: 3).
    let before = store.user_rows(ana).await.unwrap();
    let run = run_stage(&test.app, Stage::Consolidation, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!(run.n_changes, 1, "{run:?}");
    assert_eq!(run.after.archived_memories - run.before.archived_memories, 2);
    assert_eq!(run.after.active_memories, run.before.active_memories - 1);
    let texts = test.memory_texts("ana").await;
    assert_eq!(
        texts.iter().filter(|text| text.contains("Miso")).count(),
        1,
        "{texts:?}"
    );

    // Undo of the consolidation puts back exactly the rows that were there.
    let operations = store.operation_ids("ana", "consolidate").await.unwrap();
    assert_eq!(operations.len(), 1);
    let undone = store
        .memories()
        .undo_operation("ana", operations[0], memsift_core::Clock::now(&test.clock))
        .await
        .unwrap();
    assert_eq!(undone.restored_memory_ids.len(), 2);
    assert_eq!(store.user_rows(ana).await.unwrap(), before);
    test.finish().await;
}

#[tokio::test]
async fn a_stage_run_never_changes_more_than_its_share_of_a_users_memories() {
    // Twenty near-duplicates of one fact: consolidation's per-run cap counts clusters (5 % of 20
    // rounds up to one), so one cluster of at most 5 is merged per run and the rest wait.
    let test = TestApp::sqlite().await;
    for index in 0..20 {
        let text = format!("Ana has a grey cat named Miso{}", "!".repeat(index + 1));
        test.app.store.insert_test_memory("ana", &text).await.unwrap();
    }
    let run = run_stage(&test.app, Stage::Consolidation, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!(run.plan.n_requests, 1, "{run:?}");
    assert!(run.plan.n_left_by_cap >= 1, "{run:?}");
    assert!(run.after.active_memories >= 16, "{run:?}");
    test.finish().await;
}

/// The default configuration with every stage purpose on Anthropic's batch lane at `base_url`.
fn stages_on_batch(base_url: &str, key_file: &std::path::Path) -> Config {
    std::fs::write(key_file, "test-key").unwrap();
    let mut overlay = "[embeddings]\nbackend = \"hashing\"\n\n[batch]\npack_max_wait_secs = 0\n\n".to_owned();
    for purpose in ["relationship", "consolidation", "consolidation_review"] {
        overlay.push_str(&format!(
            "[llm.{purpose}_standard]\nprovider = \"anthropic\"\nendpoint = \"{base_url}\"\nmodel = \"claude-haiku-4-5\"\n\
             api_key_file = \"{}\"\nlane = \"batch\"\nmax_tokens = 2048\n\n",
            key_file.display()
        ));
    }
    Config::from_layers(Some(("test overlay", &overlay))).unwrap()
}

#[tokio::test]
async fn stage_requests_go_through_the_batch_coordinator_like_extraction() {
    let db = TestDb::postgres().await;
    let sim_config = SimConfig::from_cli("heuristic", None).unwrap();
    let test = TestApp::on_sim(db, sim_config, |sim, key| stages_on_batch(&sim.base_url, key)).await;
    seed(&test).await;
    let run = run_stage(&test.app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    assert!(
        run.after.links_by_kind.get("conflicts").copied().unwrap_or(0) >= 1,
        "{run:?}"
    );
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    let relationship: Vec<_> = requests.iter().filter(|r| r.purpose == "relationship").collect();
    assert!(!relationship.is_empty());
    assert!(
        relationship.iter().all(|r| r.lane == "batch" && r.status == "applied"),
        "{relationship:?}"
    );
    // Consolidation's two requests (proposal, then review) both go through batches.
    let run = run_stage(&test.app, Stage::Consolidation, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!(run.n_changes, 1, "{run:?}");
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    for purpose in ["consolidation", "consolidation_review"] {
        assert_eq!(
            requests
                .iter()
                .filter(|r| r.purpose == purpose && r.lane == "batch" && r.status == "applied")
                .count(),
            1,
            "{purpose}"
        );
    }
    test.finish().await;
}

#[tokio::test]
async fn refinement_entity_gc_and_scoring_work_on_the_offline_lane() {
    // In the reference pipeline refinement never ran, entity merges could not succeed, and scoring saw no
    // reads and no links. Here each one changes the store, journaled.
    let test = TestApp::postgres().await;
    let ana = seed(&test).await;
    let store = &test.app.store;
    let now = memsift_core::Clock::now(&test.clock);
    let long = "Ana basically really likes to cook very spicy Thai curries on Sunday evenings with Tiago.";
    let (_, wordy) = store.insert_test_memory("ana", long).await.unwrap();
    store
        .set_test_memory_reads(wordy, 3, now - chrono::Duration::days(10))
        .await
        .unwrap();
    let run = run_stage(&test.app, Stage::Refinement, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!((run.plan.n_requests, run.n_changes), (1, 1), "{run:?}");
    let texts = test.memory_texts("ana").await;
    let refined: Vec<&String> = texts.iter().filter(|text| text.contains("Thai curries")).collect();
    assert_eq!(refined.len(), 1, "{texts:?}");
    assert!(
        refined[0].len() < long.len() && !refined[0].contains("basically"),
        "{refined:?}"
    );
    assert_eq!(store.operation_ids("ana", "refine").await.unwrap().len(), 1);

    // Two dormant entities naming one person: one is merged into the other, joins and all.
    let rows = store.user_rows(ana).await.unwrap();
    let ids: Vec<memsift_core::MemoryId> = rows
        .memories
        .iter()
        .filter(|m| m["archived_at"].is_null())
        .take(3)
        .map(|m| memsift_core::MemoryId::parse(m["id"].as_str().unwrap()).unwrap())
        .collect();
    let long_ago = now - chrono::Duration::days(60);
    let short = store
        .insert_test_entity(ana, "Tiago", "person", &ids[..2], long_ago)
        .await
        .unwrap();
    let full = store
        .insert_test_entity(ana, "Tiago Silva", "person", &ids[2..], long_ago)
        .await
        .unwrap();
    let run = run_stage(&test.app, Stage::EntityGc, Some("ana"), false, true)
        .await
        .unwrap();
    assert_eq!(run.plan.n_requests, 2, "{run:?}");
    assert_eq!(run.after.active_entities, run.before.active_entities - 1, "{run:?}");
    let rows = store.user_rows(ana).await.unwrap();
    let survivor = if rows
        .entities
        .iter()
        .any(|e| e["id"] == short && e["archived_at"].is_null())
    {
        &short
    } else {
        &full
    };
    assert_eq!(rows.joins.iter().filter(|(_, entity)| entity == survivor).count(), 3);
    assert_eq!(store.operation_ids("ana", "entity_merge").await.unwrap().len(), 1);

    // Scoring sees links and reads: after relationships link the Lisbon pair, a linked memory
    // outranks an unlinked one written at the same moment and read as often.
    run_stage(&test.app, Stage::Relationships, Some("ana"), false, true)
        .await
        .unwrap();
    memsift_engine::pipeline::score(&test.app).await.unwrap();
    let rows = store.user_rows(ana).await.unwrap();
    let importance = |needle: &str| {
        rows.memories
            .iter()
            .find(|m| m["text"].as_str().unwrap().starts_with(needle))
            .unwrap()["importance"]
            .as_f64()
            .unwrap()
    };
    assert!(
        importance("Ana no longer lives in Lisbon") > importance("Ana collects stamps"),
        "linked {} vs unlinked {}",
        importance("Ana no longer lives in Lisbon"),
        importance("Ana collects stamps")
    );
    test.finish().await;
}

#[tokio::test]
async fn the_extraction_reviewer_reviews_every_new_memory_and_only_narrows() {
    let mut test = TestApp::sqlite().await;
    let mut config = test.app.config.clone();
    config.postprocess.extraction_reviewer = true;
    test.app = crate::helpers::app_on(&test.app.store, &test.clock, config, "reviewer");
    let chat = [
        crate::helpers::line(
            "ana",
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            false,
        ),
        crate::helpers::line("ana", "c1", 1, "assistant", "Lovely.", true),
        crate::helpers::line(
            "ana",
            "c2",
            200,
            "user",
            "I'm allergic to peanuts and I work at Fernwood Labs.",
            true,
        ),
    ]
    .concat();
    test.import("chat.jsonl", &chat).await.unwrap();
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let store = &test.app.store;
    let ana = store.listing().user_id("ana").await.unwrap().unwrap();
    let texts_after = test.memory_texts("ana").await;
    assert!(!texts_after.is_empty());
    // One review per memory, all applied.
    let requests = store.listing().list_requests(Some("ana"), None, None).await.unwrap();
    let reviews: Vec<_> = requests.iter().filter(|r| r.purpose == "extraction_review").collect();
    assert_eq!(reviews.len(), texts_after.len(), "{requests:?}");
    assert!(reviews.iter().all(|r| r.status == "applied"));
    // The offline reviewer caps confidence at 0.9 and keeps every text: each narrowing journaled
    // the higher confidence it replaced, and nothing was widened.
    let rows = store.user_rows(ana).await.unwrap();
    assert!(
        rows.memories.iter().all(|m| m["confidence"].as_f64().unwrap() <= 0.9),
        "{rows:?}"
    );
    for operation in store.operation_ids("ana", "review_narrow").await.unwrap() {
        let undone = store
            .memories()
            .undo_operation("ana", operation, memsift_core::Clock::now(&test.clock))
            .await
            .unwrap();
        let restored = store.user_rows(ana).await.unwrap();
        let memory = restored.memories.iter().find(|m| m["id"] == undone.memory_id).unwrap();
        assert!(memory["confidence"].as_f64().unwrap() > 0.9, "{memory:?}");
    }
    // A second step plans no second review.
    let again = memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    assert_eq!(again.n_requests_planned, 0);
    test.finish().await;
}

#[tokio::test]
async fn the_extraction_reviewers_narrowed_text_is_applied_for_a_user_with_one_memory() {
    // The review request carried no run cap, so its cap was 0 and every narrowed text was refused.
    // Each review is now a run of its own that may change its one memory, however few the user has.
    use memsift_sim::{ResponderReply, ScriptedResponder};
    let script = ScriptedResponder::from_fn(|request| {
        if request.user_text.contains("\"task\":\"extraction_review\"") {
            return ResponderReply::Text(
                r#"{"text":"The user lives in Lisbon.","confidence":0.4,"expires_at":"2026-06-01T00:00:00Z"}"#
                    .to_owned(),
            );
        }
        let label = request.turns.first().map(|turn| turn.label.clone()).unwrap_or_default();
        ResponderReply::Text(
            serde_json::json!([{"text": "The user lives in Lisbon with a cat named Miso.", "evidence_turns": [label]}])
                .to_string(),
        )
    });
    let db = TestDb::sqlite().await;
    let sim_config = SimConfig::new(std::sync::Arc::new(script));
    let test = TestApp::on_sim(db, sim_config, |sim, key_file| {
        let mut config = crate::helpers::batch_config(&sim.base_url, key_file);
        let provider = config.llm["extraction_standard"].clone();
        config.llm.insert("extraction_review_standard".to_owned(), provider);
        config.postprocess.extraction_reviewer = true;
        config
    })
    .await;
    let chat = crate::helpers::line("ana", "c1", 0, "user", "I live in Lisbon with my cat Miso.", true);
    test.import("chat.jsonl", &chat).await.unwrap();
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();

    assert_eq!(test.memory_texts("ana").await, ["The user lives in Lisbon."]);
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    let reviews: Vec<_> = requests.iter().filter(|r| r.purpose == "extraction_review").collect();
    assert_eq!(reviews.len(), 1, "{requests:?}");
    assert_eq!(
        (reviews[0].lane.as_str(), reviews[0].status.as_str()),
        ("batch", "applied")
    );
    let operations = test.app.store.operation_ids("ana", "review").await.unwrap();
    assert_eq!(operations.len(), 1, "the narrowing is one journaled change");
    // The shorter text carries the reviewer's lower confidence and earlier expiry, not the
    // original's (0.9 and none): a narrowing is applied whole.
    let ana = test.app.store.listing().user_id("ana").await.unwrap().unwrap();
    let rows = test.app.store.user_rows(ana).await.unwrap();
    let current = rows.memories.iter().find(|m| m["archived_at"].is_null()).unwrap();
    assert_eq!(current["confidence"].as_f64(), Some(0.4), "{current:?}");
    assert!(
        current["expires_at"]
            .as_str()
            .is_some_and(|at| at.starts_with("2026-06-01")),
        "{current:?}"
    );
    test.finish().await;
}

#[tokio::test]
async fn switching_the_reviewer_on_reviews_new_memories_only_and_the_backlog_on_request() {
    // Turning the reviewer on once sent a paid review of every old memory at once. It now reviews
    // what extraction writes after it was switched on; the backlog waits for an explicit command,
    // which counts and prices it first and plans only when told to.
    let mut test = TestApp::sqlite().await;
    let line = |conversation: &str, text: &str| crate::helpers::line("ana", conversation, 0, "user", text, true);
    test.import("old.jsonl", &line("c1", "I live in Lisbon and I have a dog named Rex."))
        .await
        .unwrap();
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let old = test.memory_texts("ana").await;
    assert!(!old.is_empty());

    let mut config = test.app.config.clone();
    config.postprocess.extraction_reviewer = true;
    test.app = crate::helpers::app_on(&test.app.store, &test.clock, config, "reviewer");
    test.clock.advance(chrono::Duration::minutes(5));
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let reviews =
        |requests: &[memsift_store::RequestRow]| requests.iter().filter(|r| r.purpose == "extraction_review").count();
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    assert_eq!(reviews(&requests), 0, "switching on reviews nothing already stored");

    test.clock.advance(chrono::Duration::minutes(5));
    test.import(
        "new.jsonl",
        &line("c2", "I'm allergic to peanuts and I work at Fernwood Labs."),
    )
    .await
    .unwrap();
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    let n_new = test.memory_texts("ana").await.len() - old.len();
    assert!(n_new > 0);
    assert_eq!(
        reviews(&requests),
        n_new,
        "each memory written after the switch is reviewed"
    );

    let plan = memsift_engine::stages::review_backlog(&test.app, Some("ana"), true)
        .await
        .unwrap();
    assert_eq!((plan.n_memories, plan.n_requests), (old.len() as u64, old.len() as u64));
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    assert_eq!(reviews(&requests), n_new, "a plan-only backlog writes nothing");
    let plan = memsift_engine::stages::review_backlog(&test.app, Some("ana"), false)
        .await
        .unwrap();
    assert_eq!(plan.n_requests, old.len() as u64);
    memsift_engine::pipeline::run_until_idle(&test.app).await.unwrap();
    let requests = test
        .app
        .store
        .listing()
        .list_requests(Some("ana"), None, None)
        .await
        .unwrap();
    assert_eq!(reviews(&requests), n_new + old.len());
    test.finish().await;
}

#[tokio::test]
async fn a_cluster_the_judge_keeps_is_not_proposed_again_until_one_of_its_memories_changes() {
    // A kept cluster was proposed again on every run, a paid request each time on a provider
    // judge, and it took the place under the per-run cap that another cluster could have had.
    // Kept by the proposal ("keep"), or by the review that rejected a merge: either is remembered.
    for reviewer_rejects in [false, true] {
        let script = memsift_sim::ScriptedResponder::from_fn(move |request| {
            let answer = if request.user_text.contains("consolidation_review") {
                r#"{"approved": false, "reasoning": "two different cats"}"#
            } else if reviewer_rejects {
                r#"{"action": "merge", "text": "Ana has a grey cat named Miso.", "reasoning": "same"}"#
            } else {
                r#"{"action": "keep", "reasoning": "two different cats"}"#
            };
            memsift_sim::ResponderReply::Text(answer.to_owned())
        });
        let sim_config = SimConfig::new(std::sync::Arc::new(script));
        let test = TestApp::on_sim(TestDb::sqlite().await, sim_config, |sim, key| {
            stages_on_batch(&sim.base_url, key)
        })
        .await;
        let store = &test.app.store;
        let text = "Ana has a grey cat named Miso who sleeps on the sofa all day";
        store.insert_test_memory("ana", &format!("{text}.")).await.unwrap();
        let (_, second) = store.insert_test_memory("ana", &format!("{text}!")).await.unwrap();
        let consolidate = async || {
            run_stage(&test.app, Stage::Consolidation, Some("ana"), false, true)
                .await
                .unwrap()
        };
        let first = consolidate().await;
        assert_eq!((first.plan.n_requests, first.n_changes), (1, 0), "{first:?}");
        let paid = test.sim().counters().per_endpoint["anthropic.batches.create"];
        for _ in 0..2 {
            let again = consolidate().await;
            assert_eq!((again.plan.n_requests, again.plan.n_kept), (0, 1), "{again:?}");
        }
        assert_eq!(
            test.sim().counters().per_endpoint["anthropic.batches.create"],
            paid,
            "nothing more was sent"
        );
        // One member changes (a new memory replaces it): the set is a new question.
        store
            .memories()
            .revise_memory(
                "ana",
                second,
                &memsift_store::Revision::Supersede {
                    content: format!("{text} long."),
                },
                "she said so",
                memsift_core::Clock::now(&test.clock),
            )
            .await
            .unwrap();
        let changed = consolidate().await;
        assert_eq!((changed.plan.n_requests, changed.plan.n_kept), (1, 0), "{changed:?}");
        test.finish().await;
    }
}
