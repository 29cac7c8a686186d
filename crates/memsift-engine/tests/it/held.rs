//! The read side's one memory budget: over any sequence of users, sizes, writes and searches, what
//! the holder keeps stays under `[search] held_mb`, and every answer is the one a daemon reading
//! everything afresh gives.

use memsift_engine::app::App;
use memsift_engine::held::{MemoryVectors, MemoryWords, TurnVectors, TurnWords};
use memsift_engine::search::{SearchAnswer, SearchRequest, search};
use memsift_engine::testing::{app_on, with_held_budget};
use proptest::strategy::{Strategy, ValueTree};

use crate::helpers::TestApp;

const WORDS: [&str; 24] = [
    "noor",
    "porto",
    "lisbon",
    "paints",
    "sunrise",
    "river",
    "cat",
    "miso",
    "ramen",
    "harbour",
    "violin",
    "lessons",
    "garden",
    "tomatoes",
    "marathon",
    "training",
    "sister",
    "lia",
    "chemistry",
    "teacher",
    "bees",
    "honey",
    "roof",
    "market",
];

/// One thing that happens to the store or is asked of it.
#[derive(Clone, Debug)]
enum Step {
    /// `n` memories (each on a turn of its own) written for user `user`, as another daemon would.
    Write { user: usize, texts: Vec<Vec<usize>> },
    /// The user's oldest active memory archived.
    Archive { user: usize },
    /// The user's newest memory deleted outright (a memory row going away moves the floor).
    Delete { user: usize },
    /// A search.
    Search {
        user: usize,
        words: Vec<usize>,
        include_turns: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let sentence = proptest::collection::vec(0..WORDS.len(), 3..8);
    // Three users: enough to pass a budget, few enough that a held user is often written to and
    // searched again, which is where a stale index would show.
    proptest::prop_oneof![
        2 => (0..3usize, proptest::collection::vec(sentence, 1..24)).prop_map(|(user, texts)| Step::Write { user, texts }),
        1 => (0..3usize).prop_map(|user| Step::Archive { user }),
        1 => (0..3usize).prop_map(|user| Step::Delete { user }),
        3 => (
            0..3usize,
            proptest::collection::vec(0..WORDS.len(), 1..4),
            proptest::bool::ANY
        )
            .prop_map(|(user, words, include_turns)| Step::Search {
                user,
                words,
                include_turns
            }),
    ]
}

fn text(words: &[usize]) -> String {
    words.iter().map(|word| WORDS[*word]).collect::<Vec<_>>().join(" ")
}

/// What an answer says, in order: how many candidates it weighed, and each result's key, score,
/// every signal's rank and raw score (a stale index shifts a rank or a BM25 statistic even where
/// the order of results survives), and evidence.
fn said(answer: &SearchAnswer) -> Vec<String> {
    std::iter::once(format!("{} candidates", answer.n_candidates))
        .chain(answer.results.iter().map(|hit| {
            let evidence: Vec<String> = hit.evidence.iter().map(|turn| turn.id.to_string()).collect();
            let signals: Vec<String> = hit
                .parts
                .signals
                .iter()
                .map(|(signal, rank, raw)| format!("{signal:?}#{rank}={raw:.9}"))
                .collect();
            format!("{:?} {:.12} {signals:?} {evidence:?}", hit.key, hit.score)
        }))
        .collect()
}

async fn write(app: &App, user: &str, texts: &[Vec<usize>]) {
    let embedder = app.vectors.embedder().await.unwrap();
    let sentences: Vec<String> = texts.iter().map(|words| text(words)).collect();
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs).unwrap();
    let rows: Vec<(String, Vec<f32>)> = sentences.into_iter().zip(vectors).collect();
    app.store
        .insert_bench_memories(user, embedder.model_id(), &rows, memsift_engine::testing::t0())
        .await
        .unwrap();
}

/// Archives the user's oldest active memory, or deletes their newest.
async fn retire(app: &App, user: &str, delete: bool) {
    let Some(user_id) = app.store.listing().user_id(user).await.unwrap() else {
        return;
    };
    let memories = app.store.listing().list_memories(user, None).await.unwrap();
    let ids = memories.iter().map(|memory| memory.id.as_str());
    let Some(chosen) = (if delete { ids.max() } else { ids.min() }) else {
        return;
    };
    let chosen = memsift_core::MemoryId::parse(chosen).unwrap();
    if delete {
        app.store.delete_test_memory(user_id, chosen).await.unwrap();
    } else {
        app.store.archive_test_memory(user_id, chosen).await.unwrap();
    }
}

