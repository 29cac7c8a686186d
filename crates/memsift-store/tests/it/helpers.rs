//! Fixtures shared by the store cases.

use chrono::{DateTime, Duration, Utc};
use memsift_core::status::Role;
use memsift_store::NewMessage;

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
