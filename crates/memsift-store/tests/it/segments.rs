//! Segment cases: ingest cuts messages into segments, idle ones close by the injected clock,
//! workers claim them without overlap, a failing one goes dead, and a segment's referenced
//! memories are its owner's active ones.

use chrono::Duration;
use memsift_core::status::Role;
use memsift_core::{MemoryId, SegmentId};
use memsift_store::{NewMessage, Store};

use crate::helpers::{closed_claimed_segment, idle, ingest_now, message, no_progress, segment_statuses, t0};

pub async fn ingest_gives_each_message_one_segment_and_closes_on_boundary(store: &Store) {
    let mut closing = message("ana", "c1", 2, Role::Assistant, "Got it.");
    closing.boundary_after = true;
    let messages = vec![
        message("ana", "c1", 0, Role::User, "Hi, I moved to Porto."),
        message("ana", "c1", 1, Role::Assistant, "Welcome!"),
        closing,
        message("ana", "c1", 3, Role::User, "Another thing."),
    ];
    let report = store
        .messages()
        .ingest(&messages, idle(), t0(), &no_progress)
        .await
        .unwrap();
    assert_eq!(
        (
            report.n_added,
            report.n_segments_started,
            report.n_segments_closed,
            report.n_users_created
        ),
        (4, 2, 1, 1)
    );
    assert_eq!(
        segment_statuses(store, "ana").await,
        vec![("closed".to_owned(), 3), ("open".to_owned(), 1)]
    );
}

pub async fn an_idle_gap_inside_the_input_starts_a_new_segment(store: &Store) {
    let messages = vec![
        message("ana", "c1", 0, Role::User, "first"),
        message("ana", "c1", 59, Role::User, "still the first segment"),
        message(
            "ana",
            "c1",
            119,
            Role::User,
            "a new segment after 60 minutes of silence",
        ),
    ];
    store
        .messages()
        .ingest(&messages, idle(), t0(), &no_progress)
        .await
        .unwrap();
    assert_eq!(
        segment_statuses(store, "ana").await,
        vec![("closed".to_owned(), 2), ("open".to_owned(), 1)]
    );
    let closed = store
        .listing()
        .list_segments(Some("ana"), Some("closed"), None)
        .await
        .unwrap();
    assert_eq!(closed[0].close_reason.as_deref(), Some("idle"));
}

