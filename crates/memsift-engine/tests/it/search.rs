//! The read side end to end: memories extracted by the pipeline come back with their evidence, a
//! turn no memory cites is found with `include_turns`, budgets and time windows hold, links are
//! followed, the lexical index follows every write and erasure, and nothing of another user is
//! ever read.

use chrono::Duration;
use memsift_engine::held::{MemoryWords, TurnVectors, TurnWords};
use memsift_engine::pipeline::run_until_idle;
use memsift_engine::search::{
    Key, SearchAnswer, SearchError, SearchRequest, Signal, Signals, Stage, Stages, Weights, search, speaker_names,
};
use memsift_store::Revision;

use crate::helpers::{TestApp, line, t0};

fn conversations() -> String {
    [
        line(
            "ana",
            "c1",
            0,
            "user",
            "I live in Lisbon and I have a dog named Rex.",
            false,
        ),
        line("ana", "c1", 1, "assistant", "Rex is a lovely name for a dog.", false),
        line(
            "ana",
            "c1",
            2,
            "user",
            "Do you know any good ramen places near the harbour?",
            true,
        ),
        line(
            "bo",
            "c2",
            0,
            "user",
            "I live in Oslo and I have a cat named Rex.",
            false,
        ),
        line("bo", "c2", 1, "user", "Where can I eat ramen by the harbour?", true),
    ]
    .concat()
}

fn request(user: &str, query: &str) -> SearchRequest {
    SearchRequest::new(user, query)
}

/// A budget keeps the answer within it, counting what is returned: texts and evidence turns.
async fn a_budget_counts_what_is_returned(test: &TestApp) {
    let budget = 40;
    let packed = search(
        &test.app,
        &SearchRequest {
            budget_tokens: Some(budget),
            include_turns: true,
            ..request("ana", "Lisbon dog ramen")
        },
    )
    .await
    .unwrap();
    // Every text the answer carries, one after the other.
    let returned: usize = packed
        .results
        .iter()
        .flat_map(|hit| std::iter::once(&hit.text).chain(hit.evidence.iter().map(|turn| &turn.text)))
        .map(|text| memsift_tokens::count_tokens(text))
        .sum();
    assert!(packed.n_tokens <= budget && !packed.results.is_empty(), "{packed:?}");
    assert_eq!(packed.n_tokens, returned, "what is returned, evidence included");
}

/// A time the question names lifts what is from then, and says so; another day, or the stage
/// turned off, lifts nothing; the lift needs no date list.
async fn a_named_time_lifts_what_is_from_then(test: &TestApp) {
    // A time the question names lifts what is from then, and says so; another day lifts nothing.
    // Off, both the date list and the lift after fusion.
    let dated = |query: &str, dates: bool| SearchRequest {
        signals: Signals {
            dates,
            stages: if dates {
                Stages::all()
            } else {
                Stages::all().without(Stage::DateLift)
            },
            ..Signals::default()
        },
        ..request("ana", query)
    };
    let then = search(&test.app, &dated("Where did she live on 1 March 2026?", true))
        .await
        .unwrap();
    assert!(!then.results.is_empty());
    assert!(
        then.results
            .iter()
            .all(|hit| hit.parts.in_range == Some(1.0 + Weights::default().date_boost)),
        "{:?}",
        then.results
    );
    for (query, dates) in [
        ("Where did she live on 2 March 2026?", true),
        ("Where did she live on 1 March 2026?", false),
    ] {
        let answer = search(&test.app, &dated(query, dates)).await.unwrap();
        assert!(
            answer.results.iter().all(|hit| hit.parts.in_range.is_none()),
            "{query}: {answer:?}"
        );
    }
    // The lift alone: results from then are lifted, and no date list ranked them.
    let lift_only = SearchRequest {
        signals: Signals {
            dates: false,
            ..Signals::default()
        },
        ..request("ana", "Where did she live on 1 March 2026?")
    };
    let lifted = search(&test.app, &lift_only).await.unwrap();
    assert!(!lifted.results.is_empty());
    for hit in &lifted.results {
        assert!(hit.parts.in_range.is_some(), "{hit:?}");
        assert!(
            hit.parts.signals.iter().all(|(signal, _, _)| *signal != Signal::Date),
            "{hit:?}"
        );
    }
}

