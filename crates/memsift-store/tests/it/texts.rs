//! Any text, U+0000 included, is stored the same on both backends, through ingest, answers,
//! failures and apply.

use memsift_core::SegmentId;
use memsift_core::drops::{DropReason, DroppedItem};
use memsift_core::status::Role;
use memsift_store::{ApplyOutcome, Store};

use crate::helpers::{apply_input, idle, item, message, no_progress, request, t0};

/// Texts of every kind a message, an answer or an error can carry, U+0000 often among them.
fn any_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let character = prop_oneof![
        3 => Just('\0'),
        3 => proptest::char::range('a', 'z'),
        1 => Just('\u{FFFD}'),
        1 => any::<char>(),
    ];
    proptest::collection::vec(character, 1..64).prop_map(String::from_iter)
}

pub async fn any_text_is_stored_the_same_on_both_backends(store: &Store) {
    // PostgreSQL refuses U+0000 in text and jsonb; SQLite stores it. A provider answer holding
    // one failed to record on PostgreSQL (and was paid for again every lease), and an import
    // holding one was refused whole. Every text now reaches both backends the same way.
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (any_text(), any_text(), any_text(), any_text());
    for case in 0..40 {
        let (content, conversation, answer, error) = strategy.new_tree(&mut runner).unwrap().current();
        let stored = |text: &str| text.replace('\0', "\u{FFFD}");
        let user = format!("user-{case}");
        let mut last = message(&user, &conversation, 1, Role::User, &content);
        last.boundary_after = true;
        let report = store
            .messages()
            .ingest(
                &[message(&user, &conversation, 0, Role::User, &content), last],
                idle(),
                t0(),
                &no_progress,
            )
            .await
            .unwrap_or_else(|error| panic!("case {case}: ingest of {content:?} failed: {error}"));
        // The two messages differ only in time, so both are stored.
        assert_eq!(report.n_added, 2, "case {case}");
        let segment = &store.listing().list_segments(Some(&user), None, None).await.unwrap()[0];
        let segment_id = SegmentId::parse(&segment.id).unwrap();
        let turns = store.segments().segment_turns(segment_id).await.unwrap();
        assert!(
            turns.iter().all(|turn| turn.turn.content == stored(&content)),
            "case {case}"
        );
        // Re-importing the same bytes adds nothing.
        let again = store
            .messages()
            .ingest(
                &[message(&user, &conversation, 0, Role::User, &content)],
                idle(),
                t0(),
                &no_progress,
            )
            .await
            .unwrap();
        assert_eq!(again.n_added, 0, "case {case}");

        let claimed = store.segments().claim_segment(segment_id, "w", t0()).await.unwrap();
        let answered = request(segment_id, claimed.user_id, 0);
        let failed = request(segment_id, claimed.user_id, 1);
        store
            .requests()
            .plan_segment_requests(segment_id, &[answered.clone(), failed.clone()], t0())
            .await
            .unwrap();
        store
            .record_output(answered.id, &answer, Some(&answer), t0())
            .await
            .unwrap_or_else(|error| panic!("case {case}: recording {answer:?} failed: {error}"));
        store
            .requests()
            .record_failure(failed.id, memsift_core::status::RequestStatus::Errored, &error, t0())
            .await
            .unwrap();
        let detail = store.listing().request_detail(answered.id).await.unwrap();
        assert_eq!(
            detail.raw_output.as_deref(),
            Some(stored(&answer).as_str()),
            "case {case}"
        );
        assert_eq!(
            detail.stop_reason.as_deref(),
            Some(stored(&answer).as_str()),
            "case {case}"
        );
        let detail = store.listing().request_detail(failed.id).await.unwrap();
        assert_eq!(detail.error.as_deref(), Some(stored(&error).as_str()), "case {case}");
        // The answer applies too: items, drops and notes carry provider text.
        let mut input = apply_input(&answered, vec![item(&format!("Ana said {answer}"), vec![])]);
        input.drops = vec![DroppedItem {
            detail: Some(error.clone()),
            ..DroppedItem::new(0, DropReason::Truncated, Some(answer.clone()))
        }];
        assert!(
            matches!(
                store.memories().apply(&input).await.unwrap(),
                ApplyOutcome::Applied { .. }
            ),
            "case {case}"
        );
    }
}