pub async fn reimporting_the_same_messages_adds_nothing(store: &Store) {
    let mut messages = vec![
        message("ana", "c1", 0, Role::User, "I am vegetarian."),
        message("bo", "c2", 0, Role::User, "hello"),
    ];
    messages[1].external_id = Some("D1:1".to_owned());
    messages[1].boundary_after = true;
    let first = store
        .messages()
        .ingest(&messages, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let before = store.listing().counts().await.unwrap();
    let second = store
        .messages()
        .ingest(&messages, idle(), t0() + Duration::days(1), &no_progress)
        .await
        .unwrap();
    assert_eq!((first.n_added, second.n_added, second.n_already_stored), (2, 0, 2));
    assert_eq!(store.listing().counts().await.unwrap(), before);
}

/// What an ingest did not store as sent is counted: a U+0000 stored as U+FFFD, and an id sent
/// again with other content or role, which keeps the stored message and is named in the report
/// (the first `MAX_REPORTED_IDS` of them), while a true repeat (NUL included) is only a repeat.
pub async fn an_ingest_counts_replaced_text_and_names_changed_repeats(store: &Store) {
    let with_id = |minute: i64, role: Role, id: &str, content: &str| {
        let mut message = message("ana", "c1", minute, role, content);
        message.external_id = Some(id.to_owned());
        message
    };
    let first = ingest_now(
        store,
        &[
            with_id(0, Role::User, "m1", "I keep bees."),
            with_id(1, Role::User, "m2", "a\0b"),
            message("ana", "c1", 2, Role::User, "no id\0 here"),
        ],
    )
    .await;
    assert_eq!(
        (first.n_added, first.n_text_replaced, first.n_conflicting_repeats),
        (3, 2, 0)
    );
    let before = store.listing().counts().await.unwrap();
    let mut again = vec![
        with_id(0, Role::User, "m1", "I keep wasps."),
        with_id(1, Role::User, "m2", "a\0b"),
        message("ana", "c1", 2, Role::User, "no id\0 here"),
        with_id(0, Role::Assistant, "m1", "I keep bees."),
    ];
    let n_more = memsift_store::MAX_REPORTED_IDS + 5;
    let firsts: Vec<_> = (0..n_more)
        .map(|n| with_id(3, Role::User, &format!("x{n}"), "first"))
        .collect();
    ingest_now(store, &firsts).await;
    let before_changes = store.listing().counts().await.unwrap();
    assert_ne!(before, before_changes);
    again.extend((0..n_more).map(|n| with_id(3, Role::User, &format!("x{n}"), "second")));
    let second = ingest_now(store, &again).await;
    assert_eq!(
        (second.n_added, second.n_already_stored, second.n_text_replaced),
        (0, 2, 0)
    );
    assert_eq!(second.n_conflicting_repeats, 2 + n_more as u64);
    assert_eq!(second.conflicting_repeat_ids.len(), memsift_store::MAX_REPORTED_IDS);
    assert_eq!(second.conflicting_repeat_ids[..3], ["c1/m1", "c1/m1", "c1/x0"]);
    assert_eq!(
        store.listing().counts().await.unwrap(),
        before_changes,
        "nothing stored"
    );
}

pub async fn a_failed_ingest_leaves_the_store_as_it_was(store: &Store) {
    store
        .messages()
        .ingest(
            &[message("ana", "c1", 0, Role::User, "kept from before")],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    let before = store.listing().counts().await.unwrap();
    let messages: Vec<NewMessage> = (0..5)
        .map(|minute| message("bo", "c9", minute, Role::User, &format!("message {minute}")))
        .collect();
    let owned_store = store.clone();
    // The progress callback panics after the third message has been written inside the
    // transaction: the task dies, and the transaction must roll back with it.
    let outcome = tokio::spawn(async move {
        owned_store
            .messages()
            .ingest(&messages, idle(), t0(), &|n_done| {
                assert!(n_done < 3, "simulated crash mid-import")
            })
            .await
    })
    .await;
    assert!(outcome.unwrap_err().is_panic());
    assert_eq!(store.listing().counts().await.unwrap(), before);
}

pub async fn idle_segments_close_by_the_injected_clock(store: &Store) {
    store
        .messages()
        .ingest(
            &[message("ana", "c1", 0, Role::User, "hello")],
            idle(),
            t0(),
            &no_progress,
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .messages()
            .close_idle_segments(t0() + Duration::minutes(59), idle())
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .messages()
            .close_idle_segments(t0() + Duration::minutes(60), idle())
            .await
            .unwrap(),
        1
    );
    assert_eq!(segment_statuses(store, "ana").await, vec![("closed".to_owned(), 1)]);
}

pub async fn concurrent_claims_take_disjoint_segments(store: &Store) {
    let messages: Vec<NewMessage> = (0..6)
        .map(|conversation_idx| {
            let mut message = message("ana", &format!("c{conversation_idx}"), 0, Role::User, "hello there");
            message.boundary_after = true;
            message
        })
        .collect();
    store
        .messages()
        .ingest(&messages, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let (a, b, c) = tokio::join!(
        store.segments().claim_segments("a", t0(), Duration::minutes(15), 3),
        store.segments().claim_segments("b", t0(), Duration::minutes(15), 3),
        store.segments().claim_segments("c", t0(), Duration::minutes(15), 3),
    );
    let mut ids: Vec<SegmentId> = [a.unwrap(), b.unwrap(), c.unwrap()]
        .concat()
        .into_iter()
        .map(|segment| segment.id)
        .collect();
    let n_claimed = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n_claimed, "a segment was claimed twice");
    assert_eq!(n_claimed, 6);
    assert!(
        store
            .segments()
            .claim_segments("d", t0(), Duration::minutes(15), 3)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn a_claim_takes_the_oldest_due_segments_of_every_kind_a_page_at_a_time(store: &Store) {
    // Five conversations closed a minute apart; then c0 fails (due again at once) and c1's
    // claim lapses, so the three kinds of due segment are all present, interleaved in age.
    let mut ids = Vec::new();
    for conversation_idx in 0..5 {
        let mut turn = message(
            "ana",
            &format!("c{conversation_idx}"),
            conversation_idx,
            Role::User,
            "hello",
        );
        turn.boundary_after = true;
        store
            .messages()
            .ingest(
                &[turn],
                idle(),
                t0() + Duration::minutes(conversation_idx),
                &no_progress,
            )
            .await
            .unwrap();
        let rows = store.listing().list_segments(Some("ana"), None, None).await.unwrap();
        ids.push(rows.last().unwrap().id.clone());
    }
    let claim = |worker: &'static str, at_minute: i64, lease_minutes: i64, limit: i64| async move {
        store
            .segments()
            .claim_segments(
                worker,
                t0() + Duration::minutes(at_minute),
                Duration::minutes(lease_minutes),
                limit,
            )
            .await
            .unwrap()
            .into_iter()
            .map(|segment| segment.id.to_string())
            .collect::<Vec<String>>()
    };
    assert_eq!(claim("x", 10, 1, 2).await, ids[..2]);
    store
        .segments()
        .fail_segment(
            SegmentId::parse(&ids[0]).unwrap(),
            "provider said no",
            5,
            Duration::zero(),
            t0() + Duration::minutes(10),
        )
        .await
        .unwrap();
    // At 10:20: c0 (failed, due), c1 (its claim lapsed at 10:11) and c2 (closed), oldest first.
    assert_eq!(claim("y", 20, 15, 3).await, ids[..3]);
    assert_eq!(claim("y", 20, 15, 10).await, ids[3..]);
    assert!(claim("y", 20, 15, 10).await.is_empty());
}

/// Where a segment stands in [`claims_take_exactly_the_due_segments_oldest_first_over_generated_histories`]'s model.
#[derive(Clone, Copy, Debug)]
enum Modelled {
    Closed {
        next: Option<chrono::DateTime<chrono::Utc>>,
    },
    Failed {
        next: chrono::DateTime<chrono::Utc>,
    },
    Extracting {
        until: chrono::DateTime<chrono::Utc>,
    },
    Finished,
}

pub async fn claims_take_exactly_the_due_segments_oldest_first_over_generated_histories(store: &Store) {
    // Segments closed three at a time (ties on closed_at fall to the id), then random claims,
    // failures, deferrals, finishes and lapsed leases at a moving clock; every claim must take
    // exactly the oldest `limit` due segments of the model, in order.
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |below: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % below
    };
    let mut model: Vec<(i64, String, Modelled)> = Vec::new();
    for conversation_idx in 0..24_i64 {
        let minute = conversation_idx / 3;
        let mut turn = message("ana", &format!("c{conversation_idx}"), minute, Role::User, "hello");
        turn.boundary_after = true;
        store
            .messages()
            .ingest(&[turn], idle(), t0() + Duration::minutes(minute), &no_progress)
            .await
            .unwrap();
    }
    for row in store.listing().list_segments(Some("ana"), None, None).await.unwrap() {
        let minute = (row.first_message_at - t0()).num_minutes();
        model.push((minute, row.id, Modelled::Closed { next: None }));
    }
    model.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut now = t0() + Duration::minutes(10);
    for step in 0..60 {
        now += Duration::minutes(next(4) as i64);
        let held: Vec<usize> = (0..model.len())
            .filter(|&at| matches!(model[at].2, Modelled::Extracting { .. }))
            .collect();
        if held.is_empty() || next(2) == 0 {
            let limit = 1 + next(6) as i64;
            let lease = Duration::minutes(1 + next(10) as i64);
            let due: Vec<usize> = (0..model.len())
                .filter(|&at| match model[at].2 {
                    Modelled::Closed { next } => next.is_none_or(|next| next <= now),
                    Modelled::Failed { next } => next <= now,
                    Modelled::Extracting { until } => until <= now,
                    Modelled::Finished => false,
                })
                .take(limit as usize)
                .collect();
            let claimed: Vec<String> = store
                .segments()
                .claim_segments("w", now, lease, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|segment| segment.id.to_string())
                .collect();
            let want: Vec<String> = due.iter().map(|&at| model[at].1.clone()).collect();
            assert_eq!(claimed, want, "step {step}: claim of {limit} at {now}");
            for at in due {
                model[at].2 = Modelled::Extracting { until: now + lease };
            }
            continue;
        }
        let at = held[next(held.len() as u64) as usize];
        let id = SegmentId::parse(&model[at].1).unwrap();
        let later = now + Duration::minutes(next(10) as i64);
        model[at].2 = match next(3) {
            0 => {
                let retry_after = later - now;
                store
                    .segments()
                    .fail_segment(id, "no", 1000, retry_after, now)
                    .await
                    .unwrap();
                Modelled::Failed { next: later }
            }
            1 => {
                store.segments().defer_segment(id, later, "over budget").await.unwrap();
                Modelled::Closed { next: Some(later) }
            }
            _ => {
                store.segments().finish_empty_segment(id, now).await.unwrap();
                Modelled::Finished
            }
        };
    }
}

pub async fn a_plan_from_a_worker_whose_claim_lapsed_and_was_taken_over_is_refused(store: &Store) {
    // worker-a claimed the segment at 10:00 for 15 minutes and stalled; worker-b takes it over.
    let (segment_id, user_id, _) = crate::helpers::closed_claimed_segment(store, "ana", "c1").await;
    let taken_over = store
        .segments()
        .claim_segments("worker-b", t0() + Duration::minutes(16), Duration::minutes(15), 10)
        .await
        .unwrap();
    assert_eq!(taken_over.len(), 1);
    let plan = |worker: &'static str| async move {
        store
            .requests()
            .plan_claimed_segment(
                segment_id,
                worker,
                &[crate::helpers::request(segment_id, user_id, 0)],
                None,
                t0() + Duration::minutes(17),
            )
            .await
            .unwrap()
    };
    assert!(plan("worker-b").await, "the claim's holder plans");
    assert!(!plan("worker-a").await, "the stalled worker's plan is refused");
    // Once planned the claim is released, so a late plan from the holder is refused too.
    assert!(!plan("worker-b").await);
    let requests = store.listing().list_requests(Some("ana"), None, None).await.unwrap();
    assert_eq!(requests.len(), 1, "one request for the one chunk: {requests:?}");
}

pub async fn a_segment_goes_dead_after_max_attempts(store: &Store) {
    let (segment_id, _, _) = closed_claimed_segment(store, "ana", "c1").await;
    store
        .segments()
        .fail_segment(segment_id, "provider said no", 2, Duration::minutes(5), t0())
        .await
        .unwrap();
    assert_eq!(segment_statuses(store, "ana").await[0].0, "failed");
    // Not due yet, then due: the retry waits for its time.
    assert!(
        store
            .segments()
            .claim_segments("w", t0(), Duration::minutes(15), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let again = store
        .segments()
        .claim_segments("w", t0() + Duration::minutes(5), Duration::minutes(15), 10)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 2);
    store
        .segments()
        .fail_segment(segment_id, "provider said no again", 2, Duration::minutes(5), t0())
        .await
        .unwrap();
    let rows = store.listing().list_segments(Some("ana"), None, None).await.unwrap();
    assert_eq!(
        (rows[0].status.as_str(), rows[0].last_error.as_deref()),
        ("dead", Some("provider said no again"))
    );
    assert!(
        store
            .segments()
            .claim_segments("w", t0() + Duration::days(1), Duration::minutes(15), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn referenced_memories_are_the_owners_active_ones_in_order(store: &Store) {
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, miso) = store
        .insert_test_memory("ana", "Ana has a cat named Miso.")
        .await
        .unwrap();
    let (_, archived) = store
        .insert_test_memory("ana", "Ana used to live in Porto.")
        .await
        .unwrap();
    store.archive_test_memory(ana, archived).await.unwrap();
    let (_, bobs) = store.insert_test_memory("bob", "Bob plays chess.").await.unwrap();
    let unknown = MemoryId::new_v7();

    let mut question = message("ana", "c9", 0, Role::User, "Where should I move?");
    question.referenced_memory_ids = vec![miso];
    let mut answer = message("ana", "c9", 1, Role::Assistant, "You like Lisbon.");
    // Another user's memory, an archived one and an unknown id must never reach Ana's prompt.
    answer.referenced_memory_ids = vec![bobs, lisbon, archived, miso, unknown];
    answer.boundary_after = true;
    store
        .messages()
        .ingest(&[question, answer], idle(), t0(), &no_progress)
        .await
        .unwrap();
    let segment = store
        .listing()
        .list_segments(Some("ana"), None, None)
        .await
        .unwrap()
        .into_iter()
        .find(|row| row.n_messages == 2)
        .unwrap();
    let referenced = store
        .segments()
        .referenced_memories(segment.id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        referenced,
        vec![
            (miso, "Ana has a cat named Miso.".to_owned()),
            (lisbon, "Ana lives in Lisbon.".to_owned()),
        ]
    );
}
