//! Fixtures shared by the store cases.

use chrono::{DateTime, Duration, Utc};
use memsift_core::status::{Lane, Purpose, Role, Temporal};
use memsift_core::{MessageId, RequestId, SegmentId, UserId};
use memsift_store::{ApplyInput, MemoryTexts, NewMemory, NewMessage, NewRequest, StampState, Store};

pub fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

pub fn message(user: &str, conversation: &str, minute: i64, role: Role, content: &str) -> NewMessage {
    NewMessage {
        user_external_id: user.to_owned(),
        conversation_key: conversation.to_owned(),
        segment_name: None,
        role,
        speaker: None,
        content: content.to_owned(),
        at: t0() + Duration::minutes(minute),
        external_id: None,
        boundary_after: false,
        referenced_memory_ids: Vec::new(),
    }
}

pub fn idle() -> Duration {
    Duration::minutes(60)
}

pub fn no_progress(_: u64) {}

pub async fn segment_statuses(store: &Store, user: &str) -> Vec<(String, i64)> {
    store
        .listing()
        .list_segments(Some(user), None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|row| (row.status, row.n_messages))
        .collect()
}

pub(crate) fn item(text: &str, evidence: Vec<MessageId>) -> NewMemory {
    NewMemory {
        id: memsift_core::MemoryId::new_v7(),
        text: text.to_owned(),
        dedupe_key: memsift_core::text::dedupe_key(text),
        confidence: 0.9,
        happens_at: None,
        expires_at: None,
        sensitive: false,
        temporal: Temporal::Durable,
        hinted_memory_ids: Vec::new(),
        related_memory_ids: Vec::new(),
        linking_hints: Vec::new(),
        relationship_type: None,
        entities: Vec::new(),
        evidence,
    }
}

/// Ingests one closed two-turn segment for `user` and claims it; returns (segment, user, message ids).
pub(crate) async fn closed_claimed_segment(
    store: &Store,
    user: &str,
    conversation: &str,
) -> (SegmentId, UserId, Vec<MessageId>) {
    let mut second = message(user, conversation, 1, Role::Assistant, "Noted.");
    second.boundary_after = true;
    let messages = vec![
        message(user, conversation, 0, Role::User, "I live in Lisbon with my cat Miso."),
        second,
    ];
    store
        .messages()
        .ingest(&messages, idle(), t0(), &no_progress)
        .await
        .unwrap();
    let claimed = store
        .segments()
        .claim_segments("worker-a", t0(), Duration::minutes(15), 100)
        .await
        .unwrap();
    let mine = claimed
        .into_iter()
        .find(|segment| segment.attempt == 1)
        .expect("the new segment is claimable");
    let turns = store.segments().segment_turns(mine.id).await.unwrap();
    (
        mine.id,
        mine.user_id,
        turns.into_iter().map(|turn| turn.message_id).collect(),
    )
}

pub(crate) fn request(segment_id: SegmentId, user_id: UserId, chunk_index: i64) -> NewRequest {
    NewRequest {
        id: RequestId::new_v7(),
        purpose: Purpose::Extraction,
        user_id,
        segment_id: Some(segment_id),
        chunk_index,
        lane: Lane::Heuristic,
        config_key: "extraction_standard".to_owned(),
        provider: "heuristic".to_owned(),
        model: None,
        prompt_version: "heuristic@1".to_owned(),
        context: Default::default(),
        request_body: Default::default(),
        subject: Default::default(),
        parent_request_id: None,
        reserved_usd: 0.0,
        max_output_tokens: None,
    }
}

pub(crate) fn apply_input(request: &NewRequest, items: Vec<NewMemory>) -> ApplyInput {
    ApplyInput {
        request_id: request.id,
        user_id: request.user_id,
        segment_id: request.segment_id,
        prompt_version: request.prompt_version.clone(),
        model: None,
        items,
        drops: Vec::new(),
        duplicate_evidence: Vec::new(),
        n_dropped: 0,
        embeddings: None,
        continuation: Default::default(),
        replay: None,
        now: t0(),
    }
}

/// What a memory lexicon built at `since` (everything with `None`) would read of `user_id`.
pub async fn memory_texts_since(store: &Store, user_id: UserId, since: Option<i64>) -> (StampState, MemoryTexts) {
    store.search().memory_texts_since(user_id, since).await.unwrap()
}

/// Ingests `messages` at `t0()` with the default idle timeout.
pub async fn ingest_now(store: &Store, messages: &[NewMessage]) -> memsift_store::IngestReport {
    store
        .messages()
        .ingest(messages, idle(), t0(), &no_progress)
        .await
        .unwrap()
}