async fn results_are_answered_with_their_evidence_and_stay_with_their_user(test: TestApp) {
    test.import("chat.jsonl", &conversations()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    let answer = search(&test.app, &request("ana", "Where does she live?"))
        .await
        .unwrap();
    assert!(!answer.results.is_empty());
    let first = &answer.results[0];
    assert!(first.text.contains("Lisbon"), "{:?}", answer.results);
    assert!(matches!(first.key, Key::Memory(_)));
    let evidence = &first.evidence[0];
    assert_eq!(
        (evidence.role.as_str(), evidence.at, evidence.text.as_str()),
        ("user", t0(), "I live in Lisbon and I have a dog named Rex.")
    );
    assert!(!first.parts.signals.is_empty() && first.parts.fused > 0.0);
    for hit in &answer.results {
        assert!(
            !hit.text.contains("Oslo") && !hit.text.contains("cat"),
            "bo's {hit:?} in ana's answer"
        );
        assert!(hit.evidence.iter().all(|turn| !turn.text.contains("Oslo")));
    }

    // The ramen question is no memory; only include_turns finds it, as a turn, and only ana's.
    let without = search(&test.app, &request("ana", "ramen harbour")).await.unwrap();
    assert!(without.results.iter().all(|hit| matches!(hit.key, Key::Memory(_))));
    let with = search(
        &test.app,
        &SearchRequest {
            include_turns: true,
            ..request("ana", "ramen harbour")
        },
    )
    .await
    .unwrap();
    let turns: Vec<&str> = with
        .results
        .iter()
        .filter(|hit| matches!(hit.key, Key::Turn(_)))
        .map(|hit| hit.text.as_str())
        .collect();
    // The turn vectors rank every uncited turn of hers; the one that says it comes first.
    assert_eq!(
        turns.first(),
        Some(&"Do you know any good ramen places near the harbour?")
    );
    assert!(
        turns.iter().all(|turn| !turn.contains("Oslo") && !turn.contains("cat")),
        "{turns:?}"
    );

    a_budget_counts_what_is_returned(&test).await;
    // A time window keeps what is in it.
    let later = SearchRequest {
        since: Some(t0() + Duration::days(1)),
        ..request("ana", "Where does she live?")
    };
    assert!(search(&test.app, &later).await.unwrap().results.is_empty());
    let earlier = SearchRequest {
        until: Some(t0() + Duration::days(1)),
        ..request("ana", "Where does she live?")
    };
    assert!(!search(&test.app, &earlier).await.unwrap().results.is_empty());

    a_named_time_lifts_what_is_from_then(&test).await;

    // Nobody's memories for a user who does not exist; bad requests say what is wrong.
    assert!(
        search(&test.app, &request("nobody", "Lisbon"))
            .await
            .unwrap()
            .results
            .is_empty()
    );
    let app = &test.app;
    let error = |request: SearchRequest| async move {
        search(app, &request)
            .await
            .unwrap_err()
            .downcast::<SearchError>()
            .unwrap()
    };
    assert!(matches!(error(request("ana", "  ")).await, SearchError::EmptyQuery));
    assert!(matches!(
        error(SearchRequest {
            k: 0,
            ..request("ana", "Lisbon")
        })
        .await,
        SearchError::BadK(0)
    ));
    assert!(matches!(
        error(SearchRequest {
            since: Some(t0()),
            until: Some(t0()),
            ..request("ana", "Lisbon")
        })
        .await,
        SearchError::EmptyRange
    ));
    test.finish().await;
}

#[tokio::test]
async fn results_are_answered_with_their_evidence_and_stay_with_their_user_on_sqlite() {
    results_are_answered_with_their_evidence_and_stay_with_their_user(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn results_are_answered_with_their_evidence_and_stay_with_their_user_on_postgres() {
    results_are_answered_with_their_evidence_and_stay_with_their_user(TestApp::postgres().await).await;
}

/// The turn just before the best result is brought along as near it, and says so; a factor of 0
/// brings nothing.
async fn what_was_said_next_to_a_result_comes_along_and_says_so(test: TestApp) {
    test.import("chat.jsonl", &conversations()).await.unwrap();
    run_until_idle(&test.app).await.unwrap();
    let with = search(
        &test.app,
        &SearchRequest {
            include_turns: true,
            ..request("ana", "ramen harbour")
        },
    )
    .await
    .unwrap();
    let near_ramen = with
        .results
        .iter()
        .find(|hit| {
            hit.evidence
                .iter()
                .any(|turn| turn.text == "Rex is a lovely name for a dog.")
        })
        .expect("the turn before the ramen question is among the results");
    assert!(near_ramen.parts.from_nearby > 0.0, "{:?}", near_ramen.parts);
    let nearby_off = search(
        &test.app,
        &SearchRequest {
            include_turns: true,
            weights: Some(Weights {
                nearby_factor: 0.0,
                ..Weights::default()
            }),
            ..request("ana", "ramen harbour")
        },
    )
    .await
    .unwrap();
    assert!(nearby_off.results.iter().all(|hit| hit.parts.from_nearby == 0.0));
    test.finish().await;
}

#[tokio::test]
async fn what_was_said_next_to_a_result_comes_along_and_says_so_on_sqlite() {
    what_was_said_next_to_a_result_comes_along_and_says_so(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn what_was_said_next_to_a_result_comes_along_and_says_so_on_postgres() {
    what_was_said_next_to_a_result_comes_along_and_says_so(TestApp::postgres().await).await;
}

#[tokio::test]
async fn a_confident_link_brings_its_memory_along_and_says_so() {
    let test = TestApp::sqlite().await;
    let store = &test.app.store;
    let (ana, moved) = store
        .insert_test_memory("ana", "Ana moved to Porto in March.")
        .await
        .unwrap();
    let (_, job) = store
        .insert_test_memory("ana", "Ana started a job at a shipyard.")
        .await
        .unwrap();
    store.insert_test_link(moved, job, "motivated_by", t0()).await.unwrap();
    let answer = search(&test.app, &request("ana", "Porto move")).await.unwrap();
    let reached = answer
        .results
        .iter()
        .find(|hit| hit.key == Key::Memory(job))
        .expect("the linked memory is in the answer");
    assert_eq!(reached.links[0].kind, "motivated_by");
    assert_eq!(reached.links[0].from, moved);
    assert!(reached.parts.from_links > 0.0);
    // Without links it carries no link and no score from one.
    let unlinked = SearchRequest {
        signals: memsift_engine::search::Signals {
            stages: memsift_engine::search::Stages::all().without(memsift_engine::search::Stage::Links),
            ..Default::default()
        },
        ..request("ana", "Porto move")
    };
    let answer = search(&test.app, &unlinked).await.unwrap();
    assert!(
        answer
            .results
            .iter()
            .all(|hit| hit.links.is_empty() && hit.parts.from_links == 0.0)
    );
    let _ = ana;
    test.finish().await;
}

fn lexical_only(user: &str, query: &str) -> SearchRequest {
    SearchRequest {
        signals: Signals {
            lexical: true,
            ..Signals::none()
        },
        record_access: false,
        ..request(user, query)
    }
}

async fn texts(test: &TestApp, request: &SearchRequest) -> Vec<String> {
    let answer = search(&test.app, request).await.unwrap();
    answer.results.into_iter().map(|hit| hit.text).collect()
}

/// The lexicon is brought forward by the memories stamped since whenever the user's memory
/// version moves, so a new memory is found at the next search, an expired one is not; the turn lexicon likewise
/// follows the turn version; and erasure leaves nothing of the user in the process.
async fn the_lexical_index_follows_writes_and_erasure(test: TestApp) {
    let store = &test.app.store;
    let (ana, bees) = store
        .insert_test_memory("ana", "Ana keeps bees on her roof.")
        .await
        .unwrap();
    store.bump_memory_version(ana).await.unwrap();
    assert_eq!(
        texts(&test, &lexical_only("ana", "beekeeping bees")).await,
        ["Ana keeps bees on her roof."]
    );
    assert!(texts(&test, &lexical_only("ana", "honey")).await.is_empty());

    store
        .insert_test_memory("ana", "Ana sells honey at the market.")
        .await
        .unwrap();
    store.bump_memory_version(ana).await.unwrap();
    assert_eq!(
        texts(&test, &lexical_only("ana", "honey")).await,
        ["Ana sells honey at the market."]
    );

    store
        .memories()
        .revise_memory("ana", bees, &Revision::Expire, "moved away", t0())
        .await
        .unwrap();
    assert!(texts(&test, &lexical_only("ana", "bees roof")).await.is_empty());
    assert!(test.app.held.holds::<MemoryWords>(ana));
    assert_eq!(
        test.app.held.made::<MemoryWords>(),
        (1, 2),
        "read whole once, then brought forward by the memory written and the one expired"
    );

    // Turns: a new turn is found at its first search after the import, by its neighbour's words too.
    let turns_only = |query: &str| SearchRequest {
        include_turns: true,
        signals: Signals::none(),
        record_access: false,
        ..request("ana", query)
    };
    test.import(
        "a.jsonl",
        &line("ana", "c9", 0, "user", "The hive swarmed in June.", false),
    )
    .await
    .unwrap();
    assert_eq!(
        texts(&test, &turns_only("hive swarm")).await,
        ["The hive swarmed in June."]
    );
    test.import("b.jsonl", &line("ana", "c9", 1, "user", "We caught the queen.", true))
        .await
        .unwrap();
    assert_eq!(
        texts(&test, &turns_only("queen")).await,
        ["We caught the queen.", "The hive swarmed in June."],
        "a new turn is read at once, first by its own words, and its neighbour by it as context"
    );
    assert_eq!(
        texts(&test, &turns_only("swarm")).await,
        ["The hive swarmed in June.", "We caught the queen."]
    );
    assert!(test.app.held.holds::<TurnWords>(ana));
    assert_eq!(
        test.app.held.made::<TurnWords>(),
        (1, 1),
        "the second import's segment was read again, not every turn"
    );

    // Another daemon on the same store keeps its own indexes: brought forward by a new turn and
    // its vector, and read again whole (empty) after an erasure it did not run.
    let other = memsift_engine::testing::app_on(store, &test.clock, test.app.config.clone(), "other");
    let held_turns = |app: &memsift_engine::app::App| {
        let app = app.clone();
        async move {
            let version = app.store.vectors().turn_version(ana).await.unwrap();
            let words = app
                .held
                .current::<TurnWords>(&app.store, ana, &(), version)
                .await
                .unwrap();
            let index = app.vectors.turn_index_at(&app.store, ana, version).await.unwrap();
            (words.lexicon.len(), index.index.len())
        }
    };
    assert_eq!(held_turns(&other).await, (2, 0));
    memsift_engine::pipeline::index_turns(&test.app, None, None)
        .await
        .unwrap();
    assert_eq!(held_turns(&other).await, (2, 2), "the vectors written are read in");
    test.import("c.jsonl", &line("ana", "c9", 2, "user", "She laid eggs.", false))
        .await
        .unwrap();
    memsift_engine::pipeline::index_turns(&test.app, None, None)
        .await
        .unwrap();
    assert_eq!(held_turns(&other).await, (3, 3));
    assert_eq!(other.held.made::<TurnWords>(), (1, 2));

    texts(&test, &request("ana", "queen")).await;
    assert!(test.app.held.holds::<TurnVectors>(ana));
    assert!(
        test.app.vectors.n_recent() > 0,
        "the turns' and the query's vectors are cached"
    );
    memsift_engine::erase::erase_user(&test.app, "ana").await.unwrap();
    assert!(
        !test.app.held.holds::<TurnVectors>(ana),
        "erasure drops the user's turn index"
    );
    assert_eq!(test.app.vectors.n_recent(), 0, "and every cached vector of a text");
    assert!(
        !test.app.held.holds::<MemoryWords>(ana),
        "erasure drops the user's lexicon"
    );
    assert!(!test.app.held.holds::<TurnWords>(ana), "and the lexicon over turns");
    assert!(texts(&test, &lexical_only("ana", "honey")).await.is_empty());
    assert!(texts(&test, &turns_only("queen")).await.is_empty());
    assert_eq!(
        held_turns(&other).await,
        (0, 0),
        "no word or vector of an erased turn stays in the other daemon"
    );
    assert_eq!(other.held.made::<TurnWords>(), (2, 2), "rebuilt whole past the erasure");
    test.finish().await;
}

#[tokio::test]
async fn the_lexical_index_follows_writes_and_erasure_on_sqlite() {
    the_lexical_index_follows_writes_and_erasure(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn the_lexical_index_follows_writes_and_erasure_on_postgres() {
    the_lexical_index_follows_writes_and_erasure(TestApp::postgres().await).await;
}

fn spoken(speaker: &str, minute: i64, text: &str) -> String {
    let mut row: serde_json::Value = serde_json::from_str(&line("nate", "c1", minute, "user", text, false)).unwrap();
    row["speaker"] = speaker.into();
    row.to_string() + "\n"
}

/// The query is embedded without the speakers' names: a turn that only says a name is no answer
/// to a question about that person, and who a result is about is judged apart (`speaker_focus`).
async fn the_query_is_embedded_without_the_speakers_names(test: TestApp) {
    let turns = [
        spoken("Joanna", 0, "Nate! Nate, Nate, Nate!"),
        spoken("Nate", 1, "I baked a chocolate cake and other desserts this week."),
        spoken("Joanna", 2, "Sounds like a lovely week."),
    ]
    .concat();
    test.import("chat.jsonl", &turns).await.unwrap();
    memsift_engine::pipeline::index_turns(&test.app, None, None)
        .await
        .unwrap();
    let by_turn_vectors = |vector_without_names: f64| SearchRequest {
        include_turns: true,
        signals: Signals {
            turn_vectors: true,
            ..Signals::none()
        },
        weights: Some(Weights {
            vector_without_names,
            ..Weights::default()
        }),
        record_access: false,
        ..request("nate", "What desserts did Nate's family like?")
    };
    // The cosine each turn got from the turn vectors (the turn lexicon ranks them too).
    let cosines = |answer: SearchAnswer| -> Vec<(String, f64)> {
        answer
            .results
            .into_iter()
            .map(|hit| {
                let cosine = hit
                    .parts
                    .signals
                    .iter()
                    .find(|part| part.0 == Signal::TurnVector)
                    .map(|part| part.2);
                (hit.text, cosine.unwrap_or(f64::NAN))
            })
            .collect()
    };
    let cosine =
        |found: &[(String, f64)], text: &str| found.iter().find(|hit| hit.0 == text).map_or(f64::NAN, |hit| hit.1);
    let without = cosines(search(&test.app, &by_turn_vectors(1.0)).await.unwrap());
    let with = cosines(search(&test.app, &by_turn_vectors(0.0)).await.unwrap());
    let (answer, name_only, small_talk) = (
        "I baked a chocolate cake and other desserts this week.",
        "Nate! Nate, Nate, Nate!",
        "Sounds like a lovely week.",
    );
    assert!(
        cosine(&without, answer) > cosine(&without, small_talk)
            && cosine(&without, small_talk) > cosine(&without, name_only),
        "without the name, the turn that only says it is furthest from the question: {without:?}"
    );
    assert!(
        cosine(&with, name_only) > cosine(&with, small_talk) && cosine(&with, name_only) > cosine(&without, name_only),
        "with the name embedded, it is nearer than a turn sharing a word of the question: {with:?}"
    );
    test.finish().await;
}

#[tokio::test]
async fn the_query_is_embedded_without_the_speakers_names_on_sqlite() {
    the_query_is_embedded_without_the_speakers_names(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn the_query_is_embedded_without_the_speakers_names_on_postgres() {
    the_query_is_embedded_without_the_speakers_names(TestApp::postgres().await).await;
}

/// The names the query is embedded without are the speakers' at the current turn version, read
/// without bringing the held turn lexicon forward first (it is brought forward beside the
/// embedding); past an erasure the lexicon is read again whole and names nobody.
async fn the_speakers_names_are_current_without_waiting_for_the_turn_lexicon(test: TestApp) {
    let store = &test.app.store;
    test.import(
        "a.jsonl",
        &[spoken("Joanna", 0, "Hi Nate!"), spoken("Nate", 1, "Hey.")].concat(),
    )
    .await
    .unwrap();
    let nate = store.listing().user_id("nate").await.unwrap().unwrap();
    let names = |set: std::collections::BTreeSet<String>| set.into_iter().collect::<Vec<_>>();
    assert_eq!(names(speaker_names(&test.app, nate).await.unwrap()), ["Joanna", "Nate"]);
    assert_eq!(
        test.app.held.made::<TurnWords>(),
        (1, 0),
        "nothing held: the lexicon is read whole"
    );

    test.import("b.jsonl", &spoken("Evan", 2, "Evan here, hello both."))
        .await
        .unwrap();
    assert_eq!(
        names(speaker_names(&test.app, nate).await.unwrap()),
        ["Evan", "Joanna", "Nate"],
        "a speaker new since the held lexicon is named"
    );
    assert_eq!(
        test.app.held.made::<TurnWords>(),
        (1, 0),
        "without bringing the lexicon forward"
    );
    let version = store.vectors().turn_version(nate).await.unwrap();
    let words = test
        .app
        .held
        .current::<TurnWords>(store, nate, &(), version)
        .await
        .unwrap();
    assert_eq!(words.lexicon.speakers().len(), 3);
    assert_eq!(test.app.held.made::<TurnWords>(), (1, 1));

    let other = memsift_engine::testing::app_on(store, &test.clock, test.app.config.clone(), "other");
    assert_eq!(speaker_names(&other, nate).await.unwrap().len(), 3);
    memsift_engine::erase::erase_user(&test.app, "nate").await.unwrap();
    assert!(
        speaker_names(&other, nate).await.unwrap().is_empty(),
        "no erased speaker's name stays in the other daemon"
    );
    assert_eq!(other.held.made::<TurnWords>(), (2, 0), "read whole past the erasure");
    test.finish().await;
}

#[tokio::test]
async fn the_speakers_names_are_current_without_waiting_for_the_turn_lexicon_on_sqlite() {
    the_speakers_names_are_current_without_waiting_for_the_turn_lexicon(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn the_speakers_names_are_current_without_waiting_for_the_turn_lexicon_on_postgres() {
    the_speakers_names_are_current_without_waiting_for_the_turn_lexicon(TestApp::postgres().await).await;
}

/// Over any run of writes (speakers old and new, turns with no speaker, a second conversation),
/// the names read without bringing the held lexicon forward are those a daemon reading every turn
/// afresh gets.
async fn the_speakers_names_after_any_writes_are_a_whole_reads(test: TestApp) {
    let store = &test.app.store;
    let pool = [
        Some("Ana"),
        Some("Noor"),
        None,
        Some("Zoë O'Brien"),
        Some("李雷"),
        Some("ana"),
    ];
    // A fixed xorshift sequence: the same run every time, many orders of new and known names.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state % bound as u64).unwrap()
    };
    for minute in 0..16 {
        let conversation = ["c1", "c2"][next(2)];
        let mut row: serde_json::Value =
            serde_json::from_str(&line("nate", conversation, minute, "user", "Something said.", false)).unwrap();
        if let Some(speaker) = pool[next(pool.len())] {
            row["speaker"] = speaker.into();
        }
        test.import(&format!("{minute}.jsonl"), &(row.to_string() + "\n"))
            .await
            .unwrap();
        let nate = store.listing().user_id("nate").await.unwrap().unwrap();
        let afresh = memsift_engine::testing::app_on(store, &test.clock, test.app.config.clone(), "afresh");
        let version = store.vectors().turn_version(nate).await.unwrap();
        let whole = afresh
            .held
            .current::<TurnWords>(store, nate, &(), version)
            .await
            .unwrap()
            .lexicon
            .speakers()
            .clone();
        assert_eq!(
            speaker_names(&test.app, nate).await.unwrap(),
            whole,
            "after write {minute}"
        );
    }
    assert_eq!(
        test.app.held.made::<TurnWords>(),
        (1, 0),
        "read whole once, never brought forward for names"
    );
    test.finish().await;
}

#[tokio::test]
async fn the_speakers_names_after_any_writes_are_a_whole_reads_on_sqlite() {
    the_speakers_names_after_any_writes_are_a_whole_reads(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn the_speakers_names_after_any_writes_are_a_whole_reads_on_postgres() {
    the_speakers_names_after_any_writes_are_a_whole_reads(TestApp::postgres().await).await;
}

/// A memory an operator wrote cites no turn, so it has nothing to be found by in the evidence
/// lists; it stands as its own evidence there (its words scored as a turn's, its vector as a
/// turn's), and an unrelated memory no longer outranks it for the signals it could not have.
#[tokio::test]
async fn a_memory_without_evidence_is_not_outranked_for_lacking_it() {
    let test = TestApp::sqlite().await;
    let embedder = test.app.vectors.embedder().await.unwrap();
    let said = "Ana runs ten km every morning.";
    let vector = embedder.embed(&[said]).unwrap().remove(0);
    let store = &test.app.store;
    let ana = store
        .insert_bench_memories("ana", embedder.model_id(), &[(said.to_owned(), vector)], t0())
        .await
        .unwrap();
    let (_, operator) = store
        .insert_test_memory("ana", "Ana works as an accountant.")
        .await
        .unwrap();
    store.bump_memory_version(ana).await.unwrap();
    let answer = search(
        &test.app,
        &SearchRequest {
            record_access: false,
            ..request("ana", "Is Ana an accountant?")
        },
    )
    .await
    .unwrap();
    let first = &answer.results[0];
    assert_eq!(first.key, Key::Memory(operator), "{answer:#?}");
    let signals: Vec<Signal> = first.parts.signals.iter().map(|(signal, _, _)| *signal).collect();
    assert!(
        signals.contains(&Signal::Evidence) && signals.contains(&Signal::EvidenceVector),
        "its own words and vector stand in the evidence lists: {signals:?}"
    );
    test.finish().await;
}
