//! A message as the import formats and the HTTP API hand it to the store, and its idempotency key.

use chrono::{DateTime, Utc};

use crate::MemoryId;
use crate::status::Role;
use crate::text::short_hash;

/// One message to ingest.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    /// The host application's id for the user.
    pub user_external_id: String,
    /// The conversation (session) key; segments never span two conversations.
    pub conversation_key: String,
    /// A name for the segment this message starts, if the source has one (a LoCoMo session).
    pub segment_name: Option<String>,
    /// Who spoke.
    pub role: Role,
    /// The speaker's name, when the source names speakers.
    pub speaker: Option<String>,
    /// The text.
    pub content: String,
    /// When it was said.
    pub at: DateTime<Utc>,
    /// The source's id for the message (a LoCoMo `dia_id`), kept so memories can cite it.
    pub external_id: Option<String>,
    /// Close the segment after this message.
    pub boundary_after: bool,
    /// Memories the host application showed the assistant for this turn (retrieval hits); they
    /// become the known-memory context of the chunk, so the model can mark updates to them.
    pub referenced_memory_ids: Vec<MemoryId>,
}

impl NewMessage {
    /// The idempotency key: the source id when there is one, else a hash of what was said when.
    pub fn dedupe_key(&self) -> String {
        match &self.external_id {
            Some(external_id) => format!("id:{}\u{1f}{}", self.conversation_key, external_id),
            None => {
                let material = format!(
                    "{}\u{1f}{}\u{1f}{}\u{1f}{}",
                    self.conversation_key,
                    self.at.timestamp_millis(),
                    self.role.as_str(),
                    self.content
                );
                format!("h:{}", short_hash(material.as_bytes(), 32))
            }
        }
    }
}
