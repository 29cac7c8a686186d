//! Listing cases: what the read side shows is scoped by user, ids are found by a fragment within
//! their user, and the cost view sums tokens by user, stage and lane.

use memsift_store::Store;

use crate::helpers::{apply_input, closed_claimed_segment, item, request, t0};

pub async fn memory_listings_are_scoped_by_user(store: &Store) {
    for (user, text) in [("ana", "Ana lives in Lisbon."), ("bo", "Bo lives in Oslo.")] {
        let (segment_id, user_id, _) = closed_claimed_segment(store, user, "c1").await;
        let request = request(segment_id, user_id, 0);
        store
            .requests()
            .plan_segment_requests(segment_id, std::slice::from_ref(&request), t0())
            .await
            .unwrap();
        store.record_output(request.id, "[...]", None, t0()).await.unwrap();
        store
            .memories()
            .apply(&apply_input(&request, vec![item(text, vec![])]))
            .await
            .unwrap();
    }
    let ana: Vec<String> = store
        .listing()
        .list_memories("ana", None)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.text)
        .collect();
    assert_eq!(ana, vec!["Ana lives in Lisbon."]);
    assert!(store.listing().list_memories("nobody", None).await.unwrap().is_empty());
    assert_eq!(
        store
            .listing()
            .list_requests(Some("bo"), None, None)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn ids_match_by_their_start_or_their_end_within_their_user(store: &Store) {
    use memsift_store::IdKind;
    let (ana_segment, _, _) = closed_claimed_segment(store, "ana", "c1").await;
    let (bo_segment, _, _) = closed_claimed_segment(store, "bo", "c1").await;
    let (ana, bo) = (ana_segment.to_string(), bo_segment.to_string());
    let matching = |fragment: String, user: Option<&'static str>| async move {
        store
            .listing()
            .ids_matching(IdKind::Segment, &fragment, user)
            .await
            .unwrap()
    };
    // The last 12 characters, as the tables print them, and the same in capitals.
    assert_eq!(
        matching(ana[ana.len() - 12..].to_owned(), None).await,
        std::slice::from_ref(&ana)
    );
    assert_eq!(
        matching(ana[ana.len() - 12..].to_uppercase(), None).await,
        std::slice::from_ref(&ana)
    );
    // A prefix both UUIDv7s share (the same millisecond's timestamp) finds both, in id order.
    let mut both = vec![ana.clone(), bo.clone()];
    both.sort();
    assert_eq!(matching(ana[..4].to_owned(), None).await, both);
    // …and only the user's own when scoped, so another user's ids are never listed.
    assert_eq!(
        matching(ana[..4].to_owned(), Some("bo")).await,
        std::slice::from_ref(&bo)
    );
    assert!(matching(ana[ana.len() - 12..].to_owned(), Some("bo")).await.is_empty());
    // The full id, a wildcard and a fragment of the middle find nothing else.
    assert_eq!(matching(ana.clone(), None).await, std::slice::from_ref(&ana));
    assert!(matching("%".to_owned(), None).await.is_empty());
    assert!(matching(format!("{}_", &ana[..4]), None).await.is_empty());
    assert!(matching(ana[10..20].to_owned(), None).await.is_empty());
    // Kinds search their own table: no request has a segment's id.
    assert!(
        store
            .listing()
            .ids_matching(IdKind::Request, &ana, None)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn the_cost_view_sums_tokens_by_user_stage_and_lane(store: &Store) {
    let (segment_id, user_id, _) = closed_claimed_segment(store, "ana", "c1").await;
    let chunks = [request(segment_id, user_id, 0), request(segment_id, user_id, 1)];
    store
        .requests()
        .plan_segment_requests(segment_id, &chunks, t0())
        .await
        .unwrap();
    for (chunk, tokens) in chunks.iter().zip([100_i64, 40]) {
        let usage = memsift_store::RequestUsage {
            input_tokens: tokens,
            output_tokens: tokens / 2,
            cache_creation_tokens: 0,
            cache_read_tokens: tokens * 3,
            cost_usd: tokens as f64 / 1000.0,
        };
        assert!(
            store
                .requests()
                .record_answer(chunk.id, "[]", Some("end_turn"), &usage, t0())
                .await
                .unwrap()
        );
    }
    let rows = store.listing().cost_by_user_stage().await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(
        (row.user_external_id.as_str(), row.purpose.as_str(), row.lane.as_str()),
        ("ana", "extraction", "heuristic")
    );
    assert_eq!(
        (
            row.n_requests,
            row.input_tokens,
            row.output_tokens,
            row.cache_read_tokens
        ),
        (2, 140, 70, 420)
    );
    assert!((row.cost_usd - 0.14).abs() < 1e-9, "{}", row.cost_usd);
}

/// One statement counts a read of each named memory that is the user's and active, once however
/// often it is named; other users' and archived memories are left as they were.
pub async fn a_read_counts_once_for_each_of_the_users_active_memories_it_names(store: &Store) {
    let (ana, read) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, archived) = store.insert_test_memory("ana", "Ana lived in Porto.").await.unwrap();
    store.archive_test_memory(ana, archived).await.unwrap();
    let (bo, other) = store.insert_test_memory("bo", "Bo lives in Oslo.").await.unwrap();
    let none: [memsift_core::MemoryId; 0] = [];
    assert_eq!(
        store.listing().record_memory_access("ana", &none, t0()).await.unwrap(),
        0
    );
    let touched = store
        .listing()
        .record_memory_access("ana", &[read, archived, other, read], t0())
        .await
        .unwrap();
    assert_eq!(touched, 1);
    let access = |rows: memsift_store::UserRows| -> Vec<(String, i64, bool)> {
        rows.memories
            .iter()
            .map(|row| {
                (
                    row["id"].as_str().unwrap().to_owned(),
                    row["access_count"].as_i64().unwrap(),
                    !row["last_accessed_at"].is_null(),
                )
            })
            .collect()
    };
    let mut expected = vec![(read.to_string(), 1, true), (archived.to_string(), 0, false)];
    expected.sort();
    assert_eq!(access(store.user_rows(ana).await.unwrap()), expected);
    assert_eq!(
        access(store.user_rows(bo).await.unwrap()),
        vec![(other.to_string(), 0, false)]
    );
}
