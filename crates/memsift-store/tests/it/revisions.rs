//! Revision and scoring cases: an operator's revisions and the scorer's archives are journaled,
//! capped, and undone to the exact prior rows.

use chrono::Duration;
use memsift_core::UserId;
use memsift_store::Store;

use crate::helpers::t0;

/// Every column of a user's memories, archived ones included, for exact before/after comparisons.
async fn all_memory_rows(store: &Store, user_id: UserId) -> Vec<(String, String, memsift_store::MemoryState)> {
    store.user_memory_states(user_id).await.unwrap()
}

pub async fn revisions_are_journaled_and_undo_restores_the_exact_prior_rows(store: &Store) {
    let (ana, lisbon) = store.insert_test_memory("ana", "Ana lives in Lisbon.").await.unwrap();
    let (_, cat) = store.insert_test_memory("ana", "Ana has a cat.").await.unwrap();
    let (_, bobs) = store.insert_test_memory("bo", "Bo plays chess.").await.unwrap();
    let original = all_memory_rows(store, ana).await;

    let confirmed = store
        .memories()
        .revise_memory("ana", cat, &memsift_store::Revision::Confirm, "she said so", t0())
        .await
        .unwrap();
    assert_eq!(confirmed.state.confidence, 1.0);
    let superseded = store
        .memories()
        .revise_memory(
            "ana",
            lisbon,
            &memsift_store::Revision::Supersede {
                content: "Ana lives in Porto since March.".to_owned(),
            },
            "she moved",
            t0(),
        )
        .await
        .unwrap();
    let porto = superseded.new_memory_id.unwrap();
    let texts: Vec<String> = store
        .listing()
        .list_memories("ana", None)
        .await
        .unwrap()
        .into_iter()
        .map(|memory| memory.text)
        .collect();
    assert!(
        texts.contains(&"Ana lives in Porto since March.".to_owned()),
        "{texts:?}"
    );
    assert!(
        !texts.contains(&"Ana lives in Lisbon.".to_owned()),
        "superseded memories leave the active set"
    );
    assert_eq!(store.count_rows("operations").await.unwrap(), 2);

    // Scoped: bo cannot revise or undo ana's memories, and an archived memory is not revised again.
    assert!(matches!(
        store
            .memories()
            .revise_memory("bo", cat, &memsift_store::Revision::Expire, "x", t0())
            .await,
        Err(memsift_store::StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .memories()
            .undo_operation("bo", superseded.operation_id, t0())
            .await,
        Err(memsift_store::StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .memories()
            .revise_memory("ana", lisbon, &memsift_store::Revision::Expire, "x", t0())
            .await,
        Err(memsift_store::StoreError::Invalid(_))
    ));

    // Undo both, newest first: the rows are exactly what they were, Porto is gone.
    let undone = store
        .memories()
        .undo_operation("ana", superseded.operation_id, t0())
        .await
        .unwrap();
    assert_eq!(undone.deleted_memory_id, Some(porto.to_string()));
    store
        .memories()
        .undo_operation("ana", confirmed.operation_id, t0())
        .await
        .unwrap();
    assert_eq!(all_memory_rows(store, ana).await, original);
    assert!(matches!(
        store
            .memories()
            .undo_operation("ana", confirmed.operation_id, t0())
            .await,
        Err(memsift_store::StoreError::Invalid(_))
    ));
    assert_eq!(
        store.listing().list_memories("bo", None).await.unwrap()[0].id,
        bobs.to_string()
    );
    // The journal keeps both operations, marked undone.
    assert_eq!(store.count_rows("operations").await.unwrap(), 2);
}

pub async fn scoring_archives_the_lowest_under_the_floor_capped_and_undoably(store: &Store) {
    // Twenty old, never-read memories: all under the floor. A 10 % cap archives two of them.
    let mut ids = Vec::new();
    let mut ana = None;
    for index in 0..20 {
        let (user, id) = store
            .insert_test_memory("ana", &format!("Ana fact number {index}."))
            .await
            .unwrap();
        ana = Some(user);
        ids.push(id);
    }
    let ana = ana.unwrap();
    // One of them the user confirmed: it is never archived for low importance.
    store
        .memories()
        .revise_memory("ana", ids[0], &memsift_store::Revision::Confirm, "she said so", t0())
        .await
        .unwrap();
    let before = store.user_memory_states(ana).await.unwrap();
    let policy = memsift_store::ScoringPolicy {
        floor: 0.05,
        min_age_days: 30,
        max_share_per_run: 0.1,
    };
    // Too young: nothing is archived, however low the score.
    let young = store
        .memories()
        .score_memories(&policy, t0() + Duration::days(10))
        .await
        .unwrap();
    assert_eq!((young.n_scored, young.n_archived), (20, 0));

    let later = t0() + Duration::days(400);
    let report = store.memories().score_memories(&policy, later).await.unwrap();
    assert_eq!((report.n_users, report.n_scored, report.n_archived), (1, 20, 2));
    assert_eq!(report.n_spared_by_cap, 17, "19 unconfirmed under the floor, 2 archived");
    let active = store.listing().list_memories("ana", None).await.unwrap();
    assert_eq!(active.len(), 18);
    assert!(
        active.iter().any(|memory| memory.id == ids[0].to_string()),
        "the confirmed one stays"
    );
    assert_eq!(
        store.count_rows("operations").await.unwrap(),
        3,
        "one confirm, two archives"
    );

    // Each archive is journaled and undone like any revision.
    let archived: Vec<String> = store
        .user_memory_states(ana)
        .await
        .unwrap()
        .into_iter()
        .filter(|(_, _, state)| state.archived_at.is_some())
        .map(|(id, _, _)| id)
        .collect();
    assert_eq!(archived.len(), 2);
    for operation in store.operation_ids("ana", "score_archive").await.unwrap() {
        store.memories().undo_operation("ana", operation, later).await.unwrap();
    }
    let restored: Vec<_> = store
        .user_memory_states(ana)
        .await
        .unwrap()
        .into_iter()
        .map(|(id, text, state)| (id, text, state.archived_at, state.archive_reason))
        .collect();
    let original: Vec<_> = before
        .into_iter()
        .map(|(id, text, state)| (id, text, state.archived_at, state.archive_reason))
        .collect();
    assert_eq!(restored, original);
}

pub async fn scoring_archives_one_memory_per_run_for_a_user_with_fewer_than_twenty(store: &Store) {
    // Five old, never-read memories under the floor. A 5 % cap used to be floor(5 % × 5) = 0: a
    // user with fewer than twenty memories never had one archived. Rounded up, each run takes one.
    for index in 0..5 {
        store
            .insert_test_memory("ana", &format!("Ana fact number {index}."))
            .await
            .unwrap();
    }
    let policy = memsift_store::ScoringPolicy {
        floor: 0.05,
        min_age_days: 30,
        max_share_per_run: 0.05,
    };
    let later = t0() + Duration::days(400);
    let first = store.memories().score_memories(&policy, later).await.unwrap();
    assert_eq!((first.n_scored, first.n_archived, first.n_spared_by_cap), (5, 1, 4));
    let second = store.memories().score_memories(&policy, later).await.unwrap();
    assert_eq!((second.n_scored, second.n_archived, second.n_spared_by_cap), (4, 1, 3));
    assert_eq!(store.listing().list_memories("ana", None).await.unwrap().len(), 3);
    assert_eq!(store.operation_ids("ana", "score_archive").await.unwrap().len(), 2);
}