async fn any_run_stays_under_the_budget_and_answers_as_a_fresh_read(test: TestApp) {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let steps = proptest::collection::vec(step(), 1..16);
    // Budgets from one that holds nobody's whole state to one that holds every user.
    let budgets = [6_000, 40_000, 150_000, 1 << 30];
    for case in 0..32 {
        let run = steps.new_tree(&mut runner).unwrap().current();
        let budget = budgets[case % budgets.len()];
        let held = with_held_budget(&test.app, budget);
        for (index, step) in run.iter().enumerate() {
            let user = |n: usize| format!("case{case}-user{n}");
            match step {
                Step::Write { user: n, texts } => write(&held, &user(*n), texts).await,
                Step::Archive { user: n } => retire(&held, &user(*n), false).await,
                Step::Delete { user: n } => retire(&held, &user(*n), true).await,
                Step::Search {
                    user: n,
                    words,
                    include_turns,
                } => {
                    let request = SearchRequest {
                        include_turns: *include_turns,
                        record_access: false,
                        ..SearchRequest::new(user(*n), text(words))
                    };
                    let answer = search(&held, &request).await.unwrap();
                    let fresh = app_on(&test.app.store, &test.clock, test.app.config.clone(), "fresh");
                    let expected = search(&fresh, &request).await.unwrap();
                    assert_eq!(
                        said(&answer),
                        said(&expected),
                        "case {case} step {index} ({step:?}) of {run:?}: the held indexes answered otherwise"
                    );
                }
            }
            let stats = held.held.stats();
            assert!(
                stats.held_bytes <= budget as u64,
                "case {case} step {index}: {} bytes held over a budget of {budget}",
                stats.held_bytes
            );
            assert_eq!(
                stats.held_bytes,
                held.held.measured_bytes() as u64,
                "case {case} step {index}: the running total is the parts' sum"
            );
        }
    }
    test.finish().await;
}

#[tokio::test]
async fn any_run_stays_under_the_budget_and_answers_as_a_fresh_read_on_sqlite() {
    any_run_stays_under_the_budget_and_answers_as_a_fresh_read(TestApp::sqlite().await).await;
}

#[tokio::test]
async fn any_run_stays_under_the_budget_and_answers_as_a_fresh_read_on_postgres() {
    any_run_stays_under_the_budget_and_answers_as_a_fresh_read(TestApp::postgres().await).await;
}

/// The least recently searched user goes first; a user too large for the whole budget is
/// answered all the same, and not held.
#[tokio::test]
async fn the_least_recently_searched_user_goes_first_and_an_oversize_one_is_not_held() {
    let test = TestApp::sqlite().await;
    for user in ["ana", "bo", "cy"] {
        write(&test.app, user, &[vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]]).await;
    }
    let ask = |app: &App, user: &str| {
        let app = app.clone();
        let request = SearchRequest {
            include_turns: true,
            record_access: false,
            ..SearchRequest::new(user, "noor paints the sunrise")
        };
        async move { search(&app, &request).await.unwrap() }
    };
    // Measure one user's whole state, then allow a little over two users' worth.
    let measure = with_held_budget(&test.app, usize::MAX);
    ask(&measure, "ana").await;
    let one_user = measure.held.stats().held_bytes as usize;
    assert!(one_user > 0);
    let app = with_held_budget(&test.app, one_user * 5 / 2);
    let id = |user: &str| {
        let store = test.app.store.clone();
        let user = user.to_owned();
        async move { store.listing().user_id(&user).await.unwrap().unwrap() }
    };
    let (ana, bo, cy) = (id("ana").await, id("bo").await, id("cy").await);
    ask(&app, "ana").await;
    ask(&app, "bo").await;
    ask(&app, "ana").await;
    ask(&app, "cy").await;
    let holds = |user| {
        app.held.holds::<MemoryVectors>(user)
            && app.held.holds::<MemoryWords>(user)
            && app.held.holds::<TurnVectors>(user)
            && app.held.holds::<TurnWords>(user)
    };
    assert!(holds(ana) && holds(cy), "the two searched last are held whole");
    assert!(!app.held.holds::<MemoryWords>(bo), "bo was searched least recently");
    assert_eq!(app.held.stats().evictions, 1);

    let small = with_held_budget(&test.app, one_user / 2);
    let answer = ask(&small, "ana").await;
    assert_eq!(said(&answer), said(&ask(&measure, "ana").await), "answered as if held");
    let stats = small.held.stats();
    assert!(
        stats.held_bytes <= (one_user / 2) as u64,
        "what a user over the budget leaves held still fits it"
    );
    assert!(stats.oversize > 0, "and the parts that did not fit are counted");
    test.finish().await;
}
